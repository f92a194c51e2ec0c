"""How much memory a container uses now: the footprint an idle container is kept at.

The measure is the *working set*, as kubelet and ``docker stats`` count it: the cgroup's
usage less its inactive file pages (page cache the kernel reclaims before it would fail an
allocation), so a runtime that read its libraries once is not charged for them for ever.
Without a cgroup, the resident memory of the container's processes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from containers import cgroups

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def working_set(usage: int, stat: Mapping[str, int]) -> int:
    """Usage less inactive file pages (v1 names them ``total_inactive_file``)."""
    inactive = stat.get("total_inactive_file", stat.get("inactive_file", 0))
    return max(0, usage - inactive)


def parse_stat(text: str) -> dict[str, int]:
    """A ``memory.stat`` file: one ``name value`` per line."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[name] = int(value)
    return out


def cgroup_working_set(directory: Path, version: int) -> int | None:
    """The working set of a v1 or v2 memory cgroup directory; None if it cannot be read."""
    usage_file = "memory.usage_in_bytes" if version == 1 else "memory.current"
    try:
        usage = int((directory / usage_file).read_text())
        stat = parse_stat((directory / "memory.stat").read_text())
    except (OSError, ValueError):
        return None
    return working_set(usage, stat)


def resident_bytes(pids: Iterable[int]) -> int | None:
    """Summed resident memory of these processes; None if none of them could be read."""
    total, read = 0, False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * PAGE_BYTES
            read = True
        except (OSError, IndexError, ValueError):
            pass
    return total if read else None


def cgroup_memory_dir(pid: int) -> tuple[Path, int] | None:
    """The memory cgroup of ``pid`` and its version, if this process can read it and it is
    the process's own (not the root, which counts the whole host)."""
    dirs = cgroups.process_dirs(pid)
    for controller, version in (("memory", 1), ("", 2)):
        directory = dirs.get(controller)
        if directory is not None and cgroup_working_set(directory, version) is not None:
            return directory, version
    return None
