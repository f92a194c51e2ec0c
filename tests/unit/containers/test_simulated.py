"""The simulated CPU finishes calls on time at any clock value, and the virtual-time loop
fails fast, naming the culprit, when virtual time stops moving (issue 27)."""

import asyncio

import pytest

from containers.simulated import SimulatedCpu, _Job, stretch, weighted_speeds
from whisk.clock import VirtualClock, VirtualTimeLoop, VirtualTimeStalled

CORE = frozenset({0})


def run_calls(start: float, calls: list[tuple[float, float]]) -> list[float]:
    """Each (arrival, work) call on one shared core from virtual time ``start``; returns
    each call's end, relative to ``start``, in the order given."""
    cpu = SimulatedCpu()
    ends = [0.0] * len(calls)

    async def one(i: int, at: float, work: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(at)
        await cpu.run(work, CORE)
        ends[i] = loop.time() - start

    async def main() -> None:
        await asyncio.gather(*(one(i, at, w) for i, (at, w) in enumerate(calls)))

    # A low threshold: a stuck CPU fails the test in milliseconds instead of hanging it.
    loop = VirtualTimeLoop(VirtualClock(start), stall_iterations=10_000)
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return ends


# Each of these made the CPU tick at the same virtual time for ever before the fix: the
# float left in a call's ``remaining`` after the last step, divided by its rate, was below
# the clock's resolution at that value (about 1e-13 s at 523 s, 1e-10 s at 1e6 s).
@pytest.mark.parametrize("start", [523.74, 1e6])
def test_a_short_call_finishes_on_time_late_in_a_trace(start):
    assert run_calls(start, [(0.0, 0.001)]) == [pytest.approx(0.001, abs=1e-7)]


@pytest.mark.parametrize("start", [523.74, 86400.0, 1e6])
def test_calls_sharing_a_core_finish_on_time_late_in_a_trace(start):
    # Processor sharing, hand-computed: a (3 ms) alone until 0.7 ms, then with b (1 ms);
    # c (2 ms) joins at 1.1 ms. a has 2.3 - 0.2 = 2.1 ms left at 1.1, b 0.8 ms: three share
    # until b ends at 1.1 + 3 x 0.8 = 3.5; c (1.2 ms left) ends at 3.5 + 2 x 1.2 = 5.9, and
    # a (1.3 ms left at 3.5) 0.1 ms later.
    ends = run_calls(start, [(0.0, 0.003), (0.0007, 0.001), (0.0011, 0.002)])
    assert ends == [pytest.approx(e, abs=1e-7) for e in (0.0060, 0.0035, 0.0059)]


def test_two_calls_of_the_hang_reproducer_finish():
    # The first two calls of tests/data/azure2019-one-function-124.csv, 523.74 s in.
    ends = run_calls(523.74, [(0.0, 0.031), (0.051725, 0.031)])
    assert ends == [pytest.approx(0.031, abs=1e-7), pytest.approx(0.082725, abs=1e-7)]


def stuck(loop: asyncio.AbstractEventLoop, how: str) -> None:
    """A callback that re-arms itself at the same virtual time, for ever."""
    if how == "soon":
        loop.call_soon(stuck, loop, how)
    else:
        loop.call_at(loop.time(), stuck, loop, how)


@pytest.mark.parametrize("how", ["soon", "timer"])
def test_the_watchdog_names_a_callback_that_keeps_time_from_moving(how):
    loop = VirtualTimeLoop(VirtualClock(42.0), stall_iterations=1000)
    try:
        loop.call_soon(stuck, loop, how)
        with pytest.raises(VirtualTimeStalled, match=r"stayed at 42\.0 s.*1 x stuck"):
            loop.run_until_complete(asyncio.sleep(1.0))
    finally:
        loop.close()


def test_the_watchdog_lets_a_burst_at_one_instant_and_moving_time_run():
    # 20 000 tasks at one instant take a few iterations (each runs every ready callback),
    # and a million quick timers are fine while time moves.
    async def burst() -> float:
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(asyncio.sleep(0) for _ in range(20_000)))
        for _ in range(2000):
            await asyncio.sleep(1e-6)
        return loop.time()

    loop = VirtualTimeLoop(stall_iterations=50)
    try:
        assert loop.run_until_complete(burst()) == pytest.approx(2000e-6)
    finally:
        loop.close()


def _jobs(weights: list[int], wait: float = 0.0) -> list[_Job]:
    loop = asyncio.new_event_loop()
    try:
        return [
            _Job(1.0, 1.0, wait, CORE, loop.create_future(), i, w) for i, w in enumerate(weights)
        ]
    finally:
        loop.close()


def test_weights_share_cores_by_water_filling_never_strictly():
    # 2 cores, two weight-10000 calls and a weight-1 one: the first two nearly a core each,
    # the last its 1 / 20001 of the two (CFS gives the least weight its share too).
    speeds = weighted_speeds(_jobs([10_000, 10_000, 1]), 2)
    assert speeds == pytest.approx([20_000 / 20_001] * 2 + [2 / 20_001])
    # A call whose weight alone would give it more than a core is capped at one.
    assert weighted_speeds(_jobs([10_000, 1, 1]), 2) == pytest.approx([1.0, 0.5, 0.5])


def test_weighted_calls_that_wait_use_no_more_than_the_cores():
    jobs = _jobs([10_000, 100, 1, 1], wait=1.0)  # each call half CPU, half waiting
    speeds = weighted_speeds(jobs, 1)
    used = sum(j.cpu / (j.wait + j.cpu / s) for j, s in zip(jobs, speeds, strict=True))
    assert used == pytest.approx(1.0)
    assert speeds[0] > speeds[1] > speeds[2] == speeds[3]


def test_equal_weights_give_the_unweighted_rates_exactly():
    # Not only close: every existing figure of the simulator stays bit-identical.
    cpu = SimulatedCpu()

    async def main() -> None:
        a = cpu.submit(3.0, CORE, 1.0, weight=7)
        b = cpu.submit(1.0, CORE, weight=7)
        assert cpu._rates() == {
            a.jid: 1.0 / (2.0 + 1.0 * stretch([a, b], 1)),
            b.jid: 1.0 / (1.0 * stretch([a, b], 1)),
        }
        await asyncio.gather(cpu.wait(a), cpu.wait(b))

    loop = VirtualTimeLoop(VirtualClock(0.0))
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_a_reweighed_call_takes_the_core_at_once():
    # Two 1 s calls on one core; at 0.5 s the second is given weight 10000: it ends about
    # 0.5 + 0.75 s later (it had 0.75 s left), the first at 2 s (the core never idles).
    cpu = SimulatedCpu()
    ends: dict[str, float] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        a, b = cpu.submit(1.0, CORE), cpu.submit(1.0, CORE)

        async def until(name: str, job: _Job) -> None:
            await cpu.wait(job)
            ends[name] = loop.time()

        both = asyncio.gather(until("a", a), until("b", b))
        await asyncio.sleep(0.5)
        cpu.reweigh(b, 10_000)
        await both

    loop = VirtualTimeLoop(VirtualClock(0.0))
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert ends["b"] == pytest.approx(0.5 + 0.75 * 10_100 / 10_000, rel=1e-3)
    assert ends["a"] == pytest.approx(2.0)


def test_the_engines_work_weighs_as_the_calls_beside_it_together():
    # Two CPU-bound 1 s calls at the top weight on two cores, and a container creation of
    # 1 s of the engine's CPU: the kernel shares the cores between the calls' group and the
    # engine's process alike, so the creation has a core for its second and the calls half
    # of one each (0.5 s done), then a core each: they end at 1.5 s. Weighed as a container
    # of the default weight, the creation would have had 2 / 20 101 of the cores.
    cpu = SimulatedCpu()
    cores = frozenset({0, 1})
    ends: dict[str, float] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        jobs = {
            "a": cpu.submit(1.0, cores, weight=10_000),
            "b": cpu.submit(1.0, cores, weight=10_000),
            "engine": cpu.submit(1.0, cpu.engine_group(cores), outside=True),
        }

        async def until(name: str, job: _Job) -> None:
            await cpu.wait(job)
            ends[name] = loop.time()

        await asyncio.gather(*(until(n, j) for n, j in jobs.items()))

    loop = VirtualTimeLoop(VirtualClock(0.0))
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert ends == {"engine": pytest.approx(1.0), "a": pytest.approx(1.5), "b": pytest.approx(1.5)}


def test_the_engine_works_on_the_least_busy_core_beside_pinned_calls():
    cpu = SimulatedCpu()

    async def main() -> None:
        cores = frozenset({0, 1, 2})
        assert cpu.engine_group(cores) == cores  # nothing runs
        pinned = [cpu.submit(1.0, frozenset({c})) for c in (0, 0, 2)]
        assert cpu.engine_group(cores) == frozenset({1})  # groups never overlap
        shared = cpu.submit(1.0, cores)
        assert cpu.engine_group(cores) == cores
        await asyncio.gather(*(cpu.wait(j) for j in [*pinned, shared]))

    loop = VirtualTimeLoop(VirtualClock(0.0))
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
