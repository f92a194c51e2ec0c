"""A destroyed container's cgroup goes, however long its processes take to exit.

Under churn on a loaded machine the soak saw the invoker's container cgroups grow while its
containers did not: ``destroy`` waited 5 s for the container's processes to exit and then
left the cgroup behind for good, one more for each slow exit. A process in a frozen v1
freezer cgroup cannot act on SIGKILL until it is thawed: the test holds one that way."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from containers import cgroups
from containers.process.backend import ProcessBackend
from tests.integration.containers.backends import (  # noqa: F401  (fixtures)
    ECHO_PY,
    Maker,
    backend,
    make,
    new_prefix,
    result,
    run,
    state_dir,
    wait_until,
)

FREEZER = Path("/sys/fs/cgroup/freezer")
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")


@pytest.fixture
def freezer() -> Iterator[Path]:
    """A v1 freezer cgroup of the test's own, thawed and removed at its end."""
    if not (FREEZER / "cgroup.procs").exists():
        pytest.skip("no cgroup v1 freezer hierarchy")
    d = FREEZER / f"ow-test-{os.getpid()}"
    d.mkdir()
    try:
        yield d
    finally:
        (d / "freezer.state").write_text("THAWED")
        for pid in (d / "cgroup.procs").read_text().split():  # back to the root, then gone
            with contextlib.suppress(OSError):
                (FREEZER / "cgroup.procs").write_text(pid)
        d.rmdir()


async def test_a_cgroup_busy_past_destroys_wait_is_removed_once_its_processes_exit(
    make,  # noqa: F811
    backend: ProcessBackend,  # noqa: F811
    freezer: Path,
) -> None:
    c = await make(ECHO_PY)
    assert result(await run(c))["greeting"] == "Hello stranger"
    assert c.cgroup is not None
    held = c.cgroup.pids()
    for pid in held:
        (freezer / "cgroup.procs").write_text(str(pid))
    (freezer / "freezer.state").write_text("FROZEN")
    await c.destroy()  # SIGKILL pending in frozen tasks: busy past its 5 s
    memory = c.cgroup.memory
    assert memory.exists(), "its processes cannot have exited yet"
    (freezer / "freezer.state").write_text("THAWED")
    assert await wait_until(lambda: not memory.exists(), 10), "left behind for good"


async def test_a_closed_backend_leaves_no_cgroup_of_its_spares(state_dir: Path) -> None:  # noqa: F811
    b = ProcessBackend(state_dir / "spares", new_prefix(), spares=2)
    await b.start()
    try:
        c = await Maker(b)(ECHO_PY)
        assert result(await run(c))["greeting"] == "Hello stranger"
        assert await wait_until(lambda: len(ours(b)) == 3, 10), ours(b)  # it and two spares
    finally:
        await b.close()
    assert ours(b) == [], "the spares' empty cgroups were left behind at every close"


def ours(b: ProcessBackend) -> list[str]:
    return [cg.memory.name for cg in cgroups.find_leftovers(b.cgroup_support, b.name_prefix)]
