"""One live process backend per container-name prefix on a host.

A backend's start-up removes whatever carries its prefix (cgroups and processes are
host-wide, and a killed run's leftovers must go). A second invoker started on the same host
with the same name would therefore destroy a running one's containers; it is refused
instead, by an exclusive lock on a per-prefix file that the kernel drops when its holder
exits, however it exits.

The locks live where every invoker of the host sees the same files (:func:`lock_dir`), never
in the temporary directory: ``TMPDIR`` or systemd's ``PrivateTmp=yes`` give each invoker a
``/tmp`` of its own, and two invokers would then take the same prefix or uid block.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path


class PrefixInUse(ValueError):
    """Another live backend on this host uses the prefix (a configuration error)."""


RUN_DIR_ENV = "OW_INVOKER_RUN_DIR"  # an override: the test suite keeps its locks apart


def lock_dir() -> Path:
    """The host-wide directory of this user's invokers (locks; the process backend's sandbox
    roots and sockets): ``/run/ow-invoker`` as root; else ``$XDG_RUNTIME_DIR/ow-invoker``,
    ``/run/user/<uid>/ow-invoker`` or ``/dev/shm/ow-invoker-<uid>``, the first that exists.
    Not ``/tmp`` or ``/var/tmp``: ``PrivateTmp=yes`` hides both."""
    if override := os.environ.get(RUN_DIR_ENV):
        return Path(override)
    uid = os.geteuid()
    if uid == 0:
        return Path("/run/ow-invoker")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    for runtime in (xdg, f"/run/user/{uid}"):
        if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
            return Path(runtime) / "ow-invoker"
    return Path(f"/dev/shm/ow-invoker-{uid}")


def sandbox_dir() -> Path:
    """Where the process backend's sandbox roots and sockets go: the lock directory, unless
    that is in a non-root user's runtime directory (0700, which containers' uids cannot
    pass to reach their roots); then ``/dev/shm/ow-invoker-<uid>``."""
    if os.geteuid() == 0 or os.environ.get(RUN_DIR_ENV):
        return lock_dir()
    return Path(f"/dev/shm/ow-invoker-{os.geteuid()}")


def own_dir(directory: Path, mode: int = 0o700) -> Path:
    """``directory``, made if missing, refused unless it is a directory of this user's: in
    a world-writable parent (``/dev/shm``) another user could have made it first."""
    directory.mkdir(mode=mode, parents=True, exist_ok=True)
    st = directory.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise PermissionError(f"{directory} is not a directory of uid {os.geteuid()}")
    return directory


class PrefixClaim:
    """Held while the backend runs; :meth:`release` (or the process's exit) frees it."""

    def __init__(self, prefix: str, directory: Path | None = None) -> None:
        directory = own_dir(directory or lock_dir())
        self.path = directory / f"{prefix}.lock"
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(self._fd, 32, 0).decode(errors="replace").strip() or "?"
            self.release()
            raise PrefixInUse(
                f"another invoker on this host (pid {owner}) runs containers named {prefix}_*; "
                "give each invoker its own --unique-name or --id"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None


UID_BASE = 1_500_000_000  # far above any distribution's users and subordinate ranges
UID_BLOCK = 4096
UID_BLOCKS = 1024


class UidBlockClaim:
    """A block of host uids (and gids) for one backend's containers, held like a prefix: two
    invokers on one host never hand out the same uid, so no two tenants share one.

    As root, blocks of ``UID_BLOCK`` from ``UID_BASE``; a non-root invoker passes its
    subordinate ranges (first, count) from /etc/subuid and /etc/subgid."""

    def __init__(
        self,
        subuid: tuple[int, int] | None = None,
        subgid: tuple[int, int] | None = None,
        directory: Path | None = None,
    ) -> None:
        directory = own_dir(directory or lock_dir())
        uid0, gid0 = (subuid or (UID_BASE, 0))[0], (subgid or subuid or (UID_BASE, 0))[0]
        blocks = UID_BLOCKS
        if subuid is not None and subgid is not None:
            blocks = min(subuid[1], subgid[1]) // UID_BLOCK
        self._fd: int | None = None
        for block in range(blocks):
            fd = os.open(directory / f"uids.{block}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._fd = fd
            self.base, self.count = uid0 + block * UID_BLOCK, UID_BLOCK
            self.gid_base = gid0 + block * UID_BLOCK
            return
        raise PrefixInUse(
            f"no free block of {UID_BLOCK} container uids ({blocks} blocks, all held by live "
            "invokers or too few subordinate ids)"
        )

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None
