"""The attained-service policies in the simulator and their driver (issue 40): short calls
take the CPU from a long one by cgroup weights, without a pause, and a container that is
gone does not stop the ordering."""

import asyncio
import logging
import time
from types import SimpleNamespace
from typing import Any

import pytest

from containers.backend import ContainerError, ContainerGone
from containers.cpu import CpuTimes
from invoker.activation import CpuMark
from invoker.cpu_order import CpuOrder, Running, shared_cores_warning
from invoker.scheduler import Call
from invoker.simulate import SimulationSettings, simulate
from invoker.workloads import TraceCall
from policies.attained import HIGH, LOW, MID, Attained, DurationHistory, partial_weight
from policies.base import CallInfo
from policies.builtin import OPENWHISK
from whisk.clock import LoopClock, VirtualTimeLoop

# A 10 s call, and 1 s ones of another function arriving while it runs, on one core.
TRACE = [
    TraceCall(0.0, "L", 10.0),
    TraceCall(1.5, "S", 1.0),
    TraceCall(4.5, "S", 1.0),
    TraceCall(7.5, "S", 1.0),
]


@pytest.mark.parametrize("policy", ["gittins", "las"])
def test_short_calls_take_the_core_from_a_long_one_without_a_pause(policy):
    r = simulate(TRACE, policy, SimulationSettings(cores=1))
    ps = simulate(TRACE, "openwhisk", SimulationSettings(cores=1))
    short = r["per_function"]["S"]["mean_response_s"]
    # Each S runs at once at HIGH / (HIGH + MID) of the core (CFS leaves the long call,
    # next in rank, its share), where processor sharing halves its speed.
    assert short == pytest.approx((HIGH + MID) / HIGH, rel=1e-4)
    assert ps["per_function"]["S"]["mean_response_s"] == pytest.approx(2.0, rel=1e-3)
    # The core never idles: the long call ends when all the work is done.
    assert r["per_function"]["L"]["mean_response_s"] == pytest.approx(13.0, rel=1e-3)
    assert r["preemptions"] == 0


class Gone:
    name = "gone"

    async def set_cpu_weight(self, weight: int) -> None:
        raise ContainerGone("removed")

    async def cpu_times(self) -> CpuTimes:
        return CpuTimes(0.0, 0.0)


class Kept(Gone):
    def __init__(self) -> None:
        self.weights: list[int] = []

    async def set_cpu_weight(self, weight: int) -> None:
        self.weights.append(weight)


def test_the_driver_writes_only_changed_weights_and_survives_a_gone_container():
    loop = VirtualTimeLoop()
    clock = LoopClock(loop)

    def call(i: int, container: Any) -> Call:
        mark = CpuMark(container, 0.0, CpuTimes(0.0, 0.0), 0.0, CpuTimes(0.0, 0.0))
        return Call("f", SimpleNamespace(in_run=mark, in_init=None), 0.0, 0.0, i)

    kept = [Kept() for _ in range(3)]
    calls = [call(0, Gone()), *(call(i + 1, c) for i, c in enumerate(kept))]
    order = CpuOrder(Attained("las"), 1, clock, lambda: calls)

    async def main() -> None:
        await order.apply()  # all at age 0: receipt order ranks them
        await order.apply()  # nothing changed: nothing written

    loop.run_until_complete(main())
    loop.close()
    assert [k.weights for k in kept] == [[MID], [LOW], [LOW]]
    assert order.writes == 3 and HIGH not in kept[0].weights
    assert order.failed_writes == 0  # a removed container is no failure
    assert order.status()["writes"] == 3 and order.status()["failedWrites"] == 0


class Slow(Kept):
    async def set_cpu_weight(self, weight: int) -> None:
        busy_until = time.perf_counter() + 0.01  # holds the thread, as a cgroup write does
        while time.perf_counter() < busy_until:
            pass
        await super().set_cpu_weight(weight)


def test_the_time_the_invoker_spends_writing_weights_is_counted():
    """What the order costs the invoker (``/status``'s ``cpuOrder.writeSeconds``): the
    time in the writes, counted in real time whatever the clock the ranking runs on."""
    mark = CpuMark(Slow(), 0.0, CpuTimes(0.0, 0.0), 0.0, CpuTimes(0.0, 0.0))
    calls = [Call("f", SimpleNamespace(in_run=mark, in_init=None), 0.0, 0.0, 0)]
    loop = VirtualTimeLoop()
    order = CpuOrder(Attained("las"), 1, LoopClock(loop), lambda: calls)
    loop.run_until_complete(order.apply())
    loop.close()
    assert order.writes == 1 and 0.01 <= order.status()["writeSeconds"] < 1


class Refused(Gone):
    async def set_cpu_weight(self, weight: int) -> None:
        raise ContainerError("cannot set the CPU weight of refused: no CAP_SYS_NICE")


def test_a_refused_weight_write_is_a_warning_once(caplog):
    """A host that refuses the writes (no right to a nice value) makes the order do
    nothing: the operator is told once, not at every re-ranking."""
    mark = CpuMark(Refused(), 0.0, CpuTimes(0.0, 0.0), 0.0, CpuTimes(0.0, 0.0))
    calls = [Call("f", SimpleNamespace(in_run=mark, in_init=None), 0.0, 0.0, 0)]
    loop = VirtualTimeLoop()
    order = CpuOrder(Attained("las"), 1, LoopClock(loop), lambda: calls)
    with caplog.at_level(logging.DEBUG, logger="invoker.cpu_order"):
        loop.run_until_complete(order.apply())
        loop.run_until_complete(order.apply())
    loop.close()
    assert (order.writes, order.failed_writes) == (0, 2)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "no CAP_SYS_NICE" in warned[0].getMessage()


class Starved(Kept):
    """A container whose call has waited for a CPU all but its last ``ran`` seconds."""

    def __init__(self, waited: float, ran: float) -> None:
        super().__init__()
        self.times = CpuTimes(ran, waited)

    async def cpu_times(self) -> CpuTimes:
        return self.times


class At:
    def __init__(self, now: float) -> None:
        self.at = now

    def now(self) -> float:
        return self.at


@pytest.mark.parametrize("kind", ["gittins", "gittins-aged"])
def test_a_long_call_starved_past_its_deadline_gets_its_part_under_gittins_aged(kind):
    # On one core at t = 500: a call of a 100 s function received at 0 that has waited for
    # the CPU all but 0.5 s (its deadline: 0 + 4 x 99.5 s), and two new 1 s calls.
    history = DurationHistory()
    for function, d in (("L", 100.0), ("L", 100.0), ("S", 1.0), ("S", 1.0)):
        history.add(function, d)
    old, new = Starved(499.5, 0.5), [Starved(0.0, 0.5) for _ in range(2)]

    def call(i: int, function: str, received: float, container: Any) -> Call:
        mark = CpuMark(container, received, CpuTimes(0.0, 0.0), received, CpuTimes(0.0, 0.0))
        return Call(function, SimpleNamespace(in_run=mark, in_init=None), received, 0.0, i)

    calls = [call(0, "L", 0.0, old), call(1, "S", 499.5, new[0]), call(2, "S", 499.5, new[1])]
    order = CpuOrder(Attained(kind), 1, At(500.0), lambda: calls, history)
    loop = VirtualTimeLoop()
    loop.run_until_complete(order.apply())
    loop.close()
    weights = [c.weights for c in (old, *new)]
    if kind == "gittins":  # by the index alone the old call stays last, for ever
        assert weights == [[LOW], [HIGH], [MID]]
    else:  # late, it gets a quarter of the one core beside the best index; then the index
        assert weights == [[partial_weight(0.25)], [HIGH], [MID]]
    # Before its deadline it goes by its index, as under gittins.
    order.clock = At(300.0)
    early = [
        Running("L", 0, old, 0.5, 1.0, 0.0),
        *(Running("S", i + 1, c, 0.5, 1.0, 299.5) for i, c in enumerate(new)),
    ]
    assert order.rank(early) == {new[0]: HIGH, new[1]: MID, old: LOW}


def test_gittins_aged_queues_late_calls_ahead_within_a_quarter_of_the_running():
    """The waiting queue of ``gittins-aged`` (memory-bound) by the index at age 0, with the
    deadline of :func:`policies.attained.aged_deadline` and the share of the CPU order;
    ``gittins``' has no deadline."""
    history = DurationHistory()
    for d in (2.0, 2.0):
        history.add("f", d)
    info = CallInfo(100.0, 2.0, 100.0, 1, "f")
    aged = CpuOrder(Attained("gittins-aged"), 1, At(0.0), list, history).queue_policy(OPENWHISK)
    assert aged.priority(info) == -history.index("f", 0.0) == -0.5
    assert aged.late is not None and aged.late(info) == 100.0 + 4.0 / 0.5
    assert aged.late_share == 0.25
    plain = CpuOrder(Attained("gittins"), 1, At(0.0), list, history).queue_policy(OPENWHISK)
    assert plain.late is None


class Counted(Kept):
    """A container whose CPU counters say it has run ``ran`` seconds, and that counts the
    reads; ``gate``: each read waits for it (a pass that measures slowly)."""

    def __init__(self, ran: float, gate: asyncio.Event | None = None) -> None:
        super().__init__()
        self.ran, self.gate, self.reads = ran, gate, 0

    async def cpu_times(self) -> CpuTimes:
        self.reads += 1
        if self.gate is not None:
            await self.gate.wait()
        return CpuTimes(self.ran, 0.0)


def in_run(i: int, container: Any, since: float = 0.0) -> Call:
    mark = CpuMark(container, since, CpuTimes(0.0, 0.0), since, CpuTimes(0.0, 0.0))
    return Call("f", SimpleNamespace(in_run=mark, in_init=None), since, since, i)


def test_a_call_entering_run_is_ranked_before_its_run_without_a_pass():
    """``admit``: the new call gets the core's weight and the long call loses it at once,
    from the last pass's measures (no counter read on the call's path); then a pass."""
    long = Counted(5.0)
    calls = [in_run(0, long)]
    order = CpuOrder(Attained("las"), 1, At(5.0), lambda: calls)
    loop = VirtualTimeLoop()
    loop.run_until_complete(order.apply())
    assert long.weights == [HIGH] and long.reads == 1
    new = Counted(0.0)
    calls.append(in_run(1, new, since=5.0))
    loop.run_until_complete(order.admit())
    assert (new.weights, long.weights) == ([HIGH], [HIGH, MID])
    assert (new.reads, long.reads) == (0, 1)
    assert order._poked.is_set()  # a full pass follows
    loop.close()


def test_a_pass_measured_before_a_call_entered_does_not_undo_its_rank():
    """A pass whose reads began before a call entered ``/run`` writes after its ``admit``:
    it ranks that call too (by its time in ``/run``: 0), so the long call is not given the
    core back; and a call no pass has measured yet is ranked by its time in ``/run``."""
    gate = asyncio.Event()
    long = Counted(5.0, gate)
    calls = [in_run(0, long)]
    order = CpuOrder(Attained("las"), 1, At(5.0), lambda: calls)
    new = Counted(0.0)

    async def main() -> None:
        slow_pass = asyncio.ensure_future(order.apply())
        await asyncio.sleep(0)  # the pass is reading the long call's counters
        calls.append(in_run(1, new, since=5.0))
        await order.admit()
        gate.set()
        await slow_pass

    loop = VirtualTimeLoop()
    loop.run_until_complete(main())
    loop.close()
    assert (new.weights, long.weights) == ([HIGH], [MID])


def test_a_call_initialising_its_container_is_ranked_at_age_0():
    """A cold call's /init runs at the rank of a new call (under LAS: first), not at its new
    container's default weight, 1 % of a top-weight call's; its counters are not read."""
    long = Counted(5.0)
    calls = [in_run(0, long)]
    order = CpuOrder(Attained("las"), 1, At(5.0), lambda: calls)
    loop = VirtualTimeLoop()
    loop.run_until_complete(order.apply())
    cold = Counted(0.0)
    calls.append(Call("f", SimpleNamespace(in_run=None, in_init=cold), 5.0, 5.0, 1))
    loop.run_until_complete(order.admit())
    assert (cold.weights, long.weights) == ([HIGH], [HIGH, MID])
    order.clock = At(9.0)  # a long /init: still at age 0 in every pass
    loop.run_until_complete(order.apply())
    loop.close()
    assert (cold.weights, long.weights, cold.reads) == ([HIGH], [HIGH, MID], 0)


@pytest.mark.parametrize(
    ("used", "tick", "share"), [(0.19, 0.01, 1.0), (0.12, 0.01, 0.6), (0.19, 0.0, 0.95)]
)
def test_a_cpu_bound_call_read_a_tick_short_is_a_whole_core(used, tick, share):
    """Counters in 10 ms ticks (/proc) read after 0.2 s can show a CPU-bound call at 0.95 of
    a core: it is a whole core (below 1 the ranking would put the next call beside it at
    the top weight, on one core); a call that used 0.6 of its time leaves the rest to the
    next, and exact counters (a cgroup's, the simulator's) are taken as they read."""
    starved = Starved(0.0, used)
    starved.times = CpuTimes(used, 0.0, tick)
    calls = [in_run(0, starved)]
    order = CpuOrder(Attained("las"), 1, At(0.2), lambda: calls)
    loop = VirtualTimeLoop()
    (running,) = loop.run_until_complete(order.measure())
    loop.close()
    assert running.share == pytest.approx(share)
    second = Running("g", 1, Counted(0.0), 0.3, 1.0)
    assert order.rank([running, second])[second.container] == (MID if share == 1 else HIGH)


@pytest.mark.parametrize("runnable", [True, False, None])
def test_a_starved_call_has_not_aged_while_it_waited(runnable):
    """The kernel adds a wait to a task's schedstat only when the wait ends, so a call
    runnable now that had 1.0 s of CPU in 2.0 s with no wait counted was starved for the
    last second: it has attained 1.0 s, not 2.0, and is still CPU-bound; under LAS it goes
    before a call that has had 1.5 s. A call asleep (not runnable) has aged by its time in
    /run, as it has where the counters do not lag (None: a cgroup's pressure, the
    simulator's)."""
    starved, running = Starved(0.0, 1.0), Starved(0.0, 0.5)
    calls = [in_run(0, starved), in_run(1, running, since=0.5)]
    order = CpuOrder(Attained("las"), 1, At(1.0), lambda: calls)
    loop = VirtualTimeLoop()
    loop.run_until_complete(order.apply())  # at 1 s: the first has had the core
    order.clock, running.times = At(2.0), CpuTimes(1.5, 0.0)  # then the second had it
    starved.times = CpuTimes(1.0, 0.0, runnable=runnable)
    ages = [(r.age, r.share) for r in loop.run_until_complete(order.measure())]
    loop.run_until_complete(order.apply())
    loop.close()
    if runnable:
        assert ages == [(1.0, 1.0), (1.5, 1.0)]
        assert (starved.weights, running.weights) == ([MID, HIGH], [HIGH, MID])
    else:
        assert ages == [(2.0, 0.5), (1.5, 1.0)]
        assert (starved.weights, running.weights) == ([MID], [HIGH])


def test_a_call_starved_from_its_start_has_not_aged():
    """Starved from its start (runnable, no CPU yet): age 0, not its time in /run."""
    starved = Starved(0.0, 0.0)
    starved.times = CpuTimes(0.0, 0.0, runnable=True)
    calls = [in_run(0, starved)]
    order = CpuOrder(Attained("las"), 1, At(1.0), lambda: calls)
    loop = VirtualTimeLoop()
    (read,) = loop.run_until_complete(order.measure())
    loop.close()
    assert (read.age, read.share) == (0.0, 1.0)


def test_an_attained_order_on_every_core_is_warned_of_where_calls_outweigh_the_invoker():
    """On cores shared with the invoker a top-weight call beside it leaves it 1 % of a core
    (live on two shared cores each weight write took 12-13 ms): the operator is told to
    leave it one, unless the backend's weights rank calls among calls only."""
    assert shared_cores_warning((1,), [0, 1], False) is None  # the default: the first core left
    said = shared_cores_warning((0, 1), [0, 1], False)
    assert said is not None and "--action-cores" in said
    assert shared_cores_warning((0, 1), [0, 1], True) is None  # the process backend's calls group


def test_a_new_call_would_run_only_while_fewer_than_the_cores_rank_above_it():
    """``would_run``: whether a new call would be in the top tier now (else the invoker
    makes no container for it yet, invoker.service ``_defer_creation``)."""

    def running(function: str, i: int) -> Call:
        call = in_run(i, Kept(), since=5.0)
        call.function = function
        return call

    calls: list[Call] = []
    order = CpuOrder(Attained("gittins"), 1, At(5.0), lambda: calls)
    for _ in range(10):
        order.finished("short", 0.1)
        order.finished("long", 10.0)
    assert order.would_run("long") and order.would_run("short")  # nothing runs
    calls.append(running("long", 0))  # ranked below a new short call, level with a new long
    assert order.would_run("short") and not order.would_run("long")
    two = CpuOrder(Attained("gittins"), 2, At(5.0), lambda: calls, history=order.history)
    assert two.would_run("long")  # a second core is free for it
    assert CpuOrder(Attained("las"), 1, At(5.0), lambda: calls).would_run("long")
    calls[0].payload.in_run = None  # its container is still being made: it counts too
    assert not order.would_run("long") and order.would_run("short")
