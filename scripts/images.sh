#!/usr/bin/env bash
# Build the local container images the tests use; no registry is needed (or reachable).
#
#   scripts/images.sh            # build what is missing (Podman's storage)
#   OW_FORCE_IMAGES=1 scripts/images.sh   # rebuild
#   OW_ENGINE=docker DOCKER_HOST=unix://.../docker.sock scripts/images.sh   # into a dockerd
#
# Images:
#   localhost/ow-busybox:latest  a busybox-static rootfs (sh, sleep, wget, nc, httpd, ...)
#                                imported with `podman import` / `docker import`; CMD ["/bin/sh"].
# The rootfs tarball stays in .cache/podman/busybox-rootfs.tar so other storage roots (and
# each dockerd's data root) import the same one. Needs busybox-static, and podman
# (scripts/install.sh podman) or a running dockerd (scripts/services.sh start docker).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OW_CACHE_DIR:-$ROOT/.cache}"
BUSYBOX_IMAGE="${OW_BUSYBOX_IMAGE:-localhost/ow-busybox:latest}"
ENGINE="${OW_ENGINE:-podman}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$CACHE/podman/containers.conf}"

log() { printf '[images] %s\n' "$*" >&2; }
die() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }

case "$ENGINE" in
    podman)
        command -v podman >/dev/null || die "podman is not installed: run scripts/install.sh podman"
        cli() { podman "$@"; }
        ;;
    docker)
        [[ -n "${DOCKER_HOST:-}" ]] || die "OW_ENGINE=docker needs DOCKER_HOST (the dockerd's socket)"
        command -v docker >/dev/null || die "the docker client is missing: run scripts/install.sh docker"
        cli() { docker "$@"; }
        ;;
    *) die "OW_ENGINE must be podman or docker, not '$ENGINE'" ;;
esac
[[ -x /bin/busybox ]] || die "/bin/busybox is missing: apt-get install -y busybox-static"

busybox_rootfs_tar() {
    local tar="$CACHE/podman/busybox-rootfs.tar" tmp rootfs applet
    if [[ -s "$tar" && "${OW_FORCE_IMAGES:-0}" != 1 ]]; then
        printf '%s' "$tar"
        return
    fi
    mkdir -p "$CACHE/podman"
    tmp="$(mktemp -d)"
    rootfs="$tmp/rootfs"
    mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,proc,sys,dev,root,home,var/tmp}
    chmod 1777 "$rootfs/tmp" "$rootfs/var/tmp"
    cp /bin/busybox "$rootfs/bin/busybox"
    # One symlink per applet (/bin/sh, /bin/sleep, /usr/bin/wget, ...).
    while read -r applet; do
        [[ -e "$rootfs/$applet" || -L "$rootfs/$applet" ]] || ln -s /bin/busybox "$rootfs/$applet"
    done < <(/bin/busybox --list-full)
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' \
        >"$rootfs/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
    tar --numeric-owner --owner=0 --group=0 -C "$rootfs" -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    rm -rf "$tmp"
    printf '%s' "$tar"
}

build_busybox() {
    if cli image inspect "$BUSYBOX_IMAGE" >/dev/null 2>&1 && [[ "${OW_FORCE_IMAGES:-0}" != 1 ]]; then
        log "$BUSYBOX_IMAGE: present"
        return
    fi
    local tar
    tar="$(busybox_rootfs_tar)"
    log "$BUSYBOX_IMAGE: $ENGINE import $tar"
    cli import \
        --change 'CMD ["/bin/sh"]' \
        --change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
        --message 'ow-invoker test image (busybox-static)' \
        "$tar" "$BUSYBOX_IMAGE" >/dev/null || die "$ENGINE import failed"
    log "$BUSYBOX_IMAGE: built ($(cli image inspect --format '{{.Size}}' "$BUSYBOX_IMAGE") bytes)"
}

build_busybox
