"""CPU time used by a container so far, read from the kernel's accounting.

The scheduler admits calls by their functions' CPU share, so each backend reports a
container's cumulative :class:`CpuTimes` before and after ``/run``:

- ``used``: a cgroup that accounts CPU (v2 ``cpu.stat`` ``usage_usec``, v1
  ``cpuacct.usage``), which counts every process and thread of the container, dead or alive;
  else the container's processes' ``/proc/<pid>/stat`` times (user + system, with those of
  reaped children), in clock ticks (10 ms);
- ``waited``: time the container was ready to run but waiting for a CPU (v2 ``cpu.pressure``
  ``some``, else the run-queue delay in ``/proc/<pid>/task/<tid>/schedstat`` of its live
  threads; 0 when unknown). A call's share is its CPU time over its time *minus* that wait,
  so a CPU-bound call that had to share its core (with the node's other work, or with calls
  admitted on a wrong estimate) still reads as CPU-bound.

Reading is a few small procfs/cgroupfs files (microseconds), so it is done inline.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from containers import cgroups

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # per second


@dataclass(frozen=True, slots=True)
class CpuTimes:
    used: float  # CPU seconds
    waited: float = 0.0  # seconds runnable but waiting for a CPU
    tick: float = 0.0  # how coarse ``used`` is: a clock tick from /proc, 0 from a cgroup
    # Whether a thread is runnable now, where ``waited`` comes from schedstat: the kernel
    # adds a wait there only when it ends, so one under way shows only as this (None: the
    # counters do not lag, as a cgroup's pressure file or the simulator's).
    runnable: bool | None = None


def share_between(before: CpuTimes, after: CpuTimes, elapsed_s: float) -> float | None:
    """The share of a core (0..1) a container used between two readings ``elapsed_s``
    apart: its CPU time over the part of that time it was not waiting for a CPU (a call
    that waited nearly all of it wanted the CPU: 1.0); None if no time passed."""
    if elapsed_s <= 0:
        return None
    waited = min(elapsed_s, max(0.0, after.waited - before.waited))
    own = elapsed_s - waited
    if own <= 0.01 * elapsed_s:
        return 1.0
    return min(1.0, max(0.0, after.used - before.used) / own)


def stat_fields(path: str) -> list[bytes] | None:
    """The fields of a ``/proc/<pid>[/task/<tid>]/stat`` after the command name (which may
    hold spaces and parentheses): the state is ``[0]``; None if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_cpu_seconds(pid: int) -> float | None:
    """User + system time of a process and of the children it has reaped."""
    fields = stat_fields(f"/proc/{pid}/stat")
    try:
        return None if fields is None else sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICK
    except (IndexError, ValueError):
        return None


def process_threads(pid: int) -> dict[int, list[int]]:
    """Each live process of the tree rooted at ``pid`` (it and its descendants, via
    ``/proc/.../children``) with its threads: one walk serves CPU reads and pinning."""
    out: dict[int, list[int]] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except OSError:
            continue
        out[p] = tids
        for t in tids:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
            except OSError:
                pass
    return out


def threads_of(pids: Iterable[int]) -> dict[int, list[int]]:
    """The threads of each of these processes that is still alive."""
    out: dict[int, list[int]] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            out[pid] = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    return out


def processes_cpu_seconds(pids: Iterable[int]) -> float | None:
    """Summed CPU time of these processes; None if none of them could be read."""
    times = [t for t in map(process_cpu_seconds, pids) if t is not None]
    return sum(times) if times else None


def threads_waited_seconds(threads: dict[int, list[int]]) -> float:
    """Run-queue delay of these threads (process -> its threads; 0 if not accounted)."""
    total = 0
    for pid, tids in threads.items():
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    total += int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return total / 1e9


def threads_runnable(threads: dict[int, list[int]]) -> bool:
    """Whether any of these threads is running or waiting for a CPU now (state R)."""
    return any(
        (fields := stat_fields(f"/proc/{pid}/task/{tid}/stat")) and fields[0] == b"R"
        for pid, tids in threads.items()
        for tid in tids
    )


def read_cgroup_pressure(path: Path) -> float | None:
    """Seconds some task of the cgroup waited for a CPU, from a v2 ``cpu.pressure`` file."""
    try:
        line = path.read_text().splitlines()[0]
        fields = dict(f.split("=", 1) for f in line.split()[1:])
        return int(fields["total"]) / 1e6
    except (OSError, IndexError, KeyError, ValueError):
        return None


def read_cgroup_cpu(path: Path) -> float | None:
    """CPU seconds from a v2 ``cpu.stat`` or a v1 ``cpuacct.usage`` file."""
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        if path.name == "cpuacct.usage":
            return int(text) / 1e9
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    except ValueError:
        return None
    return None


def cgroup_cpu_file(pid: int) -> Path | None:
    """The file accounting the CPU time of ``pid``'s cgroup, if this process can read it
    and the cgroup is the process's own (not the root, which counts the whole host)."""
    dirs = cgroups.process_dirs(pid)
    candidates = []
    if "cpuacct" in dirs:
        candidates.append(dirs["cpuacct"] / "cpuacct.usage")
    if "" in dirs:
        candidates.append(dirs[""] / "cpu.stat")
    for path in candidates:
        if read_cgroup_cpu(path) is not None:
            return path
    return None


def leave_special_classes(pid: int) -> bool:
    """Put ``pid`` in the normal scheduling class (SCHED_OTHER, nice unchanged) unless it is
    there or in SCHED_BATCH, so that what it forks does too: under SCHED_IDLE the kernel
    ignores nice values (CPU weights without cgroups would do nothing), and a real-time class
    must not pass to other people's code. False when it may not (no CAP_SYS_NICE)."""
    try:
        if os.sched_getscheduler(pid) not in (os.SCHED_OTHER, os.SCHED_BATCH):
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
    except PermissionError:
        return False
    except ProcessLookupError:
        pass
    return True


def set_autogroup_nice(pid: int, nice: int, proc: Path = Path("/proc")) -> bool:
    """Give the autogroup (session) of ``pid`` this nice value, unless it is our own
    session's, the root one (where ``/proc/<pid>/autogroup`` reads empty: the kernel refuses
    it) or autogroups are off; False when nothing was written. Our own process may well be
    in the root autogroup (a service or CI job that never started a session)."""
    try:
        theirs = _autogroup(proc / str(pid) / "autogroup")
        if not theirs or theirs == _autogroup(proc / "self" / "autogroup"):
            return False
        (proc / str(pid) / "autogroup").write_text(str(nice))
    except (FileNotFoundError, ProcessLookupError):  # off, or the process ended
        return False
    return True


def _autogroup(path: Path) -> str:
    """The autogroup named in this ``/proc/<pid>/autogroup``; empty for the root one."""
    words = path.read_text().split()
    return words[0] if words else ""
