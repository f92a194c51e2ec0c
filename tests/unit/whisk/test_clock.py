"""The virtual-time loop (``whisk.clock.VirtualTimeLoop``) runs callbacks as asyncio's own
loop does, in virtual time: the simulator's schedules depend on that order, step for step."""

from __future__ import annotations

import asyncio
import random

import pytest

from whisk.clock import VirtualClock, VirtualTimeLoop


def run(loop: VirtualTimeLoop, seconds: float) -> None:
    loop.run(asyncio.sleep(seconds))


def test_timers_run_in_time_order_at_their_time_and_ready_callbacks_first_in_first_out():
    loop = VirtualTimeLoop(VirtualClock(100.0))
    seen: list[tuple[str, float]] = []
    for name, delay in [("c", 3.0), ("a", 1.0), ("b", 2.0)]:
        loop.call_later(delay, lambda n=name: seen.append((n, loop.time())))
    loop.call_at(100.5, lambda: seen.append(("at", loop.time())))
    for name in ("s1", "s2"):
        loop.call_soon(lambda n=name: seen.append((n, loop.time())))
    run(loop, 5)
    assert seen == [
        ("s1", 100.0),
        ("s2", 100.0),
        ("at", 100.5),
        ("a", 101.0),
        ("b", 102.0),
        ("c", 103.0),
    ]
    assert loop.time() == 105.0
    loop.close()


def test_cancelled_timers_never_run_and_are_dropped_from_the_heap():
    loop = VirtualTimeLoop()
    seen: list[int] = []
    timers = [loop.call_later(1 + i, seen.append, i) for i in range(300)]
    for timer in timers[::2] + timers[1:200:2]:  # far over half: the heap is rebuilt
        timer.cancel()
    run(loop, 0.5)
    assert len(loop._timers) == 50  # the rebuild kept the live ones only
    run(loop, 400)
    assert seen == list(range(201, 300, 2))
    loop.close()


def test_equal_times_run_in_the_order_asyncio_orders_its_handles():
    """Timers with equal times are popped in the order asyncio's heap of handles pops them
    (the simulator's near-ties depend on it): the same pushes and pops of ``TimerHandle``s
    on a plain heap give the same order."""
    import heapq

    rng = random.Random(7)
    whens = [float(rng.randint(1, 6)) for _ in range(200)]
    loop = VirtualTimeLoop()
    seen: list[int] = []
    for i, when in enumerate(whens):
        loop.call_at(when, seen.append, i)
    reference: list[asyncio.TimerHandle] = []
    for i, when in enumerate(whens):
        heapq.heappush(reference, asyncio.TimerHandle(when, seen.append, (i,), loop))
    # run() sleeps: one more timer, pushed after them, as in the loop
    heapq.heappush(reference, asyncio.TimerHandle(10.0, seen.append, (-1,), loop))
    expected = [heapq.heappop(reference)._args[0] for _ in whens]  # type: ignore[attr-defined]
    run(loop, 10)
    assert seen == expected
    loop.close()


def test_a_callback_that_raises_goes_to_the_exception_handler_and_the_loop_goes_on():
    loop = VirtualTimeLoop()
    errors: list[dict] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    seen: list[str] = []

    def boom() -> None:
        raise ValueError("boom")

    loop.call_later(1, boom)
    loop.call_later(2, seen.append, "after")
    run(loop, 3)
    assert seen == ["after"]
    assert [type(e["exception"]) for e in errors] == [ValueError]
    assert "Exception in callback" in errors[0]["message"]
    loop.close()


def test_a_closed_loop_refuses_callbacks():
    loop = VirtualTimeLoop()
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        loop.call_soon(print)
    with pytest.raises(RuntimeError, match="closed"):
        loop.call_later(1, print)
