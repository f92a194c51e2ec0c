"""Process inspection for tests, standard library only (the GPU tests import it on machines
that have only torch)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (exists and is not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()


def freezer_dir() -> Path | None:
    """This process's cgroup v1 freezer directory, if that hierarchy is mounted and writable."""
    own, mounts = {}, {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "freezer" in controllers.split(","):
            own = {"path": path}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(rfields) >= 3 and rfields[0] == "cgroup" and "freezer" in rfields[2].split(","):
            mounts = {"mount": fields[4], "root": fields[3]}
    if not own or not mounts:
        return None
    path, root = own["path"], mounts["root"]
    if root != "/" and path.startswith(root):
        path = path[len(root) :]
    d = Path(mounts["mount"]) / path.lstrip("/")
    return d if os.access(d, os.W_OK) else None


@contextlib.contextmanager
def frozen(pids: list[int], name: str) -> Iterator[Callable[[], None]]:
    """Freeze ``pids`` in a new cgroup v1 freezer cgroup ``name``: a SIGKILL then waits until
    they are thawed, as for processes stuck in the kernel. Yields the function that thaws
    them; on exit they are thawed and the freezer cgroup removed. Needs root and cgroup v1."""
    parent = freezer_dir()
    if parent is None:
        raise RuntimeError("no writable cgroup v1 freezer")
    d = parent / name
    d.mkdir()

    def thaw() -> None:
        (d / "freezer.state").write_text("THAWED")

    try:
        for pid in pids:
            (d / "cgroup.procs").write_text(str(pid))
        (d / "freezer.state").write_text("FROZEN")
        if not wait_until(lambda: (d / "freezer.state").read_text().strip() == "FROZEN", 5):
            raise RuntimeError(f"{d} did not freeze")
        yield thaw
    finally:
        with contextlib.suppress(OSError):
            thaw()
        wait_until(lambda: not (d / "cgroup.procs").read_text().split(), 10)
        with contextlib.suppress(OSError):
            d.rmdir()


SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def nice_orders_one_core(core: int, high: int, low: int, cpu_s: float = 0.4) -> tuple[bool, str]:
    """The control for tests of CPU weights by nice value: two plain spinning processes in the
    normal class, pinned to ``core`` at nice ``high`` and ``low``. Whether the kernel gave the
    low one under a quarter of the high one's CPU while both ran, and what each used; a host
    whose scheduler ignores nice values (or pinning) cannot order calls by them."""
    import subprocess
    import sys

    def nice(n: int) -> Callable[[], None]:
        def setup() -> None:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            os.sched_setaffinity(0, {core})
            os.setpriority(os.PRIO_PROCESS, 0, n)

        return setup

    slow = subprocess.Popen([sys.executable, "-c", SPIN.format(s=60)], preexec_fn=nice(low))
    try:
        t0 = time.monotonic()
        fast = subprocess.run(
            [sys.executable, "-c", SPIN.format(s=cpu_s)], preexec_fn=nice(high), timeout=60
        )
        wall = time.monotonic() - t0
        low_used = _cpu_s(slow.pid)
    finally:
        slow.kill()
        slow.wait()
    ok = fast.returncode == 0 and low_used < 0.25 * cpu_s
    return ok, f"nice {high} used {cpu_s} s in {wall:.2f} s; nice {low} meanwhile {low_used:.2f} s"


def scheduling_of(pid: int) -> str:
    """Each thread of ``pid``: class, nice value, allowed CPUs; its autogroup and cgroups
    (what decides how the kernel shares a core among processes)."""
    names = {os.SCHED_OTHER: "other", os.SCHED_BATCH: "batch", os.SCHED_IDLE: "idle"}
    parts = []
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
        with contextlib.suppress(OSError):
            policy = names.get(os.sched_getscheduler(tid), "rt")
            nice = os.getpriority(os.PRIO_PROCESS, tid)
            parts.append(f"{tid}:{policy}/nice {nice}/cpus {sorted(os.sched_getaffinity(tid))}")
    for extra in ("autogroup", "cgroup"):
        with contextlib.suppress(OSError):
            parts.append(Path(f"/proc/{pid}/{extra}").read_text().strip().replace("\n", " "))
    return f"pid {pid}: " + "; ".join(parts)
