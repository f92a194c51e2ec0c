"""Preemption in the node scheduler (pure logic, time passed in).

A running call alone on its core is paused for the head of the queue when the head's E[p]
is at most ``ratio`` of the running call's expected remaining time, by more than the pause
cost; paused calls resume first (least remaining first), a call is paused at most
``max_pauses`` times and at most ``max_paused`` calls are paused at once.
"""

from __future__ import annotations

import json

import pytest

from invoker.scheduler import NodeScheduler, OverdueStart, PauseThenStart, Preemption, Start
from policies import OPENWHISK, SEPT


def trained(preemption: Preemption | None = Preemption(), cores=(0,)) -> NodeScheduler[str]:
    """A SEPT scheduler that knows ``long`` takes 10 s and ``short`` 0.1 s."""
    sched: NodeScheduler[str] = NodeScheduler(SEPT, cores=list(cores), preemption=preemption)
    for fn, p in (("long", 10.0), ("short", 0.1)):
        sched.admit(fn, "warm-up", 0.0)
        sched.finish(sched.start(0.0), p, cpu_s=p)
    return sched


def test_a_short_call_pauses_a_long_one_and_the_long_one_resumes_first():
    sched = trained(Preemption(max_pauses=2))
    long = sched.admit("long", "L", 1.0)
    assert sched.start(1.0) is long and long.core == 0
    short = sched.admit("short", "S", 2.0)
    assert sched.peek() is None
    assert sched.preemption_victim(2.0) is long
    plan = sched.plan(2.0)
    assert plan == PauseThenStart(short, 0, 1.0, victim=long)
    assert long.core == 0 and sched.paused == 0  # planning changes nothing
    assert sched.commit(plan, 2.0) is short and short.core == 0
    assert long.core is None and long.pauses == 1 and sched.paused == 1
    assert long.remaining(5.0) == pytest.approx(9.0)  # paused: its run time stands still
    sched.admit("short", "S2", 2.05)  # waits behind the paused call, not in front of it
    assert sched.resume(2.05) is None  # the core is taken
    sched.finish(short, 0.1, cpu_s=0.1)
    assert sched.peek() is None  # the core is free, but the paused call comes first
    assert sched.resume(2.1) is long and long.core == 0 and sched.paused == 0
    assert long.remaining(3.1) == pytest.approx(8.0)
    assert sched.preemption_victim(3.1) is long  # S2 is short enough: a second pause
    s2 = sched.commit(sched.plan(3.1), 3.1)
    assert s2.core == 0 and long.pauses == 2
    sched.finish(s2, 0.1, cpu_s=0.1)
    assert sched.resume(3.2) is long
    assert sched.preemption_victim(3.3) is None  # nothing waits
    sched.admit("short", "S3", 3.3)
    assert sched.preemption_victim(3.3) is None  # paused twice (max_pauses): it finishes
    sched.finish(long, 9.0, cpu_s=9.0)
    assert sched.running == 0 and sched.cores_table.calls[0] == 0


def test_no_preemption_when_the_saving_is_small_or_the_rule_is_off():
    sched = trained()
    long = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("long", "L2", 1.5)
    assert sched.preemption_victim(1.5) is None  # 10 s is not much shorter than 9.5 s
    sched.finish(long, 10.0, cpu_s=10.0)
    sched.start(11.0)
    sched.admit("short", "S", 20.9)  # L2 has 0.1 s left: nothing to gain
    assert sched.preemption_victim(20.9) is None
    off = trained(preemption=None)
    off.admit("long", "L", 1.0)
    off.start(1.0)
    off.admit("short", "S", 2.0)
    assert off.preemption_victim(2.0) is None
    shared = NodeScheduler(OPENWHISK, cores=[0], preemption=Preemption())
    assert shared.preemption is None  # the baseline has no exclusive cores to give


@pytest.mark.parametrize(
    "head_s,paused",
    [(6.0, False), (9.0, False), (5.0, True), (4.0, True)],
)
def test_the_head_must_need_at_most_half_the_remaining_time(head_s, paused):
    """The band between 0.5 R and R: a head that is shorter than the running call's
    remaining time R = 10 s, but not by half, does not pause it; at 0.5 R it does."""
    sched = trained()
    sched.admit("head", "warm-up", 0.0)
    sched.finish(sched.start(0.0), head_s, cpu_s=head_s)
    long = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("head", "H", 1.0)
    assert long.remaining(1.0) == pytest.approx(10.0)
    assert (sched.preemption_victim(1.0) is long) is paused


def test_the_pause_cost_is_part_of_the_decision_and_follows_measurements():
    sched = trained(Preemption(pause_cost_s=0.5, ratio=0.9))
    sched.admit("long", "L", 1.0)
    long = sched.start(1.0)
    sched.admit("short", "S", 10.5)  # 0.1 s beside 0.5 s left: saves 0.4 s < 0.5 s
    assert sched.preemption_victim(10.5) is None
    for _ in range(20):
        sched.observe_pause(0.001)
    assert sched.pause_cost_s < 0.01
    assert sched.preemption_victim(10.5) is long


def test_bounds_on_paused_calls_and_the_callers_say():
    sched = trained(Preemption(max_paused=1), cores=(0, 1))
    a, b = sched.admit("long", "A", 1.0), sched.admit("long", "B", 1.0)
    sched.start(1.0), sched.start(1.0)
    sched.admit("short", "S", 2.0)
    assert sched.preemption_victim(2.0, pausable=lambda call: False) is None
    victim = sched.preemption_victim(2.0, pausable=lambda call: call is b)
    assert victim is b
    plan = sched.plan(2.0, pausable=lambda call: call is b)
    assert isinstance(plan, PauseThenStart) and plan.victim is b
    sched.commit(plan, 2.0)
    sched.admit("short", "S2", 2.01)
    assert sched.preemption_victim(2.01) is None  # one paused already (max_paused=1)
    with pytest.raises(RuntimeError):
        sched.pause(b, 2.02)  # paused calls hold no core
    assert a.core is not None


def test_a_paused_call_that_ends_at_shutdown_leaves_no_trace():
    sched = trained()
    long = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("short", "S", 2.0)
    sched.pause(long, 2.0)
    sched.finish(long, None)  # handed back while paused
    assert sched.paused == 0 and sched.running == 0
    assert sched.start(2.0).payload == "S"


_RATIO = "preemption: 0 < ratio < 1 and pause_cost_s >= 0"
_COUNTS = "preemption: max_paused and max_pauses must be >= 1"
_SLICES = "preemption: tail >= 0, quantum_s >= 0 and growth >= 1"
_SHARING = "preemption: share_cores >= 1 and overdue >= 0"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"ratio": 0.0}, _RATIO),
        ({"ratio": 1.0}, _RATIO),
        ({"ratio": 1.5}, _RATIO),
        ({"pause_cost_s": -0.001}, _RATIO),
        ({"max_paused": 0}, _COUNTS),
        ({"max_pauses": 0}, _COUNTS),
        ({"tail": -0.1}, _SLICES),
        ({"quantum_s": -0.1}, _SLICES),
        ({"growth": 0.99}, _SLICES),
        ({"share_cores": 0}, _SHARING),
        ({"overdue": -0.1}, _SHARING),
    ],
)
def test_preemption_rule_is_validated(bad, message):
    with pytest.raises(ValueError) as e:
        Preemption(**bad)
    assert str(e.value) == message


def test_the_edges_of_each_bound_are_accepted():
    Preemption(ratio=0.001, pause_cost_s=0.0, max_paused=1, max_pauses=1)
    Preemption(ratio=0.999, tail=0.0, quantum_s=0.0, growth=1.0, share_cores=1, overdue=0.0)


def test_remaining_time_expected_or_tail_aware():
    expected = Preemption()
    assert expected.remaining(5.0, 1.0) == 4.0
    assert expected.remaining(1.0, 3.0) == 0.0  # outran its estimate: expected to end now
    tail = Preemption(tail=2.0)
    assert tail.remaining(1.0, 3.0) == 6.0  # ran long: likely a long one
    assert tail.remaining(10.0, 1.0) == 9.0


def test_time_slices_grow_by_the_factor_with_each_pause():
    rule = Preemption(quantum_s=0.125, growth=2.0)
    assert not rule.sliced(0, 0.0625) and rule.sliced(0, 0.125)
    assert not rule.sliced(3, 0.875) and rule.sliced(3, 1.0)  # 0.125 * 2**3


def test_the_time_saved_must_exceed_the_pause_cost():
    rule = Preemption()
    assert rule.outweighs(1.0, 3.0, pause_cost_s=1.5)
    assert not rule.outweighs(1.0, 3.0, pause_cost_s=2.0)  # saves exactly the cost


def test_a_pause_planned_for_a_head_that_cannot_start_changes_nothing():
    sched = trained()
    long = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    short = sched.admit("short", "S", 2.0)
    plan = sched.plan(2.0)
    assert isinstance(plan, PauseThenStart) and plan.victim is long and plan.call is short
    # e.g. no memory for the short call's container: the plan is dropped, nothing to undo
    assert long.core == 0 and long.pauses == 0 and sched.paused == 0 and sched.preempted == 0
    assert long.remaining(3.0) == pytest.approx(8.0)  # it kept running all along
    assert sched.plan(2.0) == plan and short.waiting and sched.queued == 1
    sched.finish(long, 9.0, cpu_s=9.0)
    start = sched.plan(2.5)
    assert type(start) is Start and start.call is short and sched.commit(start, 2.5) is short
    with pytest.raises(RuntimeError) as err:  # a plan is for once, right after it is made
        sched.commit(start, 2.6)
    assert str(err.value) == "commit() of a call that is not waiting: a stale plan"


def test_simulate_with_preempt_runs_the_same_code_and_shows_the_gain(capsys):
    """`ow-invoker simulate --workload sebs --policy sept [--preempt] --json`: the service's
    scheduler on a virtual clock (deterministic), paused calls included."""
    from ow_invoker.cli import main

    out = {}
    for extra in ([], ["--preempt"]):
        assert main(["simulate", "--workload", "sebs", "--policy", "sept", "--json", *extra]) == 0
        out[bool(extra)] = json.loads(capsys.readouterr().out)
    plain, preemptive = out[False], out[True]
    assert plain["preempt"] is False and plain["preemptions"] == 0
    assert preemptive["preempt"] is True and preemptive["preemptions"] > 0
    assert preemptive["calls"] == plain["calls"]  # every call answered, paused ones too
    assert preemptive["mean_response_s"] < plain["mean_response_s"]
    assert preemptive["mean_stretch"] < plain["mean_stretch"]


def test_enough_pauses_per_call_to_gain_at_high_load():
    """At I = 120 (the paper's generator, 4 cores, seeds 1-3, deterministic) preemptive SEPT
    answers at most 0.93x SEPT's mean: the pause bound per call is what limited the gain (4
    pauses gave 0.96x, 16 give 0.91x over 10 seeds; benchmarks/bench_preemption.py)."""
    from invoker.simulate import SimulationSettings, simulate
    from invoker.workloads import SEBS_CPU_SHARE, uniform_workload

    ratios = []
    for seed in (1, 2, 3):
        trace = uniform_workload(120.0, 4, seed, 60.0, cpu_share=SEBS_CPU_SHARE)
        runs = [
            simulate(trace, "sept", SimulationSettings(cores=4, preempt=p, pause_s=0.01))
            for p in (True, False)
        ]
        ratios.append(runs[0]["mean_response_s"] / runs[1]["mean_response_s"])
    assert sum(ratios) / len(ratios) <= 0.93, ratios


def test_the_flag_reaches_the_invoker_and_the_experiment_runner():
    import argparse

    from invoker import config
    from sebs_wrappers.labels import split_policy

    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    assert config.load(parser.parse_args(["--preempt"]), {}).preempt is True
    assert config.load(parser.parse_args([]), {}).preempt is False
    assert config.load(parser.parse_args([]), {"OW_INVOKER_PREEMPT": "true"}).preempt is True
    assert split_policy("sept+preempt") == ("sept", True)
    assert split_policy("fc") == ("fc", False)
    from sebs_wrappers import experiment

    parser = argparse.ArgumentParser()
    experiment.add_arguments(parser)
    cfg = experiment.config_from_args(parser.parse_args(["--policies", "sept", "fc", "--preempt"]))
    assert cfg.policies == ["sept+preempt", "fc+preempt"]


def test_paused_time_starts_when_the_container_is_frozen():
    """A pause takes a while (``docker pause``: tens of ms) and the call runs on meanwhile:
    that time is run time (it feeds E[p]) and counts against the time limit; the paused
    time runs from the freeze until the resume has finished."""
    import asyncio

    from invoker.activation import Pausable
    from whisk.clock import LoopClock, VirtualTimeLoop

    class SlowToFreeze:
        async def pause(self) -> None:
            await asyncio.sleep(0.2)

        async def resume(self) -> None:
            await asyncio.sleep(0.1)

    async def scenario() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(10.0) as limit:
            start = loop.time()
            pausable = Pausable(SlowToFreeze(), limit, LoopClock(loop))  # type: ignore[arg-type]
            await asyncio.sleep(1.0)  # 1 s of run, then a pause asked for
            took = await pausable.pause()  # frozen 0.2 s later: 1.2 s of run so far
            await asyncio.sleep(2.0)
            await pausable.resume()  # running again 0.1 s later
            left = limit.when() - loop.time()  # type: ignore[operator]
            await pausable.end()
            return took, pausable.paused_s, left + (loop.time() - start) - pausable.paused_s

    loop = VirtualTimeLoop()
    try:
        took, paused_s, limit_s = loop.run_until_complete(scenario())
    finally:
        loop.close()
    assert took == pytest.approx(0.2)
    assert paused_s == pytest.approx(2.1)  # frozen 2.0 s, plus the 0.1 s resume
    assert limit_s == pytest.approx(10.0)  # run time + what is left = the whole limit


def test_paused_time_does_not_count_against_the_time_limit():
    """A 1.5 s limit, 1 s of run, 2 s paused, 0.4 s more: the call ends within its limit
    (1.4 s of run), although 3.4 s of wall time passed. Had the timer kept running while
    the call was frozen, it would have fired during the pause."""
    import asyncio

    from invoker.activation import Pausable
    from whisk.clock import LoopClock, VirtualTimeLoop

    class Frozen:
        async def pause(self) -> None:
            pass

        async def resume(self) -> None:
            pass

    async def scenario() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        async with asyncio.timeout(1.5) as limit:
            pausable = Pausable(Frozen(), limit, LoopClock(loop))  # type: ignore[arg-type]
            await asyncio.sleep(1.0)
            await pausable.pause()
            await asyncio.sleep(2.0)
            await pausable.resume()
            left = limit.when() - loop.time()  # type: ignore[operator]
            await asyncio.sleep(0.4)
            await pausable.end()
        return loop.time() - start, left

    loop = VirtualTimeLoop()
    try:
        wall_s, left_s = loop.run_until_complete(scenario())
    finally:
        loop.close()
    assert wall_s == pytest.approx(3.4)
    assert left_s == pytest.approx(0.5)  # what was left of the limit when it was paused


# -- long calls sharing a core instead of being paused (share_cores > 1) --


def test_a_long_call_moves_onto_another_long_calls_core_for_a_short_one():
    sched = trained(Preemption(share_cores=2), cores=(0, 1))
    a = sched.admit("long", "A", 1.0)
    b = sched.admit("long", "B", 1.5)
    assert sched.start(1.0) is a and sched.start(1.5) is b and (a.core, b.core) == (0, 1)
    sched.admit("short", "S", 2.0)
    assert sched.peek() is None
    assert sched.sharing_move(2.0) == (b, 0)  # B, started last, has the longer left
    assert sched.move(b, 0) == 1 and sched.moved == 1
    assert sched.cores_table.calls[0] == 2 and sched.cores_table.load[0] == pytest.approx(2.0)
    short = sched.start(2.0)
    assert short.core == 1 and sched.paused == 0  # the head runs alone; nothing is frozen
    assert sched.spread_move(2.05) is None  # no idle core
    sched.finish(short, 0.1, cpu_s=0.1)
    # The shared core spreads onto the idle one: A, expected to finish first, moves.
    assert sched.spread_move(2.1) == (a, 1)
    call, core = a, 1
    sched.move(call, core)
    assert sched.cores_table.calls[0] == sched.cores_table.calls[1] == 1
    assert sched.spread_move(2.2) is None


def test_sharing_takes_only_long_calls_alone_on_their_cores_and_is_bounded():
    sched = trained(Preemption(share_cores=2), cores=(0, 1, 2))
    calls = [sched.admit("long", f"L{i}", 1.0 + i) for i in range(3)]
    for call in calls:
        sched.start(call.received)
    sched.admit("short", "S", 5.0)
    victim, host = sched.sharing_move(5.0)
    sched.move(victim, host)
    sched.start(5.0)
    sched.admit("short", "S2", 5.01)
    # The third long call could only join the core that already holds two (share_cores=2),
    # and the shared core is no victim's (two calls): the rule falls back to a pause.
    assert sched.sharing_move(5.01) is None
    assert sched.preemption_victim(5.01) is not None
    assert sched.sharing_move(5.01, pausable=lambda call: False) is None


def test_no_sharing_for_a_head_not_much_shorter_or_with_the_rule_off():
    sched = trained(Preemption(share_cores=4), cores=(0, 1))
    for i in range(2):
        sched.admit("long", f"L{i}", 1.0)
        sched.start(1.0)
    sched.admit("long", "L2", 1.5)  # 10 s is not much shorter than what they have left
    assert sched.sharing_move(1.5) is None
    off = trained(Preemption(), cores=(0, 1))  # share_cores=1: pause only
    for i in range(2):
        off.admit("long", f"L{i}", 1.0)
        off.start(1.0)
    off.admit("short", "S", 2.0)
    assert off.sharing_move(2.0) is None and off.spread_move(2.0) is None


def test_a_shared_calls_estimate_leaves_out_its_wait_for_the_core():
    sched = trained(Preemption(share_cores=2), cores=(0, 1))
    sched.admit("long", "A", 1.0)
    sched.admit("long", "B", 1.0)
    a, b = sched.start(1.0), sched.start(1.0)
    sched.admit("short", "S", 2.0)
    sched.move(*sched.sharing_move(2.0))
    sched.finish(sched.start(2.0), 0.1, cpu_s=0.1)
    sched.finish(a, 15.0, cpu_s=10.0, waited_s=5.0)  # ran 10 s of CPU, waited 5 s for it
    sched.finish(b, 10.0, cpu_s=10.0)
    assert sched.stats.expected("long") == pytest.approx(10.0)


def test_move_of_a_call_without_a_core_is_refused():
    sched = trained(Preemption(share_cores=2), cores=(0, 1))
    waiting = sched.admit("long", "L", 1.0)
    with pytest.raises(RuntimeError):
        sched.move(waiting, 1)


# -- overdue calls starting on a core shared with longer calls (Preemption.overdue) --


def overdue_node(overdue: float = 0.25) -> NodeScheduler[str]:
    """Two cores, each held by a 30 s call since t=1; ``mid`` (20 s) is known."""
    sched: NodeScheduler[str] = NodeScheduler(
        SEPT, cores=[0, 1], preemption=Preemption(share_cores=2, overdue=overdue)
    )
    for fn, p in (("huge", 30.0), ("mid", 20.0), ("short", 0.1)):
        sched.admit(fn, "warm-up", 0.0)
        sched.finish(sched.start(0.0), p, cpu_s=p)
    for name in ("H0", "H1"):
        sched.admit("huge", name, 1.0)
        sched.start(1.0)
    return sched


def test_an_overdue_call_starts_on_a_core_it_shares_with_longer_calls():
    sched = overdue_node()
    mid = sched.admit("mid", "M", 2.0)  # 20 s is not much shorter than 29 s: no move, no pause
    assert sched.sharing_move(2.0) is None and sched.preemption_victim(2.0) is None
    assert sched.next_overdue() == pytest.approx(7.0)  # 2 + 0.25 * 20
    assert sched.plan(6.9) is None and sched.peek() is None
    plan = sched.plan(7.0)
    assert plan == OverdueStart(mid, 0, 1.0) and sched.peek() is None
    started = sched.commit(plan, 7.0)
    assert started is mid and mid.core == 0 and mid.shared_core
    assert sched.cores_table.calls[0] == 2 and sched.queued == 0 and sched.overdue_starts == 1
    assert sched.next_overdue() is None


def test_an_overdue_call_never_slows_a_call_expected_to_end_sooner():
    sched = overdue_node()
    sched.admit("mid", "M", 2.0)
    # At 12 s the 30 s calls have 19 s left, less than M's 20 s: no core to share.
    assert sched.plan(12.0) is None
    assert sched.plan(7.0, pausable=lambda call: False) is None  # the caller's say
    sched.admit("mid", "M2", 2.5)
    assert sched.commit(sched.plan(7.0), 7.0).core == 0
    # Core 0 holds two (share_cores=2): only core 1 is left, then none.
    assert sched.commit(sched.plan(7.7), 7.7).core == 1
    sched.admit("mid", "M3", 3.0)
    assert sched.plan(8.5) is None


def test_an_overdue_start_the_node_cannot_make_changes_nothing():
    sched = overdue_node()
    mid = sched.admit("mid", "M", 2.0)
    plan = sched.plan(7.0)
    assert isinstance(plan, OverdueStart) and plan.call is mid
    assert sched.peek() is None and sched.queued == 1 and mid.waiting and mid.share == 1.0
    assert sched.plan(7.0) == plan and sched.overdue_starts == 0


def test_overdue_is_off_by_default_and_its_heap_stays_bounded():
    plain = trained(Preemption(share_cores=2), cores=(0, 1))
    plain.admit("long", "L", 1.0)
    assert plain.next_overdue() is None and type(plain.plan(1e9)) is Start
    with pytest.raises(ValueError):
        Preemption(share_cores=2, overdue=-1.0)
    sched = trained(Preemption(share_cores=2, overdue=1.0), cores=(0, 1))
    for i in range(1000):  # each starts at once: its overdue entry goes stale
        sched.admit("short", f"S{i}", 1.0 + i)
        sched.finish(sched.start(1.0 + i), 0.1, cpu_s=0.1)
    assert len(sched._overdue) <= 64
