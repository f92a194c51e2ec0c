"""The container pool (containers/pool.py) on the simulated backend and a virtual clock: warm
reuse, prewarmed containers, eviction under memory pressure, failed creations, condemned and
unhealthy containers, the janitor's pausing and removal, and shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from containers.backend import ContainerError, ImagePullError
from containers.placement import How, SlotState, WarmKey
from containers.pool import MEASURE_EVERY_S, ContainerPool, Lease, StemCell
from tests.unit.faults import FaultyBackend, FaultyContainer, virtual
from whisk.clock import LoopClock

PY = "python:3.11"
A = WarmKey("guest", "guest/a", "1-a")
B = WarmKey("guest", "guest/b", "1-b")
C = WarmKey("guest", "guest/c", "1-c")


def pool_test(
    body: Callable[[ContainerPool, FaultyBackend, asyncio.AbstractEventLoop], Awaitable[Any]],
    *,
    memory_mb: int = 1024,
    cold_start_s: float = 0.0,
    create_error: BaseException | None = None,
    **kwargs: Any,
) -> None:
    """Run ``body`` against a started pool on a virtual-time loop, then close the pool and
    check that every container it made was destroyed exactly once."""
    _prepared.clear()

    async def main(loop: asyncio.AbstractEventLoop) -> None:
        backend = FaultyBackend(cold_start_s=cold_start_s)
        backend.faults.create_error = create_error
        pool = ContainerPool(
            backend,
            user_memory_mb=memory_mb,
            clock=LoopClock(loop),
            name_prefix="wsk0",
            **kwargs,
        )
        await pool.start()
        try:
            await body(pool, backend, loop)
        finally:
            await pool.close()
        assert backend.live == 0, "close() left containers behind"
        assert all(c.destroyed == 1 for c in backend.containers), "destroyed twice or never"

    virtual(main)


async def settle() -> None:
    """Let the pool's background work (creations, removals) run."""
    for _ in range(5):
        await asyncio.sleep(0)
    await asyncio.sleep(0.001)


# The container each prepared slot got (the pool forgets it once it is destroyed).
_prepared: dict[int, FaultyContainer] = {}


async def use(pool: ContainerPool, key: WarmKey, memory_mb: int = 256, kind: str = PY) -> Lease:
    lease = pool.reserve(key, kind, memory_mb)
    assert lease is not None, f"no room for {key}"
    c = await pool.prepare(lease, key.namespace, key.docid.split("/")[-1])
    assert isinstance(c, FaultyContainer)
    _prepared[id(lease.slot)] = c
    return lease


def container(lease: Lease) -> FaultyContainer:
    return _prepared[id(lease.slot)]


def test_a_released_container_is_reused_warm_by_the_same_action_only():
    async def body(pool, backend, loop):
        first = await use(pool, A)
        assert first.how is How.COLD and backend.created == 1
        assert container(first).spec.name.startswith(f"wsk0_{pool.generation}_")
        assert container(first).spec.name.endswith("_guest_a")
        pool.mark_initialized(first)
        pool.release(first, healthy=True)
        again = await use(pool, A)
        assert again.how is How.WARM and container(again) is container(first)
        assert again.slot.initialized  # no second /init
        pool.release(again, healthy=True)
        other_ns = await use(pool, WarmKey("alice", A.docid, A.revision))
        other_rev = await use(pool, WarmKey("guest", A.docid, "2-a"))
        assert other_ns.how is How.COLD and other_rev.how is How.COLD
        assert (pool.cold_starts, pool.warm_starts) == (3, 1)
        assert backend.created == 3

    pool_test(body)


def test_a_call_waits_when_memory_is_held_by_busy_containers():
    async def body(pool, backend, loop):
        a = await use(pool, A)
        await use(pool, B)
        assert pool.used_memory_mb == 512
        assert pool.reserve(C, PY, 256) is None  # busy containers are never evicted
        pool.release(a, healthy=True)
        c = await use(pool, C)
        assert [v.id for v in c.evict] == [a.slot.id]

    pool_test(body, memory_mb=512)


def test_memory_pressure_evicts_the_least_recently_used_idle_container():
    async def body(pool, backend, loop):
        a = await use(pool, A)
        pool.release(a, healthy=True)
        await asyncio.sleep(1)
        b = await use(pool, B)
        pool.release(b, healthy=True)
        assert pool.used_memory_mb == 512
        c = await use(pool, C)
        assert c.how is How.COLD and [v.id for v in c.evict] == [a.slot.id]
        await settle()
        assert container(a).destroyed == 1 and container(b).destroyed == 0
        assert pool.evictions == 1 and pool.used_memory_mb == 512
        assert backend.live == 2
        again = await use(pool, B)  # the more recently used one stayed warm
        assert again.how is How.WARM

    pool_test(body, memory_mb=512)


def test_a_large_call_evicts_as_many_idle_containers_as_it_needs():
    async def body(pool, backend, loop):
        for key in (A, B, C):
            pool.release(await use(pool, key), healthy=True)
            await asyncio.sleep(1)
        big = await use(pool, WarmKey("guest", "guest/big", "1"), memory_mb=512)
        assert len(big.evict) == 2 and pool.evictions == 2
        await settle()
        assert backend.live == 2 and pool.used_memory_mb == 768

    pool_test(body, memory_mb=768)


def test_a_prewarmed_container_is_used_for_its_kind_and_memory_and_replaced():
    async def body(pool, backend, loop):
        await settle()
        assert pool.count(SlotState.PREWARM) == 1 and backend.created == 1
        spare = backend.containers[0]
        assert "prewarm" in spare.spec.name
        lease = await use(pool, A)
        assert lease.how is How.PREWARM and container(lease) is spare
        assert not lease.slot.initialized
        assert pool.prewarm_starts == 1 and pool.cold_starts == 0
        await settle()
        assert pool.count(SlotState.PREWARM) == 1 and backend.created == 2  # refilled
        other = await use(pool, B, memory_mb=512)  # another size: not from the stem cells
        assert other.how is How.COLD

    pool_test(body, stem_cells=(StemCell(PY, 256, 1),))


def test_prewarmed_containers_take_at_most_half_of_the_memory():
    async def body(pool, backend, loop):
        await settle()
        assert pool.count(SlotState.PREWARM) == 2
        assert pool.used_memory_mb == 512

    pool_test(body, stem_cells=(StemCell(PY, 256, 4),))


def test_a_call_needing_the_prewarms_memory_evicts_them_and_the_janitor_gives_it_back():
    async def body(pool, backend, loop):
        await settle()
        assert pool.count(SlotState.PREWARM) == 2  # 512 of the 1024 MB
        # Larger than what the prewarms leave: it waited for ever before they could go.
        lease = await use(pool, A, memory_mb=1024)
        assert lease.how is How.COLD and len(lease.evict) == 2
        await settle()
        assert pool.count(SlotState.PREWARM) == 0 and pool.evictions == 2
        pool.release(lease, healthy=True)
        await asyncio.sleep(31)  # removed when idle for 30 s; its memory goes to the prewarms
        await settle()
        assert container(lease).destroyed == 1
        assert pool.count(SlotState.PREWARM) == 2 and backend.created == 5

    pool_test(body, stem_cells=(StemCell(PY, 256, 2),), pause_grace_s=10, idle_timeout_s=30)


def test_a_prewarm_still_starting_is_not_taken():
    async def body(pool, backend, loop):
        # The prewarm takes 1 s to start; meanwhile a call of its kind gets a cold one.
        await asyncio.sleep(0.1)
        assert pool.count(SlotState.STARTING) == 1
        lease = await use(pool, A)
        assert lease.how is How.COLD
        await asyncio.sleep(1)
        assert pool.count(SlotState.PREWARM) == 1

    pool_test(body, cold_start_s=1.0, stem_cells=(StemCell(PY, 256, 1),))


def test_a_failed_creation_frees_its_memory_and_says_why_until_a_probe_succeeds():
    async def body(pool, backend, loop):
        woken: list[int] = []
        pool.on_change = lambda: woken.append(len(pool.slots))  # the dispatcher's wake-up
        backend.faults.create_error = ContainerError("no space left on device")
        lease = pool.reserve(A, PY, 256)
        assert lease is not None and pool.used_memory_mb == 256
        with pytest.raises(ContainerError, match="no space"):
            await pool.prepare(lease, "guest", "a")
        assert pool.used_memory_mb == 0 and not pool.slots
        assert woken == [0]  # told that the memory is free again
        assert pool.create_problem == "cannot create containers: no space left on device"
        await pool.probe()  # still failing
        assert pool.create_problem is not None and woken == [0]
        backend.faults.create_error = None
        await pool.probe()
        assert pool.create_problem is None and woken == [0, 0]
        assert backend.live == 0  # the probe's container is gone

    pool_test(body)


def test_a_missing_image_is_the_actions_problem_not_the_nodes():
    async def body(pool, backend, loop):
        backend.faults.create_error = ImagePullError("image user/img:tag not found")
        lease = pool.reserve(A, "blackbox", 256)
        with pytest.raises(ImagePullError):
            await pool.prepare(lease, "guest", "a")
        assert pool.create_problem is None and pool.used_memory_mb == 0

    pool_test(body)


def test_a_failed_prewarm_is_logged_and_leaves_no_slot(caplog):
    caplog.set_level(logging.WARNING, logger="containers.pool")

    async def body(pool, backend, loop):
        await settle()
        assert pool.slots == {} and pool.used_memory_mb == 0
        assert "prewarm" in caplog.text and "runtime image missing" in caplog.text

    pool_test(
        body,
        create_error=ContainerError("runtime image missing"),
        stem_cells=(StemCell(PY, 256, 1),),
    )


def test_an_unhealthy_container_is_destroyed_at_release():
    async def body(pool, backend, loop):
        lease = await use(pool, A)
        pool.release(lease, healthy=False)
        await settle()
        assert container(lease).destroyed == 1 and not pool.slots
        assert (await use(pool, A)).how is How.COLD

    pool_test(body)


def test_a_condemned_container_goes_at_release_or_at_once_if_idle():
    async def body(pool, backend, loop):
        busy = await use(pool, A)
        pool.condemn(busy.slot)
        await settle()
        assert container(busy).destroyed == 0  # still running its call
        pool.release(busy, healthy=True)
        await settle()
        assert container(busy).destroyed == 1 and not pool.slots
        idle = await use(pool, B)
        pool.release(idle, healthy=True)
        pool.condemn(idle.slot)
        await settle()
        assert container(idle).destroyed == 1 and not pool.slots
        pool.condemn(idle.slot)  # already gone: nothing happens

    pool_test(body)


def test_idle_containers_are_paused_then_removed_and_resumed_when_used():
    async def body(pool, backend, loop):
        lease = await use(pool, A)
        pool.release(lease, healthy=True)
        c = container(lease)
        await asyncio.sleep(12)
        assert c.paused and pool.count(SlotState.PAUSED) == 1
        again = await use(pool, A)
        assert again.how is How.WARM and container(again) is c
        assert not c.paused and c.resumes == 1
        pool.release(again, healthy=True)
        await asyncio.sleep(61)
        assert c.destroyed == 1 and not pool.slots

    pool_test(body, pause_grace_s=10, idle_timeout_s=60)


def test_the_janitor_pauses_and_removes_a_container_at_its_time():
    async def body(pool, backend, loop):
        await asyncio.sleep(0.5)
        lease = await use(pool, A)
        pool.release(lease, healthy=True)  # idle from 0.5: paused at 10.5, removed at 30.5
        c = container(lease)
        await asyncio.sleep(9.99)
        assert not c.paused
        await asyncio.sleep(0.02)
        assert c.paused  # at its time, not at the next whole second
        await asyncio.sleep(19.98)
        assert c.destroyed == 0
        await asyncio.sleep(0.02)
        assert c.destroyed == 1 and not pool.slots

    pool_test(body, pause_grace_s=10, idle_timeout_s=30)


def test_a_container_that_cannot_be_paused_is_removed(caplog):
    async def body(pool, backend, loop):
        lease = await use(pool, A)
        pool.release(lease, healthy=True)
        backend.faults.pause_error = ContainerError("freezer unavailable")
        await asyncio.sleep(12)
        await settle()
        assert container(lease).destroyed == 1 and not pool.slots
        assert "freezer unavailable" in caplog.text

    pool_test(body, pause_grace_s=10, idle_timeout_s=60)


def test_close_destroys_busy_idle_and_prewarmed_containers():
    async def body(pool, backend, loop):
        await settle()
        await use(pool, A, memory_mb=128)
        pool.release(await use(pool, B, memory_mb=128), healthy=True)
        assert backend.live == 3

    pool_test(body, stem_cells=(StemCell(PY, 256, 1),))


# -- keep-alive by footprint ------------------------------------------------------------------


def test_an_idle_container_counts_at_its_measured_footprint_until_a_call_takes_it():
    async def body(pool, backend, loop):
        backend.footprint_mb = 30
        a = await use(pool, A)
        pool.mark_initialized(a)
        pool.release(a, healthy=True)
        assert pool.used_memory_mb == 256  # at its limit until measured
        await settle()
        assert (pool.used_memory_mb, pool.kept_memory_mb) == (30, 30)
        again = await use(pool, A)
        assert again.how is How.WARM and (pool.used_memory_mb, pool.kept_memory_mb) == (256, 0)
        pool.release(again, healthy=True)
        backend.footprint_mb = None  # cannot be measured: it counts at its limit again
        await settle()
        assert pool.used_memory_mb == 256

    pool_test(body, keep_alive="footprint")


def test_idle_containers_stay_until_a_call_needs_their_memory_the_least_valued_going_first():
    async def body(pool, backend, loop):
        backend.footprint_mb = 100
        costs = {A: 0.0, B: 0.0, C: 0.5}  # C's cold start cost 0.2 + 0.5 s, the others 0.2 s
        for key, extra in costs.items():
            lease = await use(pool, key)
            await asyncio.sleep(extra)
            pool.mark_initialized(lease)
            pool.release(lease, healthy=True)
        pool.release(await use(pool, A), healthy=True)  # A used twice
        await settle()
        assert pool.used_memory_mb == 300  # three kept at 100 MB, none evicted
        busy = [await use(pool, WarmKey("guest", f"guest/n{i}", "1")) for i in range(2)]
        assert not any(lease.evict for lease in busy) and pool.used_memory_mb == 812
        # Values: A 2 x 0.2 / 100, B 1 x 0.2 / 100, C 1 x 0.7 / 100: B goes, then A.
        third = await use(pool, WarmKey("guest", "guest/n2", "1"))
        assert [v.key for v in third.evict] == [B]
        fourth = await use(pool, WarmKey("guest", "guest/n3", "1"))
        assert [v.key for v in fourth.evict] == [A, C]
        assert pool.evictions == 3

    pool_test(body, keep_alive="footprint", cold_start_s=0.2)


def test_the_janitor_sheds_kept_containers_that_grew_past_the_nodes_memory():
    async def body(pool, backend, loop):
        backend.footprint_mb = 100
        for key in (A, B, C):
            pool.release(await use(pool, key), healthy=True)
        await settle()
        busy = await use(pool, WarmKey("guest", "guest/big", "1"), memory_mb=512)
        assert pool.used_memory_mb == 812
        backend.footprint_mb = 250  # they grew while idle: 512 + 750 > 1024
        await asyncio.sleep(MEASURE_EVERY_S + 2)
        assert (pool.used_memory_mb, pool.evictions) == (512 + 2 * 250, 1)  # one of three went
        assert busy.slot.state is SlotState.BUSY  # a running call is never the one to go

    pool_test(body, keep_alive="footprint")


def test_keep_alive_is_footprint_or_limit():
    with pytest.raises(ValueError, match="footprint, limit"):
        ContainerPool(
            FaultyBackend(), user_memory_mb=1024, clock=None, name_prefix="w", keep_alive="lru"
        )


# -- containers created ahead of their calls (Docker's create_ahead) --


def test_a_container_created_ahead_is_the_one_its_call_gets_even_while_starting():
    async def body(pool, backend, loop):
        assert pool.create_ahead(A, PY, 256, None)
        assert pool.ahead == 1 and pool.used_memory_mb == 256
        await asyncio.sleep(0.5)  # half way through its 1 s creation: the call waits for it
        lease = pool.reserve(A, PY, 256)
        assert lease is not None and lease.how is How.AHEAD and pool.ahead == 0
        t0 = loop.time()
        c = await pool.prepare(lease, "guest", "a")
        assert loop.time() - t0 == pytest.approx(0.5, abs=0.01)  # not a second creation
        assert backend.created == 1 and not lease.slot.initialized  # its call runs /init
        assert (pool.cold_starts, pool.prewarm_starts) == (1, 0)
        pool.mark_initialized(lease)
        assert lease.slot.cold_cost_s == pytest.approx(1.0, abs=0.01)  # from its creation
        pool.release(lease, healthy=True)
        ready = await use(pool, A)
        assert ready.how is How.WARM and container(ready) is c
        # Ready before its call: the call takes it at once; a call of another action never.
        assert pool.create_ahead(B, PY, 256, None)
        await asyncio.sleep(1.1)
        assert pool.count(SlotState.PREWARM) == 1
        other = await use(pool, C)
        assert other.how is How.COLD
        mine = await use(pool, B)
        assert mine.how is How.AHEAD and backend.created == 3

    pool_test(body, cold_start_s=1.0)


def test_creating_ahead_takes_free_memory_only():
    async def body(pool, backend, loop):
        await settle()
        busy, idle = await use(pool, A), await use(pool, B)
        pool.release(idle, healthy=True)
        assert pool.create_ahead(C, PY, 256, None)  # the last 256 MB: free
        # Left: the busy one, the idle one, the one created ahead and the prewarm: creating
        # ahead evicts none of them (the idle one may yet serve a warm call).
        assert not pool.create_ahead(WarmKey("guest", "guest/d", "1-d"), PY, 256, None)
        await settle()
        assert pool.evictions == 0 and container(idle).destroyed == 0
        assert pool.count(SlotState.PREWARM) == 2 and pool.ahead == 1
        pool.release(busy, healthy=True)

    pool_test(body, stem_cells=(StemCell(PY, 256, 1),))


def test_a_failed_creation_ahead_fails_the_call_that_took_it_as_its_own_would():
    async def body(pool, backend, loop):
        backend.faults.create_error = ContainerError("no space left on device")
        assert pool.create_ahead(A, PY, 256, None)
        lease = pool.reserve(A, PY, 256)
        assert lease is not None and lease.how is How.AHEAD
        with pytest.raises(ContainerError, match="no space"):
            await pool.prepare(lease, "guest", "a")
        pool.release(lease, healthy=False)
        assert pool.used_memory_mb == 0 and pool.create_problem is not None

    pool_test(body, cold_start_s=1.0)


def test_a_container_created_ahead_that_no_call_took_is_removed_when_idle_too_long():
    async def body(pool, backend, loop):
        assert pool.create_ahead(A, PY, 256, None)
        await asyncio.sleep(29)
        assert pool.ahead == 1
        await asyncio.sleep(3)
        assert pool.ahead == 0 and backend.live == 0

    pool_test(body, pause_grace_s=10, idle_timeout_s=30)


def test_a_call_never_waits_for_the_removal_of_the_container_it_evicts():
    async def body(pool, backend, loop):
        old = await use(pool, A)
        pool.release(old, healthy=True)
        gone, destroy = asyncio.Event(), container(old).destroy

        async def slow_destroy() -> None:
            await asyncio.sleep(5)
            await destroy()
            gone.set()

        container(old).destroy = slow_destroy  # an engine slow to remove it
        t0 = loop.time()
        lease = await use(pool, B)
        assert [v.id for v in lease.evict] == [old.slot.id]
        assert loop.time() - t0 < 0.01 and not gone.is_set()
        await gone.wait()

    pool_test(body, memory_mb=256)


def test_a_start_costs_what_the_last_creations_took_and_nothing_when_warm():
    async def body(pool, backend, loop):
        assert pool.start_cost_s(A, PY, 256) == 0.0  # none measured yet
        first = await use(pool, A)  # 0.5 s to create
        await asyncio.sleep(2.0)  # its /init (at the call's own rank): no cost of a creation
        pool.mark_initialized(first)
        assert pool.start_cost_s(B, PY, 256) == pytest.approx(0.5)
        assert pool.mean_creation_s == pytest.approx(0.5)
        assert pool.busy_since(A) == [first.slot.last_used] and pool.busy_since(B) == []
        assert not pool.has_idle(A)
        pool.release(first, healthy=True)
        assert pool.has_idle(A) and pool.busy_since(A) == []
        assert pool.start_cost_s(A, PY, 256) == 0.0  # a warm one is there
        assert pool.start_cost_s(B, PY, 4096) == 0.0  # no room: it waits for memory anyway

    pool_test(body, cold_start_s=0.5)
