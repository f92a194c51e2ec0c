#!/usr/bin/env bash
# THE one command to try the project: install the invoker, start the whole platform locally
# (the controller-compatible API + one invoker, embedded bus and store, process containers),
# create a first action and invoke it, then keep serving until Ctrl-C.
#
#   scripts/run.sh [ow-invoker standalone flags...]     e.g. scripts/run.sh --policy sept
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${OW_VENV:-$ROOT/.venv}"
STATE="${OW_RUN_STATE:-$ROOT/.state/standalone}"

scripts/install.sh core
# The console's charts (npm); the platform and the rest of the console work without them.
scripts/install.sh console || echo "[run] the console's charts are not installed (see above)" >&2
mkdir -p "$STATE"
rm -f "$STATE/ready"

"$VENV/bin/ow-invoker" standalone --state-dir "$STATE" --ready-file "$STATE/ready" "$@" &
PID=$!
stop() { kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
trap stop EXIT INT TERM

for _ in $(seq 1 240); do
    [[ -s "$STATE/ready" ]] && break
    kill -0 "$PID" 2>/dev/null || { echo "ow-invoker standalone exited" >&2; exit 1; }
    sleep 0.25
done
[[ -s "$STATE/ready" ]] || { echo "the platform did not become ready in 60 s" >&2; exit 1; }

"$VENV/bin/python" "$ROOT/scripts/first_action.py" "$(cat "$STATE/ready")"
echo
echo "The platform keeps running (Ctrl-C stops it)."
wait "$PID"
