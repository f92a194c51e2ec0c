#!/usr/bin/env bash
# THE one command: install everything the tests need, lint, and run the whole test suite.
#
#   scripts/test.sh [pytest args...]      e.g. scripts/test.sh -m "not services" -x
#   scripts/test.sh --fast [pytest args]  the inner loop: the unit tier (tests/README.md;
#                                         about a minute, docs/testing.md), after ruff
#
# Services (Kafka, the CouchDB-API server, Podman, dockerd) are started by the pytest session
# fixtures (tests/conftest.py) on the tests' own ports, not here, so plain `pytest` gets them
# too. Each one they start is listed in a file of this run (OW_TEST_STARTED) and stopped on
# the way out however the run ends: done, interrupted, terminated, or this script killed
# (scripts/stop-started.sh, in a session of its own, notices and stops them).
# Exit status: non-zero when the install, ruff check, ruff format --check, mypy, lint-imports
# or pytest fails.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${OW_VENV:-$ROOT/.venv}"
FAST=0
if [[ "${1:-}" == "--fast" ]]; then
    FAST=1
    shift
fi
# The unit tier (tests/README.md): every test that needs nothing outside the test process:
# no service, no container engine, no root, no child process of ours; on every core.
FAST_TESTS=(tests/unit -n auto)

step() { printf '\n=== %s\n' "$*" >&2; }

STARTED="$ROOT/.state/test-run.$$.services"
mkdir -p "$ROOT/.state"
: >"$STARTED"
export OW_TEST_STARTED="$STARTED"
# A skip not in tests/expected-skips.txt, or a host left otherwise than the run found it
# (mounts, processes, network namespaces, cgroups, /tmp: tests/hostguard.py), fails the run.
export OW_TEST_SKIPS=strict OW_TEST_HOST_GUARD=strict
PYTEST_PID=""
trap 'scripts/stop-started.sh "$STARTED"; rm -f "${TMP_BEFORE:-}"' EXIT
on_signal() { # $1: the exit status. Interrupt pytest's group: its fixtures tear down first.
    trap - INT TERM HUP
    if [[ -n "$PYTEST_PID" ]] && kill -0 "$PYTEST_PID" 2>/dev/null; then
        kill -INT -- "-$PYTEST_PID" 2>/dev/null || true
        for _ in $(seq 60); do kill -0 "$PYTEST_PID" 2>/dev/null || break; sleep 0.5; done
        kill -KILL -- "-$PYTEST_PID" 2>/dev/null || true
    fi
    exit "$1" # the EXIT trap stops what is still running
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP

# The pytest session's host guard opens after the install; what the install leaves in /tmp
# (a JVM's hsperfdata once) is looked for from here to the run's end (tmp_left below).
TMP_BEFORE="$ROOT/.state/test-run.$$.tmp"
ls -A /tmp | sort >"$TMP_BEFORE"
tmp_left() { # the /tmp entries made since TMP_BEFORE, less OW_TEST_HOST_GUARD_IGNORE's globs
    local entry pattern
    while read -r entry; do
        for pattern in ${OW_TEST_HOST_GUARD_IGNORE:-}; do
            # shellcheck disable=SC2053 # a glob, on purpose
            [[ "$entry" == $pattern ]] && continue 2
        done
        echo "$entry"
    done < <(comm -13 "$TMP_BEFORE" <(ls -A /tmp | sort))
}

if ((FAST)); then
    step "scripts/install.sh python"
    scripts/install.sh python || { echo "install failed" >&2; exit 1; }
else
    step "scripts/install.sh all"
    start=$(date +%s)
    scripts/install.sh all || { echo "install failed" >&2; exit 1; }
    echo "[test] install: $(($(date +%s) - start)) s" >&2
fi

rc=0
step "ruff check"
"$VENV/bin/ruff" check . || rc=1
step "ruff format --check"
"$VENV/bin/ruff" format --check . || rc=1
if ((!FAST)); then
    step "mypy (the type checker, [tool.mypy] in pyproject.toml)"
    "$VENV/bin/mypy" || rc=1
    step "lint-imports (the layering contract, [tool.importlinter] in pyproject.toml)"
    "$VENV/bin/lint-imports" || rc=1
fi

# The whole suite in lanes (tests/lanes.py): pytest-xdist workers, each integration lane in
# one of them with services of its own, the CPU-only tests wherever a worker is free.
# OW_TEST_WORKERS=0 runs it in one process, as plain pytest does. The 20 slowest tests are
# listed at the end: where the suite's time goes (docs/testing.md).
WORKERS="${OW_TEST_WORKERS:-4}"
if ((FAST)); then
    args=("${FAST_TESTS[@]}" "$@")
elif ((WORKERS > 0)); then
    args=(-n "$WORKERS" --dist loadgroup --durations=20 "$@")
else
    args=("$@")
fi
step "pytest ${args[*]}"
# In a process group of its own (job control on for this one command), so that a signal to
# this script reaches pytest through on_signal, and its children with it.
set -m
"$VENV/bin/python" -m pytest -q "${args[@]}" &
PYTEST_PID=$!
set +m
setsid scripts/stop-started.sh "$STARTED" --after $$ --group "$PYTEST_PID" </dev/null \
    >>"$ROOT/.state/stop-started.log" 2>&1 &
wait "$PYTEST_PID"
prc=$?
PYTEST_PID=""
if ((prc == 5)); then
    echo "[test] pytest collected no tests" >&2
fi
((prc == 0)) || rc=$prc
left="$(tmp_left)"
if [[ -n "$left" ]]; then
    echo "[test] the install or the run left in /tmp: $(echo "$left" | tr '\n' ' ')" >&2
    ((rc != 0)) || rc=1
fi

if ((rc == 0)); then
    echo "[test] all green" >&2
else
    echo "[test] FAILED (exit $rc)" >&2
fi
exit "$rc"
