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
