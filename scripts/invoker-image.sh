#!/usr/bin/env bash
# Build the ow-invoker image (deploy/invoker/Dockerfile) into a Docker Engine, from Debian
# packages and PyPI:
#
#   DOCKER_HOST=unix://.../docker.sock scripts/invoker-image.sh [TAG]   # localhost/ow-invoker:test
#
# OW_INVOKER_BASE: the image to build FROM. Default localhost/ow-debian:bookworm, made here
# when the engine lacks it: a minbase Debian 12 rootfs from $DEBIAN_MIRROR (debootstrap,
# cached in .cache/debian/) imported with `docker import`, for engines that cannot reach
# Docker Hub; give OW_INVOKER_BASE=debian:bookworm-slim where they can. The build runs with
# the host's network (the test engines have no bridge) for apt and pip, trusting the CAs of
# OW_BUILD_CA_FILE (default: $PIP_CERT) for pip's downloads. The context is
# staged: the project's packages, pyproject.toml and README.md, nothing else of the tree.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OW_CACHE_DIR:-$ROOT/.cache}"
TAG="${1:-localhost/ow-invoker:test}"
BASE="${OW_INVOKER_BASE:-localhost/ow-debian:bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=(whisk invoker ow_invoker policies containers gpu front sebs_wrappers gatling)

log() { printf '[invoker-image] %s\n' "$*" >&2; }
die() { printf '[invoker-image] ERROR: %s\n' "$*" >&2; exit 1; }

[[ -n "${DOCKER_HOST:-}" ]] || die "DOCKER_HOST must name the engine (unix://.../docker.sock)"
command -v docker >/dev/null || die "the docker client is missing: run scripts/install.sh docker"

if [[ "$BASE" == localhost/ow-debian:bookworm ]] && ! docker image inspect "$BASE" >/dev/null 2>&1; then
    tarball="$CACHE/debian/bookworm-minbase.tar"
    if [[ ! -f "$tarball" ]]; then
        command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
        [[ $EUID -eq 0 ]] || die "debootstrap needs root"
        mkdir -p "$CACHE/debian"
        rootfs="$(mktemp -d /var/tmp/ow-debian.XXXXXX)"
        log "debootstrap bookworm (minbase) from $MIRROR"
        debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$CACHE/debian/debootstrap.log" 2>&1 \
            || { tail -20 "$CACHE/debian/debootstrap.log" >&2; die "debootstrap failed"; }
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
        rm -rf "$rootfs"
    fi
    log "importing $tarball as $BASE"
    docker import --change 'CMD ["/bin/bash"]' "$tarball" "$BASE" >/dev/null
fi

ctx="$(mktemp -d /var/tmp/ow-invoker-ctx.XXXXXX)"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/src"
cp "$ROOT/deploy/invoker/Dockerfile" "$ROOT/deploy/invoker/init.sh" "$ctx/"
cp "$ROOT/pyproject.toml" "$ROOT/README.md" "$ctx/src/"
# The CAs pip trusts on this host (PIP_CERT, e.g. a TLS-inspecting proxy's), for the build.
build_ca="${OW_BUILD_CA_FILE:-${PIP_CERT:-}}"
if [[ -n "$build_ca" ]]; then cp "$build_ca" "$ctx/build-ca.pem"; else : >"$ctx/build-ca.pem"; fi
for p in "${PACKAGES[@]}"; do
    tar -C "$ROOT" --exclude=__pycache__ --exclude='*.pyc' -cf - "$p" | tar -C "$ctx/src" -xf -
done
log "building $TAG from $BASE"
DOCKER_BUILDKIT=0 docker build --quiet --network host --build-arg "BASE=$BASE" -t "$TAG" "$ctx" >/dev/null \
    || die "docker build of $TAG failed"
log "built $TAG"
