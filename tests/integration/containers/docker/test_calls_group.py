"""The Docker backend's calls group (containers.docker.calls_group), on both engines: the
containers' cgroups go in ``/<prefix>-calls``, which goes when the backend closes; and a
call at the top CPU weight leaves a process in the engine's own parent (a stock
deployment's invoker container) its part of a core they share.

Without the group the containers sit beside that process in the engine's parent: a call at
102 400 shares against its 1 024 left it about 1 % of the core."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from containers.cgroups import PROC_MOUNTINFO, cgroup_hierarchies, parse_proc_cgroup
from tests.integration.containers import backends
from tests.integration.containers.backends import (
    ECHO_PY,
    SPIN_PY,
    Maker,
    new_backend,
    result,
    run,
)

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root"),
]

pytest_generate_tests = backends.pytest_generate_tests
engine_host, svc, engine = backends.engine_host, backends.svc, backends.engine
CPU = Path("/sys/fs/cgroup/cpu")


def cgroup_of(pid: int, controller: str = "cpu") -> str:
    return parse_proc_cgroup(Path(f"/proc/{pid}/cgroup").read_text())[controller]


def group_dirs(name: str) -> list[Path]:
    """The group's directory in every hierarchy that has it."""
    hierarchies = cgroup_hierarchies(Path(PROC_MOUNTINFO).read_text())
    return [mount / name for mount, _ in hierarchies if (mount / name).is_dir()]


async def test_the_containers_cgroups_go_in_the_calls_group_which_goes_at_close(
    engine_host: str, svc, engine
) -> None:
    b = new_backend(engine_host, svc.container_label)
    await b.start()
    try:
        assert b.weights_among_calls, "a local cgroupfs engine, as root: a group is possible"
        group = f"{b.name_prefix}-calls"
        c = await Maker(b)(ECHO_PY)
        assert result(await run(c))["greeting"] == "Hello stranger"
        pid = (await engine.inspect(c.id))["State"]["Pid"]
        for controller in ("cpu", "memory", "cpuset"):
            assert cgroup_of(pid, controller).startswith(f"/{group}/"), controller
        assert group_dirs(group), "the engine made it"
    finally:
        await b.close()
    assert group_dirs(group) == [], "left behind at close"


async def test_a_weight_is_written_to_the_containers_cgroup_not_through_the_engine(
    engine_host: str, svc, engine
) -> None:
    """An engine update took 27 ms a write on dockerd (the order writes about five a call,
    each call's start waiting for its own); the cgroup file takes a fraction of one."""
    b = new_backend(engine_host, svc.container_label)
    await b.start()
    try:
        c = await Maker(b)(ECHO_PY)
        await c.set_cpu_weight(10_000)
        info = await engine.inspect(c.id)
        cpu = CPU / cgroup_of(info["State"]["Pid"]).strip("/")
        assert (cpu / "cpu.shares").read_text().strip() == "102400"
        assert info["HostConfig"]["CpuShares"] in (0, 1024), "the engine was not asked"
        assert result(await run(c))["greeting"] == "Hello stranger"
    finally:
        await b.close()


SPIN_IN_CGROUP = """
import os, sys, time
with open(sys.argv[1], "w") as procs:  # the invoker's place: the engine's parent
    procs.write(str(os.getpid()))
os.sched_setaffinity(0, [int(sys.argv[2])])
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    pass
print(time.process_time())
"""


@pytest.mark.docker_only  # one engine shows the weights; both show where the cgroups go
async def test_a_top_weight_call_leaves_the_engines_other_containers_their_part_of_a_core(
    engine_host: str, engine, svc
) -> None:
    """The call at weight 10 000 (102 400 shares) in the calls group; a process spinning
    in a cgroup beside the engine's containers (the invoker's container's place), 1 024
    shares, pinned to the same core. The two groups are even at the root: the process gets
    about half the core, where beside the call it got 1 %."""
    if not (CPU / "cgroup.procs").exists():
        pytest.skip("no cgroup v1 cpu hierarchy")
    backend = new_backend(engine_host, svc.container_label)
    await backend.start()
    try:
        core = max(os.sched_getaffinity(0))
        c = await Maker(backend)(SPIN_PY)
        await c.assign_cores(frozenset({core}))
        await c.set_cpu_weight(10_000)
        invoker_place = (
            CPU / (await engine_parent(engine, svc)).strip("/") / f"ow-test-{os.getpid()}"
        )
        invoker_place.mkdir()
        try:
            call = asyncio.create_task(run(c, {"cpu": 3.0}))
            await asyncio.sleep(0.3)  # the call is spinning
            before = await c.cpu_times()
            beside = await asyncio.create_subprocess_exec(
                sys.executable, "-c", SPIN_IN_CGROUP, str(invoker_place / "cgroup.procs"),
                str(core), "1.0", stdout=asyncio.subprocess.PIPE, start_new_session=True,
            )  # fmt: skip
            out, _ = await beside.communicate()
            after = await c.cpu_times()
        finally:
            invoker_place.rmdir()  # empty: its process has exited
        assert beside.returncode == 0 and before is not None and after is not None
        call_used, process_used = after.used - before.used, float(out)
        assert process_used >= 0.3 * call_used, (process_used, call_used)
        assert (await asyncio.wait_for(call, 30)).status == 200
    finally:
        await backend.close()


async def engine_parent(engine, svc) -> str:
    """The cpu cgroup parent the engine gives a container made with no CgroupParent."""
    created = await engine.docker.containers.create(
        {
            "Image": svc.busybox_image,
            "Cmd": ["sleep", "30"],
            "Labels": {svc.container_label: "1"},
            "HostConfig": {"NetworkMode": "none", "Memory": 64 << 20},
        }
    )
    try:
        await created.start()
        pid = (await created.show())["State"]["Pid"]
        return str(Path(cgroup_of(pid)).parent)
    finally:
        await created.delete(force=True)
