#!/usr/bin/env bash
# Build local stand-ins for the official OpenWhisk runtime images, for the Docker backend's
# tests and benchmarks on machines without a registry (see docs/docker.md).
#
#   scripts/runtime-images.sh              # build what is missing or out of date
#   OW_FORCE_IMAGES=1 scripts/runtime-images.sh
#
# Images (FROM localhost/ow-busybox:latest, built by scripts/images.sh if missing):
#   localhost/ow-action-python:test   the project's python runtime on :8080
#   localhost/ow-action-nodejs:test   the project's node runtime on :8080
# Both speak /init + /run like openwhisk/action-python-v3.11 and action-nodejs-v20. They carry
# only busybox and the runtime sources (/ow); the interpreters come from the host: containers
# must bind the host's /usr read-only (`-v /usr:/usr:ro`; /lib and /lib64 are links into it,
# as on Debian 12). An image is rebuilt when the runtime sources change (label ow.sources).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OW_CACHE_DIR:-$ROOT/.cache}"
BASE_IMAGE="${OW_BUSYBOX_IMAGE:-localhost/ow-busybox:latest}"
PYTHON_IMAGE="${OW_PYTHON_IMAGE:-localhost/ow-action-python:test}"
NODE_IMAGE="${OW_NODE_IMAGE:-localhost/ow-action-nodejs:test}"
RUNTIMES="$ROOT/containers/runtimes"
SOURCES=(docker_entry.py python_runtime.py node_runtime.js)
export CONTAINERS_CONF="${CONTAINERS_CONF:-$CACHE/podman/containers.conf}"

log() { printf '[runtime-images] %s\n' "$*" >&2; }
die() { printf '[runtime-images] ERROR: %s\n' "$*" >&2; exit 1; }

command -v podman >/dev/null || die "podman is not installed: run scripts/install.sh podman"
[[ -x /usr/bin/python3 ]] || die "/usr/bin/python3 is missing (the images use the host's)"
[[ -L /lib && -L /lib64 ]] || log "warning: /lib or /lib64 is not a link into /usr; binding /usr may not be enough"
podman image exists "$BASE_IMAGE" || "$ROOT/scripts/images.sh"

# What the images are made of: a change rebuilds them.
digest="$(cd "$RUNTIMES" && cat "${SOURCES[@]}" "$ROOT/scripts/runtime-images.sh" | sha256sum | cut -c1-16)"

build() { # build IMAGE ENTRY-MODE
    local image="$1" mode="$2" have old ctx
    have="$(podman image inspect --format '{{index .Labels "ow.sources"}}' "$image" 2>/dev/null || true)"
    old="$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
    if [[ "$have" == "$digest" && "${OW_FORCE_IMAGES:-0}" != 1 ]]; then
        log "$image: up to date"
        return
    fi
    ctx="$(mktemp -d)"
    trap 'rm -rf "$ctx"' RETURN
    cp "${SOURCES[@]/#/$RUNTIMES/}" "$ctx/"
    cat >"$ctx/Containerfile" <<EOF
FROM $BASE_IMAGE
RUN ln -s usr/lib /lib && ln -s usr/lib64 /lib64 && mkdir -p /ow /action
COPY ${SOURCES[*]} /ow/
ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
WORKDIR /action
EXPOSE 8080
LABEL ow.sources=$digest ow.binds=/usr:/usr:ro
ENTRYPOINT ["/usr/bin/python3", "-I", "-B", "/ow/docker_entry.py", "$mode"]
EOF
    log "$image: podman build (offline, from $BASE_IMAGE)"
    podman build --quiet --pull=never --network=none --layers=false -t "$image" "$ctx" >/dev/null \
        || die "podman build of $image failed"
    log "$image: built"
    # The replaced build, unless a container still uses it.
    [[ -z "$old" ]] || podman rmi "$old" >/dev/null 2>&1 || true
}

build "$PYTHON_IMAGE" python
build "$NODE_IMAGE" node
