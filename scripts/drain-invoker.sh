#!/usr/bin/env bash
# Drain one invoker before it is stopped, so that no call it has taken is lost.
#
#   scripts/drain-invoker.sh [--quiet S] [--timeout S] [--password-file F] ADMIN_URL
#   scripts/drain-invoker.sh --stock CONTAINER_PREFIX [--quiet S] [--timeout S] ADMIN_URL
#
# ADMIN_URL is the invoker's admin endpoint (ours: --admin-port, default 8085; the Scala
# invoker: its PORT, 8080 in ansible deployments). Credentials come from
# CONFIG_whisk_invoker_username / CONFIG_whisk_invoker_password, which both invokers read,
# or the password from --password-file (ours, without a configured password: the random
# one in <state-dir>/admin.password); else the stock default invoker.pass. They reach curl
# on its standard input, never on a command line.
#
#  1. POST /disable: the invoker sends one isEnabled:false ping and stops pinging, so the
#     controller marks it offline and sends its new calls to other invokers.
#  2. Wait until the invoker has held no call for QUIET seconds (default 5):
#     ours:    GET /activations says "pending": 0 (nothing received and unfinished).
#     --stock: the Scala invoker has no such view and commits each message as it receives
#              it, so the watch is on its action containers through the docker CLI
#              (DOCKER_HOST as for the invoker): none named CONTAINER_PREFIX* (stock:
#              wsk<uniqueName><N>_, e.g. wsk0_) may be created or running unpaused,
#              prewarm ones aside. A container is paused pause-grace (10 s) after its last
#              call ends, so this waits at least that long. A call whose image is still
#              being pulled has no container yet: give --quiet more than a pull takes
#              when the node runs blackbox images.
#  3. Print "drained" and exit 0: stop the process now (systemctl stop, kill -TERM).
#
# Exit 1: still busy after --timeout seconds (default 360: the stock 5-minute time limit
# plus a minute); the invoker stays disabled. Exit 2: bad usage or the admin endpoint
# refused or did not answer.
set -euo pipefail

QUIET=5
TIMEOUT=360
STOCK=""
PASSWORD_FILE=""
usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quiet) QUIET="${2:?}"; shift 2 ;;
        --timeout) TIMEOUT="${2:?}"; shift 2 ;;
        --stock) STOCK="${2:?}"; shift 2 ;;
        --password-file) PASSWORD_FILE="${2:?}"; shift 2 ;;
        -h|--help) usage ;;
        -*) echo "drain-invoker: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[[ $# -eq 1 ]] || usage
URL="${1%/}"
[[ "$QUIET" =~ ^[0-9]+$ && "$TIMEOUT" =~ ^[0-9]+$ ]] || { echo "drain-invoker: --quiet and --timeout take whole seconds" >&2; exit 2; }
PASSWORD="${CONFIG_whisk_invoker_password:-}"
if [[ -n "$PASSWORD_FILE" ]]; then
    PASSWORD="$(cat "$PASSWORD_FILE")" || { echo "drain-invoker: cannot read $PASSWORD_FILE" >&2; exit 2; }
fi
USER_PASS="${CONFIG_whisk_invoker_username:-invoker.user}:${PASSWORD:-invoker.pass}"
# curl's options from stdin (-K -): the password stays out of every process's command line.
admin_curl() { printf 'user = "%s"\n' "$USER_PASS" | curl -K - "$@"; }

say() { printf 'drain-invoker: %s\n' "$*" >&2; }

if ! answer=$(admin_curl -sS --fail-with-body -m 10 -X POST "$URL/disable" 2>&1); then
    say "POST $URL/disable failed: $answer"
    exit 2
fi
say "$answer"

# How many calls the invoker holds now (a number), or fail.
held() {
    if [[ -n "$STOCK" ]]; then
        local listing
        listing=$(docker ps -a --filter "name=^${STOCK}" --format '{{.Names}} {{.State}}') || return 1
        # Being created, or running unpaused: a call is (or is about to be) in it.
        awk '$1 !~ /_prewarm_/ && ($2 == "created" || $2 == "running" || $2 == "restarting") { n++ }
             END { print n + 0 }' <<<"$listing"
    else
        admin_curl -sS --fail -m 10 "$URL/activations?limit=0" \
            | python3 -c 'import json, sys; print(json.load(sys.stdin)["pending"])'
    fi
}

start=$SECONDS
quiet_since=$SECONDS
while true; do
    if ! n=$(held); then
        say "cannot read what the invoker holds"
        exit 2
    fi
    if [[ "$n" != 0 ]]; then
        quiet_since=$SECONDS
        say "$n calls held"
    elif (( SECONDS - quiet_since >= QUIET )); then
        echo "drained"
        exit 0
    fi
    if (( SECONDS - start >= TIMEOUT )); then
        if [[ "$n" != 0 ]]; then
            say "still $n calls held after ${TIMEOUT}s; the invoker stays disabled (POST $URL/enable to undo)"
        else
            say "no call held for only $((SECONDS - quiet_since))s of --quiet ${QUIET}s after ${TIMEOUT}s; the invoker stays disabled (POST $URL/enable to undo)"
        fi
        exit 1
    fi
    sleep 1
done
