"""The scheduler snapshot (invoker.nodeview.scheduler) of the production invoker on a virtual
clock, with the simulated backend: the queue in policy order with the priorities the policy
gave, the call on each core with its CPU share, and response-time and stretch histograms
whose buckets follow from a hand-computed schedule. The snapshot changes nothing."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from containers.simulated import SIM_DURATION, SimulatedBackend
from invoker import nodeview
from invoker.calltimes import STRETCH_EDGES
from invoker.config import InvokerConfig
from invoker.service import Invoker
from whisk.bus.memory import MemoryBus
from whisk.clock import LoopClock, VirtualTimeLoop
from whisk.protocol import QualifiedName, dumps
from whisk.protocol.controller import action_document, activation_message
from whisk.store.embedded import EmbeddedStore

DURATIONS = {"L": 2.0, "S": 0.5}

Scenario = Callable[[Invoker, Callable[[str], Awaitable[str]]], Awaitable[Any]]


def run(policy: str, scenario: Scenario, footprint_mb: int | None = None) -> Any:
    """``scenario(invoker, send)`` against a started invoker with one action core, whose
    idle containers measure ``footprint_mb`` (None: not measurable)."""

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop, epoch_ms_at_start=1_700_000_000_000)
        bus = MemoryBus()
        store = EmbeddedStore(":memory:", threaded=False)
        with tempfile.TemporaryDirectory(prefix="ow-view-") as state:
            config = InvokerConfig(
                policy=policy,
                action_cores=(0,),
                user_memory_mb=4096,
                state_dir=state,
                pause_grace_s=1e9,
                idle_timeout_s=1e9,
            )
            invoker = Invoker(
                config,
                bus=bus,
                store=store,
                backend=SimulatedBackend(footprint_mb=footprint_mb),
                clock=clock,
            )
            await store.ensure_db(config.whisks_db)
            revisions = {
                fn: await store.put(
                    config.whisks_db,
                    action_document("guest", fn, kind="python:3.11", code=b"simulated"),
                )
                for fn in DURATIONS
            }
            await invoker.start()
            producer = bus.producer()

            async def send(fn: str) -> str:
                msg = activation_message(
                    QualifiedName("guest", fn),
                    revisions[fn],
                    start_ms=clock.epoch_ms(),
                    content={SIM_DURATION: DURATIONS[fn]},
                )
                await producer.send(config.invoker_topic, dumps(msg.to_json()))
                return msg.activation_id

            try:
                return await scenario(invoker, send)
            finally:
                await invoker.stop(deadline_s=0)
                await store.close()

    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


async def settle(invoker: Invoker, calls: dict[str, int]) -> None:
    """Wait (virtual time) until each function has finished that many calls; a minute at
    most, so a broken invoker fails the test instead of looping for ever."""
    async with asyncio.timeout(60):
        while True:
            done = invoker.call_times.snapshot()
            if all(done.get(f"guest/{fn}", {}).get("calls", 0) >= n for fn, n in calls.items()):
                return
            await asyncio.sleep(0.05)


def stretch_bucket(value: float) -> int:
    return next((i for i, e in enumerate(STRETCH_EDGES) if value <= e), len(STRETCH_EDGES))


def test_sept_queue_cores_and_histograms():
    async def scenario(invoker: Invoker, send: Callable[[str], Awaitable[str]]) -> None:
        for fn in ("L", "S"):  # learn E[p]: 2 s and 0.5 s, alone on the core
            await send(fn)
            await settle(invoker, {fn: 1})
        first = await send("L")
        await asyncio.sleep(0.05)  # L holds the core
        waiting = [await send(fn) for fn in ("S", "L", "S")]
        await asyncio.sleep(0.05)

        order = [c.seq for c in invoker.scheduler.waiting()]
        view = nodeview.scheduler(invoker)
        assert [c.seq for c in invoker.scheduler.waiting()] == order  # nothing taken
        assert nodeview.scheduler(invoker)["queue"] == view["queue"]

        assert view["policy"] == "sept" and view["exclusiveCores"] and not view["preemption"]
        assert view["queuedTotal"] == 3 and view["runningTotal"] == 1
        queue = view["queue"]
        # SEPT: S (E[p] 0.5) before L (2.0); equal priorities in order of receipt.
        assert [q["activationId"] for q in queue] == [waiting[0], waiting[2], waiting[1]]
        assert [q["rank"] for q in queue] == [1, 2, 3]
        assert [q["function"] for q in queue] == ["guest/S", "guest/S", "guest/L"]
        assert [q["priority"] for q in queue] == pytest.approx([0.5, 0.5, 2.0])
        assert [q["expectedS"] for q in queue] == pytest.approx([0.5, 0.5, 2.0])
        assert all(0 < q["waitingS"] <= 0.06 and q["cpuShare"] == 1.0 for q in queue)
        (core,) = view["cores"]
        assert core["core"] == 0 and core["calls"] == 1 and core["load"] == 1.0
        (running,) = core["running"]
        assert running["activationId"] == first and running["function"] == "guest/L"
        assert running["share"] == 1.0 and running["runningS"] == pytest.approx(0.1, abs=0.02)
        assert view["unplaced"] == [] and view["paused"] == []
        assert nodeview.scheduler(invoker, limit=1)["queue"] == queue[:1]
        # The pool: L running at its limit; S's container and the two stem cells kept (the
        # simulated backend measures no footprint, so they count at their limits).
        assert view["memory"] == {
            "userMemoryMB": 4096,
            "usedMemoryMB": 4 * 256,
            "keptMemoryMB": 3 * 256,
            "keptContainers": 3,
            "keepAlive": "footprint",
        }

        await settle(invoker, {"L": 3, "S": 3})
        done = nodeview.scheduler(invoker)
        assert done["queue"] == [] and done["cores"][0]["running"] == []
        assert done["memory"]["usedMemoryMB"] == done["memory"]["keptMemoryMB"] == 4 * 256
        assert done["memory"]["keptContainers"] == 4  # L's and S's, the two stem cells
        fns = {f["function"]: f for f in done["functions"]}
        assert list(fns) == ["guest/L", "guest/S"]  # the most recently finished first
        assert fns["guest/L"]["expectedS"] == pytest.approx(2.0)
        # Hand-computed: L1 runs 0-2 (received at 0); S received at 0.05 runs 2-2.5,
        # the next S 2.5-3; the second L, received at 0.05, runs 3-5.
        s, long = fns["guest/S"], fns["guest/L"]
        s_stretches = [1.0, 2.45 / 0.5, 2.95 / 0.5]
        l_stretches = [1.0, 1.0, 4.95 / 2.0]
        for f, stretches in ((s, s_stretches), (long, l_stretches)):
            assert f["calls"] == 3 and sum(f["response"]) == 3
            expected = [0] * (len(STRETCH_EDGES) + 1)
            for value in stretches:
                expected[stretch_bucket(value)] += 1
            assert f["stretch"] == expected
            assert f["meanStretch"] == pytest.approx(sum(stretches) / 3, rel=0.02)
        assert s["maxResponseS"] == pytest.approx(2.95, abs=0.02)

    run("sept", scenario)


def test_fifo_priorities_are_receipt_times_and_the_baseline_has_no_cores():
    async def scenario(invoker: Invoker, send: Callable[[str], Awaitable[str]]) -> dict[str, Any]:
        for fn in ("L", "S", "S"):
            await send(fn)
        await asyncio.sleep(0.05)
        return nodeview.scheduler(invoker)

    fifo = run("fifo", scenario)
    priorities = [q["priority"] for q in fifo["queue"]]
    assert len(priorities) == 2 and priorities == sorted(priorities)  # received, in order
    baseline = run("openwhisk", scenario)
    assert not baseline["exclusiveCores"] and baseline["queue"] == []
    assert len(baseline["unplaced"]) == 3 and baseline["cores"][0]["running"] == []


def test_kept_containers_show_at_their_footprint_and_a_reused_one_at_its_limit():
    """The console's memory line is the pool's accounting: idle containers at what they
    measure, one that takes a call at its limit again at once."""

    async def scenario(invoker: Invoker, send: Callable[[str], Awaitable[str]]) -> Any:
        await send("S")
        await settle(invoker, {"S": 1})
        await asyncio.sleep(1)  # S's container idle and measured
        idle = nodeview.scheduler(invoker)["memory"]
        await send("S")
        await asyncio.sleep(0.05)
        return idle, nodeview.scheduler(invoker)["memory"]

    idle, running = run("sept", scenario, footprint_mb=25)
    kept = {"keepAlive": "footprint", "userMemoryMB": 4096}
    # S's container and the two stem cells, 25 MB each
    assert idle == {**kept, "usedMemoryMB": 75, "keptMemoryMB": 75, "keptContainers": 3}
    # S's container runs a call at its 256 MB limit; the stem cells stay at 25 MB
    assert running == {**kept, "usedMemoryMB": 256 + 50, "keptMemoryMB": 50, "keptContainers": 2}


def test_a_namespace_sees_only_its_own_functions():
    """The console's view for a user (``namespace``): another tenant's calls, names and
    timings are left out; the core's load stays the node's."""

    async def scenario(invoker: Invoker, send: Callable[[str], Awaitable[str]]) -> None:
        await send("L")
        await asyncio.sleep(0.05)  # L holds the core
        waiting = [await send(fn) for fn in ("S", "S")]
        await asyncio.sleep(0.05)
        everyone = nodeview.scheduler(invoker)
        own = nodeview.scheduler(invoker, namespace="guest")
        assert own["queue"] == everyone["queue"] and own["cores"] == everyone["cores"]
        assert [q["activationId"] for q in own["queue"]] == waiting
        other = nodeview.scheduler(invoker, namespace="alice")
        assert other["queue"] == [] and other["queuedTotal"] == 0 and other["runningTotal"] == 0
        (core,) = other["cores"]
        assert core["running"] == [] and core["load"] == 1.0
        await settle(invoker, {"L": 1, "S": 2})
        assert nodeview.scheduler(invoker, namespace="alice")["functions"] == []
        names = [f["function"] for f in nodeview.scheduler(invoker, namespace="guest")["functions"]]
        assert sorted(names) == ["guest/L", "guest/S"]
        # A name that merely starts like the namespace is not in it.
        assert nodeview.scheduler(invoker, namespace="gue")["functions"] == []

    run("sept", scenario)
