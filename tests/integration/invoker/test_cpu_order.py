"""An attained-service policy end to end (``--policy las``; ``gittins`` and
``gittins-aged`` drive the same :class:`invoker.cpu_order.CpuOrder`): real Kafka, the
CouchDB-API server and process containers on one action core.

A long CPU-bound call has had 1 s of service when a short one (0.4 s) arrives; both run at
once (no pause), and the order writes the short call's container the top CPU weight as soon
as it enters /run, and the long call's a lower one, so the kernel gives the short call the
core. Each call notes, every 10 ms of its own CPU, the wall clock and its CPU time: the long
call's CPU while the short one ran must be a small part of the short call's (under
processor sharing, as stock, the two would get about the same). A ratio of the two
containers' CPU, not a time, so a loaded machine slows both alike and the test stays
meaningful there.

Run again with every re-ranking pass 0.4 s late, as on a busy invoker (CI's first run of
this test failed so, 0.20 s against 0.40): the short call is ranked as it enters ``/run``,
before its ``/run`` is sent, not by the next pass. And a cold call's ``/init`` is ranked as
a new call: its new container's default weight would leave it 1 % of the core.
"""

from __future__ import annotations

import asyncio
import bisect
from pathlib import Path
from typing import Any

import pytest

from harness.controller import running_invoker

pytestmark = pytest.mark.services


def burner(at_init_s: float) -> bytes:
    """An action that burns CPU and notes (wall, its CPU) every 10 ms: ``at_init_s`` of it
    as its code loads (its /init; a call then returns those notes), else the call's
    ``cpu_s``."""
    return f"""
import time
def burn(cpu_s):
    end = time.process_time() + cpu_s
    seen = []
    while time.process_time() < end:
        seen.append((time.time(), time.process_time()))
        mark = time.process_time()
        while time.process_time() - mark < 0.01:
            pass
    seen.append((time.time(), time.process_time()))
    return seen
at_init = burn({at_init_s}) if {at_init_s} else None
def main(p):
    return {{"seen": at_init or burn(p["cpu_s"])}}
""".encode()


BURN, INIT_BURN = burner(0.0), burner(0.3)


def _assert_had_the_core(new: dict[str, Any], long: dict[str, Any], cpu_s: float) -> None:
    """While the new call ran (from its first note to its last: a slow invoker may send its
    request well after the record's start, and the long call rightly runs alone until then)
    the long call had a small part of the CPU the new one had."""
    assert new["response"]["statusCode"] == 0, new["response"]
    assert long["response"]["statusCode"] == 0, long["response"]
    seen = new["response"]["result"]["seen"]
    window = (seen[0][0], seen[-1][0])
    assert long["start"] / 1000 < window[0], "the long call began after the new one"
    assert window[1] < long["end"] / 1000, "the new call ended after the long one: it waited"
    new_cpu = cpu_between(seen, *window)
    long_cpu = cpu_between(long["response"]["result"]["seen"], *window)
    assert new_cpu >= cpu_s - 0.02, new_cpu
    # Less the notes' error (cpu_between: exact to 20 ms): a long call read at 50 ms beside
    # 300 ms failed the bound once in six runs on an idle machine; processor sharing gives
    # it about as much as the new call.
    assert long_cpu - 0.02 < 0.15 * new_cpu, (long_cpu, new_cpu)


def cpu_between(seen: list[list[float]], start_s: float, end_s: float) -> float:
    """The CPU a call used between two wall-clock times, from its (wall, CPU) notes: at
    most 10 ms of CPU passes between two notes, so this is exact to 20 ms."""
    walls = [w for w, _ in seen]

    def cpu_at(t: float) -> float:
        i = bisect.bisect_right(walls, t)
        return seen[max(i - 1, 0)][1]

    return cpu_at(end_s) - cpu_at(start_s)


async def _run(ctl: Any, action: Any, rev: str, cpu_s: float) -> dict[str, Any]:
    aid = await ctl.invoke(action, rev, content={"cpu_s": cpu_s})
    await ctl.wait_completion(aid, timeout_s=120)
    return await ctl.record(aid)


async def _long_call_with_service(invoker: Any, ctl: Any) -> asyncio.Future:
    """A long call (3 s of CPU) of a warm action, once it has had 1 s of service: LAS then
    ranks a new call first for the whole of its 0.3-0.4 s (on a loaded machine a fixed sleep
    may leave the long call less, and LAS rightly shares the core once the new call has
    caught up with it)."""
    action, rev = await ctl.create_action("long", BURN)
    await _run(ctl, action, rev, 0.05)  # warm: no cold start in the window
    long = asyncio.ensure_future(_run(ctl, action, rev, 3.0))
    for _ in range(500):
        if any(r.age >= 1.0 for r in await invoker.cpu_order.measure()):
            return long
        await asyncio.sleep(0.02)
    raise AssertionError("the long call never had 1 s of service")


def _writes_counted(invoker: Any) -> None:
    said = invoker.status()["cpuOrder"]
    assert said["writes"] >= 2 and said["failedWrites"] == 0, said
    assert said["writeSeconds"] > 0, said


@pytest.mark.parametrize("late_passes", [False, True], ids=["passes", "late-passes"])
async def test_a_short_call_gets_the_core_from_a_long_one_by_cpu_weights(
    kafka, couchdb, tmp_path: Path, late_passes: bool
) -> None:
    async with running_invoker(kafka, couchdb, tmp_path, action_cores=(0,), policy="las") as (
        invoker,
        ctl,
    ):
        assert invoker.cpu_order is not None
        if late_passes:
            order, on_time = invoker.cpu_order, invoker.cpu_order.apply

            async def late() -> None:
                await asyncio.sleep(0.4)
                await on_time()

            order.apply = late  # type: ignore[method-assign]
        short_action, short_rev = await ctl.create_action("short", BURN)
        await _run(ctl, short_action, short_rev, 0.05)  # warm
        long = await _long_call_with_service(invoker, ctl)
        short = await _run(ctl, short_action, short_rev, 0.4)
        _assert_had_the_core(short, await long, 0.4)
        _writes_counted(invoker)


async def test_a_cold_calls_init_gets_the_core_from_a_long_call(
    kafka, couchdb, tmp_path: Path
) -> None:
    async with running_invoker(kafka, couchdb, tmp_path, action_cores=(0,), policy="las") as (
        invoker,
        ctl,
    ):
        long = await _long_call_with_service(invoker, ctl)
        cold_action, cold_rev = await ctl.create_action("cold", INIT_BURN)
        cold = await _run(ctl, cold_action, cold_rev, 0.0)
        assert any(a["key"] == "initTime" for a in cold["annotations"]), cold["annotations"]
        _assert_had_the_core(cold, await long, 0.3)
        _writes_counted(invoker)
