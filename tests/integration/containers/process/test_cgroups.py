"""The process backend's cgroups: a destroyed container's goes, however long its processes
take to exit; the calls' CPU weights rank them among themselves, not against the invoker.

Under churn on a loaded machine the soak saw the invoker's container cgroups grow while its
containers did not: ``destroy`` waited 5 s for the container's processes to exit and then
left the cgroup behind for good, one more for each slow exit. A process in a frozen v1
freezer cgroup cannot act on SIGKILL until it is thawed: the test holds one that way."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from containers import cgroups
from containers.process.backend import ProcessBackend
from tests.integration.containers.backends import (  # noqa: F401  (fixtures)
    ECHO_PY,
    SPIN_PY,
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


SPIN_FOR_WALL = """
import os, sys, time
os.sched_setaffinity(0, [int(sys.argv[1])])
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    pass
print(time.process_time())
"""


async def test_a_top_weight_call_leaves_a_process_beside_it_its_part_of_the_core(
    make,  # noqa: F811
    backend: ProcessBackend,  # noqa: F811
) -> None:
    """A call at the top weight (10 000) and a plain process (the invoker's place: its own
    cgroup, nice 0) on one core. With the containers' cgroups beside the invoker, the call
    had 100 times its weight and the process got 1 % of the core; in the calls group the
    two are even (the weights rank calls among calls)."""
    support = backend.cgroup_support
    if support.calls_group is None:
        pytest.skip(f"no cpu cgroups here: {support.reason or 'v1 without the cpu hierarchy'}")
    core = max(os.sched_getaffinity(0))
    c = await make(SPIN_PY)
    assert c.cgroup is not None
    cpu_dir = c.cgroup.memory if c.cgroup.version == 2 else c.cgroup.cpu
    assert cpu_dir is not None and cpu_dir.parent == support.calls_group
    await c.assign_cores(frozenset({core}))
    await c.set_cpu_weight(10_000)
    call = asyncio.create_task(run(c, {"cpu": 3.0}))
    await asyncio.sleep(0.3)  # the call is spinning
    before = (await c.cpu_times()).used
    beside = await asyncio.create_subprocess_exec(  # a session (autogroup) of its own
        sys.executable, "-c", SPIN_FOR_WALL, str(core), "1.0",
        stdout=asyncio.subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    out, _ = await beside.communicate()
    call_used = (await c.cpu_times()).used - before
    process_used = float(out)
    assert process_used >= 0.3 * call_used, (process_used, call_used)
    assert (await asyncio.wait_for(call, 30)).status == 200


async def test_a_closed_backend_leaves_no_calls_group(state_dir: Path) -> None:  # noqa: F811
    b = ProcessBackend(state_dir / "group", new_prefix())
    await b.start()
    group = b.cgroup_support.calls_group
    if group is None:
        await b.close()
        pytest.skip("no calls group here (no cpu cgroups)")
    try:
        c = await Maker(b)(ECHO_PY)
        assert result(await run(c))["greeting"] == "Hello stranger"
        assert group.is_dir() and any(group.iterdir())
    finally:
        await b.close()
    assert not group.exists()
