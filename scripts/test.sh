#!/usr/bin/env bash
# THE one command: install everything the tests need, lint, and run the whole test suite.
#
#   scripts/test.sh [pytest args...]      e.g. scripts/test.sh -m "not services" -x
#
# Services (Kafka, the CouchDB-API server, Podman) are started by the pytest session fixtures
# (tests/conftest.py) on the tests' own ports, not here, so plain `pytest` gets them too.
# Exit status: non-zero when the install, ruff check, ruff format --check, mypy, lint-imports
# or pytest fails.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${OW_VENV:-$ROOT/.venv}"

step() { printf '\n=== %s\n' "$*" >&2; }

step "scripts/install.sh all"
start=$(date +%s)
scripts/install.sh all || { echo "install failed" >&2; exit 1; }
echo "[test] install: $(($(date +%s) - start)) s" >&2

rc=0
step "ruff check"
"$VENV/bin/ruff" check . || rc=1
step "ruff format --check"
"$VENV/bin/ruff" format --check . || rc=1
step "mypy (the type checker, [tool.mypy] in pyproject.toml)"
"$VENV/bin/mypy" || rc=1
step "lint-imports (the layering contract, [tool.importlinter] in pyproject.toml)"
"$VENV/bin/lint-imports" || rc=1

step "pytest $*"
"$VENV/bin/python" -m pytest -q "$@"
prc=$?
if ((prc == 5)); then
    echo "[test] pytest collected no tests" >&2
fi
((prc == 0)) || rc=$prc

if ((rc == 0)); then
    echo "[test] all green" >&2
else
    echo "[test] FAILED (exit $rc)" >&2
fi
exit "$rc"
