#!/usr/bin/env bash
# Stop the services a test run started, however the run ended.
#
#   scripts/stop-started.sh FILE [--after PID [--group PGID]]
#
# FILE lists "service<TAB>state root" lines: tests/services.py appends one before it starts a
# service, when OW_TEST_STARTED names the file (scripts/test.sh sets it). Each is stopped by
# scripts/services.sh, which signals only the PID it recorded for that state dir; FILE is
# removed after. With --after, first wait until process PID has ended: scripts/test.sh starts
# this in a session of its own, so that even a SIGKILL of test.sh stops what its pytest
# started. With --group, then interrupt that process group (the orphaned pytest run, which
# tears its fixtures down), give it 30 s and kill what is left of it.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
file="${1:?usage: stop-started.sh FILE [--after PID [--group PGID]]}"
shift
after="" group=""
while (($#)); do
    case "$1" in
        --after) after="$2"; shift 2 ;;
        --group) group="$2"; shift 2 ;;
        *) echo "stop-started.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

alive() { [[ -d "/proc/$1" ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

if [[ -n "$after" ]]; then
    while alive "$after"; do sleep 1; done
    [[ -f "$file" ]] || exit 0 # the run ended normally and stopped its services itself
    echo "[stop-started] test run $after ended without stopping its services" >&2
    if [[ -n "$group" ]] && kill -0 -- "-$group" 2>/dev/null; then
        kill -INT -- "-$group" 2>/dev/null || true
        for _ in $(seq 60); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.5; done
        kill -KILL -- "-$group" 2>/dev/null || true
    fi
fi

[[ -f "$file" ]] || exit 0
sort -u "$file" | while IFS=$'\t' read -r svc state; do
    [[ -n "$svc" && -n "$state" ]] || continue
    OW_STATE_DIR="$state" "$ROOT/scripts/services.sh" stop "$svc" || true
done
rm -f "$file"
