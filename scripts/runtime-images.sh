#!/usr/bin/env bash
# Build local stand-ins for the official OpenWhisk runtime images, for the Docker backend's
# tests and benchmarks on machines without a registry (see docs/docker.md). The one place that
# says how images are built, for either engine:
#
#   scripts/runtime-images.sh              # into Podman's storage: build what is missing or old
#   OW_FORCE_IMAGES=1 scripts/runtime-images.sh
#   OW_ENGINE=docker DOCKER_HOST=unix://.../docker.sock scripts/runtime-images.sh   # a dockerd
#     (scripts/services.sh start docker runs this itself)
#
# Podman: `podman build --network=none --pull=never`. Docker: the classic builder
# (DOCKER_BUILDKIT=0 `docker build --network=none --pull=false`), which needs no buildx.
# Images (FROM localhost/ow-busybox:latest, built by scripts/images.sh if missing):
#   localhost/ow-action-python:test   the project's python runtime on :8080
#   localhost/ow-action-nodejs:test   the project's node runtime on :8080
# Both speak /init + /run like openwhisk/action-python-v3.11 and action-nodejs-v20, on
# 0.0.0.0:8080, or on the address in __OW_RUNTIME_LISTEN (host networking). They carry only
# busybox and the runtime sources (/ow); the interpreters come from the host: containers must
# bind the host's /usr read-only (`-v /usr:/usr:ro`; /lib and /lib64 are links into it, as on
# Debian 12). An image is rebuilt when the runtime sources change (label ow.sources).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OW_CACHE_DIR:-$ROOT/.cache}"
BASE_IMAGE="${OW_BUSYBOX_IMAGE:-localhost/ow-busybox:latest}"
PYTHON_IMAGE="${OW_PYTHON_IMAGE:-localhost/ow-action-python:test}"
NODE_IMAGE="${OW_NODE_IMAGE:-localhost/ow-action-nodejs:test}"
RUNTIMES="$ROOT/containers/runtimes"
SOURCES=(docker_entry.py python_runtime.py node_runtime.js)
ENGINE="${OW_ENGINE:-podman}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$CACHE/podman/containers.conf}"

log() { printf '[runtime-images] %s\n' "$*" >&2; }
die() { printf '[runtime-images] ERROR: %s\n' "$*" >&2; exit 1; }

case "$ENGINE" in
    podman)
        command -v podman >/dev/null || die "podman is not installed: run scripts/install.sh podman"
        cli() { podman "$@"; }
        build_image() { # build_image TAG CONTEXT
            podman build --quiet --pull=never --network=none --layers=false -t "$1" "$2"
        }
        ;;
    docker)
        [[ -n "${DOCKER_HOST:-}" ]] || die "OW_ENGINE=docker needs DOCKER_HOST (the dockerd's socket)"
        command -v docker >/dev/null || die "the docker client is missing: run scripts/install.sh docker"
        cli() { docker "$@"; }
        build_image() {
            DOCKER_BUILDKIT=0 docker build --quiet --pull=false --network=none --rm \
                -f "$2/Containerfile" -t "$1" "$2" 2>&1
        }
        ;;
    *) die "OW_ENGINE must be podman or docker, not '$ENGINE'" ;;
esac
[[ -x /usr/bin/python3 ]] || die "/usr/bin/python3 is missing (the images use the host's)"
[[ -L /lib && -L /lib64 ]] || log "warning: /lib or /lib64 is not a link into /usr; binding /usr may not be enough"
cli image inspect "$BASE_IMAGE" >/dev/null 2>&1 || "$ROOT/scripts/images.sh"

# What the images are made of: a change rebuilds them.
digest="$(cd "$RUNTIMES" && cat "${SOURCES[@]}" "$ROOT/scripts/runtime-images.sh" | sha256sum | cut -c1-16)"

build() { # build IMAGE ENTRY-MODE
    local image="$1" mode="$2" have old ctx
    have="$(cli image inspect --format '{{index .Config.Labels "ow.sources"}}' "$image" 2>/dev/null || true)"
    old="$(cli image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
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
    log "$image: $ENGINE build (offline, from $BASE_IMAGE)"
    local out
    # Once more after a failure: on a loaded machine the OCI runtime has failed to start a
    # build step's container once (runc: "failed to read init pid file"), never twice.
    if ! out="$(build_image "$image" "$ctx")"; then
        printf '%s\n' "$out" >&2
        log "$image: the build failed; trying once more"
        out="$(build_image "$image" "$ctx")" || { printf '%s\n' "$out" >&2; die "$ENGINE build of $image failed"; }
    fi
    log "$image: built"
    # The replaced build, unless a container still uses it.
    [[ -z "$old" ]] || cli rmi "$old" >/dev/null 2>&1 || true
}

build "$PYTHON_IMAGE" python
build "$NODE_IMAGE" node
