"""One live process backend per container-name prefix on a host.

A backend's start-up removes whatever carries its prefix (cgroups and processes are
host-wide, and a killed run's leftovers must go). A second invoker started on the same host
with the same name would therefore destroy a running one's containers; it is refused
instead, by an exclusive lock on a per-prefix file that the kernel drops when its holder
exits, however it exits.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path


class PrefixInUse(ValueError):
    """Another live backend on this host uses the prefix (a configuration error)."""


def lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"ow-invoker-{os.getuid()}"


class PrefixClaim:
    """Held while the backend runs; :meth:`release` (or the process's exit) frees it."""

    def __init__(self, prefix: str, directory: Path | None = None) -> None:
        directory = directory or lock_dir()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
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
        directory = directory or lock_dir()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
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
