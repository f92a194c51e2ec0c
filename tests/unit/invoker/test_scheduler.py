"""What the node scheduler (invoker/scheduler/) decides and counts, exactly, where the
behavioural tests (the scheduler's below, test_preemption.py, test_nodeview.py) only see
the outcome: each refusal's words, the per-core counts of heavy calls, the bounds of the
misprediction guard and of the overdue heap, and the bookkeeping of pauses and moves (the
mutation run, tests/mutation/run.py, uses them).

Policy keys, the statistics they read, and the node scheduler's queue and cores.

Intra-container concurrency in the node scheduler (pure logic, no clock).

An action with ``limits.concurrency`` N > 1: the call that starts its container takes a
whole core; up to N - 1 more of its waiting calls join that container without a core of
their own, best (priority, order) first, and the core is free once the last one leaves."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import pytest

from invoker.scheduler import (
    Call,
    Cores,
    LateStart,
    MoveThenStart,
    NodeScheduler,
    OverdueStart,
    PauseThenStart,
    Preemption,
    Shared,
    Start,
)
from policies import EECT, FC, FIFO, OPENWHISK, RECT, SEPT, FunctionStats


def trained(
    preemption: Preemption | None = Preemption(),
    cores=(0,),
    known=(("long", 10.0), ("mid", 5.0), ("short", 0.1)),
) -> NodeScheduler[str]:
    """A SEPT scheduler that knows how long each function of ``known`` takes (by default
    ``long`` 10 s, ``mid`` 5 s and ``short`` 0.1 s), each using a whole core unless a third
    figure gives its CPU time; ``cores``: the core ids or a :class:`Cores`."""
    table = cores if isinstance(cores, Cores) else list(cores)
    sched: NodeScheduler[str] = NodeScheduler(SEPT, cores=table, preemption=preemption)
    for fn, p, *cpu in known:
        sched.admit(fn, "warm-up", 0.0)
        sched.finish(sched.start(0.0), p, cpu_s=cpu[0] if cpu else p)
    return sched


def overdue_node(cores) -> NodeScheduler[str]:
    """Overdue calls may share a core with up to two longer ones; ``huge`` takes 30 s,
    ``mid`` 20 s (overdue 5 s after it arrives) and ``short`` 0.1 s."""
    known = (("huge", 30.0), ("mid", 20.0), ("short", 0.1))
    return trained(Preemption(share_cores=3, overdue=0.25), cores, known)


def joins(sched: NodeScheduler[str]) -> Shared | None:
    """The running container the next call to start would join (None: it would start one
    of its own, or none can start)."""
    plan = sched.plan(0.0)
    return plan.joins if plan else None


def commit_plan(
    sched: NodeScheduler[str], now: float, pausable: Callable[[Call[str]], bool] = lambda c: True
) -> Call[str]:
    """Start what the scheduler plans at ``now``, a pause, move or overdue start included."""
    plan = sched.plan(now, pausable)
    assert plan is not None
    return sched.commit(plan, now)


def overdue(
    sched: NodeScheduler[str], now: float, pausable: Callable[[Call[str]], bool] = lambda c: True
) -> Call[str] | None:
    """The call the plan at ``now`` starts overdue beside longer calls (None: no such plan)."""
    plan = sched.plan(now, pausable)
    return plan.call if isinstance(plan, OverdueStart) else None


def overrunning(sched: NodeScheduler[str]) -> Call[str]:
    """A call expected to use half a core, started at 1.0 and sampled using a whole one."""
    sched.stats.finish("half", 10.0, cpu_s=5.0)
    call = sched.admit("half", "H", 1.0)
    sched.start(1.0)
    sched.observe(call, recent=1.0, overall=0.6)
    return call


def two_long_running(sched: NodeScheduler[str]) -> tuple[Call[str], Call[str]]:
    """Two ``long`` calls, A and B, received and started at 1.0 (on two cores)."""
    a = sched.admit("long", "A", 1.0)
    b = sched.admit("long", "B", 1.0)
    sched.start(1.0)
    sched.start(1.0)
    return a, b


@pytest.mark.parametrize(
    ("cores", "margin", "max_calls", "words"),
    [
        ((), 0.1, 8, "the node needs at least one action core"),
        ((0, 0), 0.1, 8, "action cores must be distinct"),
        ((0,), -0.1, 8, "margin must be >= 0 and max_calls >= 1"),
        ((0,), 0.1, 0, "margin must be >= 0 and max_calls >= 1"),
    ],
)
def test_a_bad_core_table_is_refused_in_words(cores, margin, max_calls, words) -> None:
    with pytest.raises(ValueError) as err:
        Cores(cores, margin, max_calls)
    assert str(err.value) == words


def test_heavy_calls_are_counted_per_core_and_light_ones_are_not() -> None:
    table = Cores([0], margin=0.1, max_calls=8)
    table.take(0, "f", 0.5)
    table.take(0, "g", 0.5)
    table.take(0, "w", 0.1)  # at the margin: light
    assert table.heavy[0] == 2 and table.calls[0] == 3
    table.give(0, "f", 0.5, None)
    assert table.heavy[0] == 1
    table.give(0, "w", 0.1, None)
    assert table.heavy[0] == 1 and table.functions[0] == {"g": 1}


def test_a_call_measured_at_exactly_its_share_plus_the_margin_fills_nothing() -> None:
    table = Cores([0], margin=0.1)
    for _ in range(3):
        table.take(0, "f", 0.3)
    table.give(0, "f", 0.3, used=0.4)  # within the margin: the estimate was right
    assert 0 not in table.full
    table.give(0, "f", 0.3, used=0.9)  # 0.6 too much, for the one call still there
    assert 0 not in table.full  # 0.3 + 0.6 fits within 1.1
    table.take(0, "f", 0.3)
    table.give(0, "f", 0.3, used=1.0)  # 0.7 too much each, for the one left: 1.0 > ...
    assert table.load[0] == pytest.approx(0.3)
    table.take(0, "f", 0.3)
    table.take(0, "f", 0.3)
    table.give(0, "f", 0.3, used=0.9)  # 0.6 each for two left: 0.6 + 1.2 > 1.1
    assert 0 in table.full and table.place(0.01) is None


def test_the_overdue_heap_keeps_the_entries_of_started_calls_until_it_grows() -> None:
    sched = trained(Preemption(share_cores=2, overdue=0.25), cores=(0, 1))
    calls = [sched.admit("short", f"S{i}", 1.0) for i in range(4)]
    sched.start(1.0)
    sched.start(1.0)
    sched.admit("short", "S4", 1.0)
    assert len(sched._overdue) == 3 + 5 and sched.queued == 3  # the warm-ups too: under 2 * 3 + 64
    assert calls[0].waiting is False


def test_a_call_paused_while_it_overran_leaves_its_core_clean() -> None:
    sched = trained(Preemption(), cores=(0,))
    call = overrunning(sched)
    assert call.overrun == pytest.approx(0.5)
    sched.pause(call, 2.0)
    table = sched.cores_table
    assert (table.load[0], table.overrun[0], call.overrun) == (0.0, 0.0, 0.0)
    assert sched.preempted == 1 and sched.paused == 1


def test_pauses_are_counted_one_by_one() -> None:
    sched = trained(Preemption(max_paused=2), cores=(0, 1))
    a, b = two_long_running(sched)
    sched.pause(a, 2.0)
    sched.pause(b, 2.0)
    assert sched.preempted == 2 and sched.paused == 2


def test_a_call_moved_while_it_overran_leaves_the_overrun_behind() -> None:
    sched = trained(Preemption(share_cores=2), cores=(0, 1))
    call = overrunning(sched)
    assert sched.move(call, 1) == 0 and call.overrun == 0.0
    table = sched.cores_table
    assert (table.load[0], table.overrun[0]) == (0.0, 0.0)
    assert table.load[1] == pytest.approx(0.5) and table.overrun[1] == 0.0


def test_the_refusals_of_move_and_resume_are_in_words() -> None:
    sched = trained(Preemption(share_cores=2), cores=(0,))
    waiting = sched.admit("long", "L", 1.0)
    with pytest.raises(RuntimeError) as err:
        sched.move(waiting, 0)
    assert str(err.value) == "move() of a call that does not hold a core"


def test_a_finished_call_holds_no_core_and_no_overrun() -> None:
    sched = trained(Preemption(), cores=(0,))
    call = overrunning(sched)
    sched.finish(call, 10.0, cpu_s=5.0)
    assert call.core is None and call.overrun == 0.0 and call.started is None


def test_the_share_measured_at_the_end_is_capped_at_a_core() -> None:
    table = Cores([0], margin=0.1)
    sched: NodeScheduler[str] = NodeScheduler(SEPT, table)
    sched.stats.finish("f", 10.0, cpu_s=3.0)  # expected 0.3 of a core
    calls = [sched.admit("f", f"F{i}", 1.0) for i in range(2)]
    for _ in calls:
        sched.start(1.0)
    shares = [call.share for call in calls]
    # Two threads' CPU in one second counts as one core: 0.7 more than expected, for the one
    # call left, fits beside it (uncapped, 1.7 more would fill the core).
    sched.finish(calls[0], 1.0, cpu_s=2.0)
    assert shares[1] + (1.0 - shares[0]) <= 1.1
    assert 0 not in table.full


def test_spread_takes_from_the_most_crowded_core() -> None:
    sched = trained(Preemption(share_cores=3), cores=(0, 1, 2, 3))
    calls = [sched.admit("long", f"L{i}", 1.0) for i in range(4)]
    for _ in calls:
        sched.start(1.0)
    a, b, c, d = calls
    sched.move(b, a.core)  # core 0: two calls
    sched.move(d, c.core)  # core 2: two calls
    sched.move(calls[0], c.core)  # core 2: three; core 0: one
    table = sched.cores_table
    assert [table.calls[k] for k in table.ids] == [1, 0, 3, 0]
    call, idle = sched.spread_move(2.0)
    assert call.core == 2 and idle == 1


def test_an_overdue_call_goes_to_the_core_with_the_fewest_longer_calls() -> None:
    sched = overdue_node(cores=(0, 1, 2))
    huge = [sched.admit("huge", f"H{i}", 1.0) for i in range(3)]
    for _ in huge:
        sched.start(1.0)
    sched.move(huge[1], huge[0].core)  # core 0: two huge calls; core 1 idle
    sched.admit("short", "S", 1.0)
    assert sched.start(1.0).core == 1  # a call shorter than ``mid``: no host
    mid = sched.admit("mid", "M", 1.0)
    assert overdue(sched, 7.0) is mid
    assert commit_plan(sched, 7.0).core == 2


def paused_long(resume_first: bool, pause_at: float) -> NodeScheduler[str]:
    """One core: ``long`` (10 s) started at 1.0, paused at ``pause_at`` for a short call
    that has since finished; ``mid`` (5 s) waits behind."""
    sched = trained(Preemption(resume_first=resume_first), cores=(0,))
    long = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("short", "S", pause_at)
    sched.finish(commit_plan(sched, pause_at), 0.1, cpu_s=0.1)
    assert long.paused_at == pause_at  # for the short call
    sched.admit("mid", "M", pause_at)
    return sched


def test_a_paused_call_resumes_before_a_shorter_head_only_when_the_rule_says_so() -> None:
    first = paused_long(resume_first=True, pause_at=2.0)  # 9 s left, mid needs 5
    assert first.peek() is None and first.resume(2.1).payload == "L"
    waits = paused_long(resume_first=False, pause_at=2.0)
    assert waits.peek().payload == "M" and waits.resume(2.1) is None
    equal = paused_long(resume_first=False, pause_at=6.0)  # 5 s left: as long as mid
    assert equal.peek() is None and equal.resume(6.1).payload == "L"


def test_the_paused_call_with_the_least_left_resumes_first() -> None:
    sched = trained(Preemption(max_paused=2), cores=(0, 1))
    a, b = two_long_running(sched)
    sched.pause(a, 2.0)  # 9 s left
    sched.pause(b, 8.0)  # 3 s left
    assert sched.resume(8.0) is b and sched.resume(8.0) is a


def test_a_call_resumed_recently_is_not_paused_before_its_time_slice() -> None:
    sched = trained(Preemption(quantum_s=2.0), cores=(0,))
    long = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("short", "S", 2.0)
    assert sched.preemption_victim(2.0) is None  # it has run 1 s of its 2 s slice
    assert sched.preemption_victim(3.0) is long


def test_calls_sharing_a_core_are_no_victims() -> None:
    sched = trained(Preemption(share_cores=2), cores=(0, 1))
    a, b = two_long_running(sched)
    sched.move(b, a.core)
    sched.admit("short", "S", 2.0)
    sched.start(2.0)
    sched.admit("short", "S2", 2.0)
    assert sched.peek() is None and sched.preemption_victim(2.0) is None


def test_a_call_sharing_its_core_is_passed_over_for_one_alone_met_after_it() -> None:
    sched = trained(Preemption(share_cores=2), cores=(0, 1, 2))
    a, b, c = (sched.admit("long", name, 1.0) for name in "ABC")
    for _ in range(3):
        sched.start(1.0)
    sched.move(b, a.core)  # core 0: A and B (met first), core 1 idle, core 2: C alone
    sched.admit("short", "S", 2.0)
    assert sched.start(2.0).core == 1
    sched.admit("short", "S2", 2.0)
    assert [call.payload for call in sched._on_core] == ["A", "B", "C", "S"]  # start order
    assert sched.peek() is None and sched.preemption_victim(2.0) is c


def test_finish_of_a_call_never_started_is_refused_in_words() -> None:
    sched = trained()
    call = sched.admit("long", "L", 1.0)
    with pytest.raises(RuntimeError) as err:
        sched.finish(call, 1.0)
    assert str(err.value) == "finish() of a call that was never started"


def test_the_time_a_call_waited_for_a_cpu_is_left_out_of_its_share() -> None:
    sched = trained()
    sched.admit("g", "G", 1.0)
    sched.finish(sched.start(1.0), 10.0, cpu_s=5.0, waited_s=5.0)
    assert sched.stats.share("g") == pytest.approx(1.0)
    assert sched.stats.expected("g") == pytest.approx(10.0)


def test_a_call_that_took_no_time_is_no_measurement_of_its_share() -> None:
    sched = trained()
    sched.admit("g", "G", 1.0)
    sched.finish(sched.start(1.0), 0.0, cpu_s=0.1)
    assert sched.cores_table.calls[0] == 0 and sched.stats.expected("g") == 0.0


def moved_beside_a_long_call() -> tuple[NodeScheduler[str], Call[str]]:
    """A call of ``g`` started at 1.0 on one core, then moved beside a ``long`` one."""
    sched = trained(Preemption(share_cores=2), cores=(0, 1))
    a = sched.admit("g", "A", 1.0)
    b = sched.admit("long", "B", 1.0)
    sched.start(1.0)
    sched.start(1.0)
    sched.move(a, b.core)
    return sched, a


def test_a_moved_calls_estimate_is_its_time_less_its_wait() -> None:
    sched, a = moved_beside_a_long_call()
    sched.finish(a, 3.0, cpu_s=0.5, waited_s=2.5)
    assert sched.stats.expected("g") == pytest.approx(0.5)
    assert sched.stats.share("g") == pytest.approx(1.0)  # 0.5 s of CPU in its 0.5 s


def test_the_other_refusals_are_in_words() -> None:
    sched = trained()
    with pytest.raises(ValueError) as err:
        sched.admit("f", "F", 1.0, group="g", limit=0)
    assert str(err.value) == "a call's concurrency limit must be >= 1"
    with pytest.raises(RuntimeError) as err:
        sched.start(1.0)
    assert str(err.value) == "no call can start: queue empty or no core has room"


def test_a_call_of_a_group_without_a_limit_runs_alone_and_calls_are_numbered_by_one() -> None:
    sched = trained()
    a = sched.admit("f", "A", 1.0, group="g")
    b = sched.admit("f", "B", 1.0)
    assert (a.group, a.limit) == (None, 1)
    assert b.seq == a.seq + 1


def test_a_call_at_exactly_the_margin_is_light_on_both_ways() -> None:
    table = Cores([0], margin=0.1)
    table.take(0, "h", 0.5)
    table.take(0, "h", 0.5)
    table.take(0, "h", 0.5)
    table.take(0, "w", table.light_limit)
    table.give(0, "w", table.light_limit, None)
    assert table.heavy[0] == 3
    table.give(0, "h", 0.5, None)
    assert table.heavy[0] == 2


def test_the_last_call_of_a_function_to_leave_a_core_fills_nothing() -> None:
    table = Cores([0], margin=0.1)
    table.take(0, "f", 0.3)
    table.take(0, "g", 0.3)
    table.give(0, "f", 0.3, used=2.0)  # no other call of f is left to overrun as much
    assert 0 not in table.full


def test_a_closed_container_and_one_its_last_call_left_are_closed() -> None:
    sched = trained()
    first = sched.admit("c", "A", 1.0, group="g", limit=2)
    sched.start(1.0)
    shared = first.shared
    sched.close(shared)
    assert shared.closed is True and joins(sched) is None
    second = sched.admit("c", "B", 1.0, group="g2", limit=2)
    sched.finish(first, 1.0)
    sched.start(1.0)
    other = second.shared
    sched.finish(second, 1.0)
    assert other.closed is True and other.calls == 0


def test_overdue_starts_are_counted_one_by_one() -> None:
    sched = overdue_node(cores=(0, 1))
    for name in ("H0", "H1"):
        sched.admit("huge", name, 1.0)
        sched.start(1.0)
    for name in ("M0", "M1"):
        sched.admit("mid", name, 1.0)
    for _ in range(2):
        assert overdue(sched, 7.0) is not None
        commit_plan(sched, 7.0)
    assert sched.overdue_starts == 2 and sched.queued == 0


def test_the_bounds_of_light_and_of_sampling_a_call() -> None:
    table = Cores([0], margin=0.1)
    assert table.light(0.1) and not table.light(0.1001)
    assert table.light(table.light_limit) and not table.light(0.1 + 2e-9)
    assert table.may_overrun(0.89) and not table.may_overrun(0.9)


def test_the_pause_cost_follows_measurements_by_a_fifth() -> None:
    sched = trained()
    before = sched.pause_cost_s
    sched.observe_pause(1.0)
    assert sched.pause_cost_s == pytest.approx(0.8 * before + 0.2)
    sched.observe_pause(-1.0)  # a clock step back counts as free
    assert sched.pause_cost_s == pytest.approx(0.8 * (0.8 * before + 0.2))


def test_a_call_that_ran_past_its_estimate_has_nothing_left() -> None:
    sched = trained(Preemption(), cores=(0,))
    call = sched.admit("short", "S", 1.0)
    sched.start(1.0)
    assert call.remaining(1.05) == pytest.approx(0.05)
    assert call.remaining(5.0) == 0.0


# -- the core table's bounds, each at its edge --


def test_a_core_table_may_have_no_margin_and_take_one_call_per_core() -> None:
    table = Cores([0], margin=0.0, max_calls=1)
    assert (table.margin, table.max_calls) == (0.0, 1)


def test_a_call_that_fills_a_core_to_exactly_its_capacity_fits() -> None:
    table = Cores([0], margin=0.0)
    assert table.place(1.0 + 1e-9) == 0  # the capacity 1 + margin, with its float slack


def test_a_light_call_that_must_go_beside_a_heavy_one_skips_the_cores_without() -> None:
    table = Cores([0, 1])
    table.take(0, "w", 0.05)  # light only
    table.take(1, "h", 0.5)
    assert table.place(0.05, beside_heavy=True) == 1


def test_a_sample_at_exactly_the_share_plus_the_margin_is_no_overrun() -> None:
    table = Cores([0], margin=0.25)
    table.take(0, "f", 0.5)
    assert table.observe(0, 0.5, 0.0, 0.75) == 0.0
    assert table.observe(0, 0.5, 0.0, 0.8) == pytest.approx(0.3)


def test_a_sample_of_a_call_on_an_empty_core_loads_nothing() -> None:
    table = Cores([0])
    assert table.observe(0, 0.5, 0.0, 1.0) == 0.5
    assert (table.load[0], table.overrun[0]) == (0.0, 0.0)


def test_a_call_measured_within_the_margin_either_way_fills_nothing() -> None:
    table = Cores([0], margin=0.25)
    for _ in range(5):
        table.take(0, "f", 0.25)
    table.give(0, "f", 0.25, used=0.5)  # exactly the share plus the margin
    assert 0 not in table.full
    table.give(0, "f", 0.25, used=0.1)  # below the share
    assert 0 not in table.full


def test_a_core_whose_calls_are_assumed_to_overrun_to_exactly_its_capacity_is_not_full() -> None:
    table = Cores([0], margin=0.0)
    table.take(0, "f", 0.5)
    table.take(0, "f", 0.5)
    table.give(0, "f", 0.5, used=1.0 + 1e-9)  # 0.5 left + 0.5 + 1e-9 more: the capacity
    assert 0 not in table.full
    table.take(0, "f", 0.5)
    table.give(0, "f", 0.5, used=1.0 + 2e-9)
    assert 0 in table.full


# -- the node scheduler --


def test_a_new_node_numbers_calls_from_one_and_without_preemption_pauses_cost_nothing() -> None:
    sched: NodeScheduler[str] = NodeScheduler(SEPT, [0])
    assert sched.pause_cost_s == 0.0
    assert sched.admit("f", "F", 1.0).seq == 1


def test_a_call_whose_share_is_exactly_the_light_limit_passes_a_blocked_head() -> None:
    sched = trained(Preemption(), cores=(0,))
    table = sched.cores_table
    sched.stats.finish("w", 128.0, cpu_s=table.light_limit * 128)  # longer than ``long``
    assert sched.stats.share("w") == table.light_limit
    sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("long", "L2", 1.0)  # the head: no room beside L
    sched.admit("w", "W", 1.0)
    assert sched.peek().payload == "W" and sched.start(1.0).core == 0


def test_the_overdue_heap_is_compacted_just_past_twice_the_queue_plus_64() -> None:
    sched = trained(Preemption(share_cores=2, overdue=0.25), cores=(0,))  # 3 stale entries
    for i in range(64):
        sched.admit("short", f"S{i}", 1.0)
    for _ in range(63):
        sched.finish(sched.start(1.0), 0.1, cpu_s=0.1)
    sched.admit("short", "A", 1.0)  # 66 stale entries and 2 waiting: 2 * 2 + 64
    assert len(sched._overdue) == 68 and sched.queued == 2
    sched.finish(sched.start(1.0), 0.1, cpu_s=0.1)
    sched.admit("short", "B", 1.0)  # 69: only the two waiting are kept
    assert len(sched._overdue) == 2 and sched.queued == 2


def test_a_call_under_the_shared_baseline_counts_as_a_whole_core() -> None:
    sched: NodeScheduler[str] = NodeScheduler(OPENWHISK, [0])
    sched.stats.finish("w", 10.0, cpu_s=1.0)
    sched.admit("w", "W", 1.0)
    call = sched.start(1.0)
    assert (call.core, call.share) == (None, 1.0)


def test_a_container_of_concurrent_calls_holds_a_whole_core_its_calls_none() -> None:
    sched = trained()
    sched.stats.finish("c", 10.0, cpu_s=3.0)  # 0.3 of a core per call
    first = sched.admit("c", "A", 1.0, group="g", limit=2)
    sched.start(1.0)
    second = sched.admit("c", "B", 1.0, group="g", limit=2)
    sched.start(1.0)
    assert sched.cores_table.load[0] == 1.0 and first.shared.share == 1.0
    assert (first.share, second.share, second.shared) == (0.0, 0.0, first.shared)
    sched.finish(second, 4.0)
    assert (second.shared, second.core) == (None, None)
    assert sched.stats.expected("c") == 7.0  # (10 + 4) / 2: taken in, its CPU time not


def test_closing_a_full_container_whose_group_has_nothing_waiting_is_a_no_op() -> None:
    sched = trained()
    first = sched.admit("c", "A", 1.0, group="g", limit=2)
    sched.start(1.0)
    sched.admit("c", "B", 1.0, group="g", limit=2)
    sched.start(1.0)  # full: the group is forgotten
    sched.close(first.shared)
    assert first.shared.closed is True and sched.queued == 0


def test_a_container_that_still_had_room_is_not_offered_twice() -> None:
    sched = trained()
    calls = []
    for name in "ABCDE":
        calls.append(sched.admit("c", name, 1.0, group="g", limit=3))
        if name == "B":
            sched.start(1.0)
            sched.start(1.0)  # B joins A's container: 2 of 3
            sched.finish(calls[0], 1.0)  # 1 of 3: it had room already
    shared = calls[1].shared
    assert sched.start(1.0).shared is shared  # C
    assert sched.start(1.0).shared is shared  # D: full
    assert joins(sched) is None  # E needs a container of its own


def test_two_overdue_starts_behind_a_blocked_head_leave_it_the_only_one_queued() -> None:
    sched = overdue_node(cores=(0, 1))
    for name in ("H0", "H1"):
        sched.admit("huge", name, 1.0)
        sched.start(1.0)
    sched.admit("mid", "M0", 1.0)
    sched.admit("mid", "M1", 1.0)
    sched.admit("short", "S", 7.0)  # the head, with no core (overdue at 7.025)
    # plan() would move an H for S first: the overdue step's own plans, as if it could not
    for name, core in (("M0", 0), ("M1", 1)):
        plan = sched._overdue_plan(7.0, lambda c: True)
        assert plan.call.payload == name and sched.commit(plan, 7.0).core == core
    assert sched.queued == 1 and sched.peek() is None


def test_an_overdue_call_takes_its_own_share_onto_the_core() -> None:
    known = (("huge", 30.0), ("mid", 20.0, 10.0))  # mid: half a core
    sched = trained(Preemption(share_cores=3, overdue=0.25), (0,), known)
    sched.admit("huge", "H", 1.0)
    sched.start(1.0)
    call = sched.admit("mid", "M", 1.0)
    assert overdue(sched, 7.0) is call and sched.plan(7.0).share == 0.5
    assert commit_plan(sched, 7.0).share == 0.5
    assert sched.cores_table.load[0] == 1.5


# -- preemption: the victim --


def two_long_and_a_short_head(resume_a: bool = False) -> tuple[NodeScheduler[str], Call[str]]:
    """Cores 0 and 1 hold ``long`` calls A and B (A admitted first), both started at 1.0;
    ``resume_a``: A paused and resumed at 2.0 (so met after B, its time run the same);
    ``short`` waits with no core."""
    sched = trained(Preemption(), cores=(0, 1))
    a, _ = two_long_running(sched)
    if resume_a:
        sched.pause(a, 2.0)
        assert sched.resume(2.0) is a
    sched.admit("short", "S", 2.0)
    return sched, a


def test_a_tie_between_victims_goes_to_the_one_admitted_first_in_either_order() -> None:
    sched, a = two_long_and_a_short_head()
    assert sched.preemption_victim(3.0) is a
    sched, a = two_long_and_a_short_head(resume_a=True)
    assert [c.payload for c in sched._on_core] == ["B", "A"]
    assert sched.preemption_victim(3.0) is a


def test_a_call_admitted_first_but_with_less_left_is_no_victim_before_one_with_more() -> None:
    sched = trained(Preemption(), cores=(0, 1))
    sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("mid", "M", 1.0, order=0)  # numbered before L, started after it
    sched.start(1.0)
    sched.admit("short", "S", 2.0)
    assert sched.preemption_victim(2.0).payload == "L"


def test_a_call_past_its_estimate_is_no_victim() -> None:
    sched = trained(Preemption(), cores=(0,))
    sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("short", "S", 20.0)
    assert sched.preemption_victim(20.0) is None


def test_pause_and_move_of_a_call_in_a_shared_container_are_refused_in_words() -> None:
    sched = trained(Preemption(share_cores=2), cores=(0, 1))
    call = sched.admit("c", "C", 1.0, group="g", limit=2)
    sched.start(1.0)
    assert call.core == 0
    with pytest.raises(RuntimeError) as err:
        sched.pause(call, 2.0)
    assert str(err.value) == "pause() of a call that does not hold a core alone"
    with pytest.raises(RuntimeError) as err:
        sched.move(call, 1)
    assert str(err.value) == "move() of a call that does not hold a core"


def test_the_time_a_call_ran_adds_up_over_its_pauses() -> None:
    sched = trained(Preemption(), cores=(0,))
    call = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.pause(call, 2.0)
    assert sched.resume(3.0) is call
    sched.pause(call, 5.0)
    assert call.ran_s == 3.0 and call.ran(9.0) == 3.0


def test_a_pause_planned_but_not_made_leaves_an_earlier_paused_call_to_resume_first() -> None:
    sched = trained(Preemption(max_paused=2), cores=(0, 1))
    a, b = two_long_running(sched)
    sched.admit("short", "S1", 2.0)
    s1 = commit_plan(sched, 2.0)
    assert a.paused_at == 2.0 and s1.core == 0
    sched.admit("short", "S2", 2.0)
    plan = sched.plan(2.0)
    assert isinstance(plan, PauseThenStart) and plan.victim is b  # dropped: no memory
    sched.finish(s1, 0.1, cpu_s=0.1)
    assert sched.peek() is None and sched.resume(2.1) is a


def test_a_paused_call_that_ends_is_no_longer_paused() -> None:
    sched = trained(Preemption(max_paused=2), cores=(0, 1))
    a, b = two_long_running(sched)
    sched.admit("short", "S1", 2.0)
    s1 = commit_plan(sched, 2.0, lambda c: c is b)  # on B's core
    sched.pause(a, 2.5)
    sched.finish(a, None)  # shut down while paused
    assert a.paused_at is None and sched.paused == 1
    sched.admit("short", "S2", 3.0)
    assert sched.peek() is None  # B resumes first, onto A's core
    assert sched.resume(3.0) is b and b.core == 0 and s1.core == 1


# -- plans: the decision as a value, made only by commit() --


def table_state(table: Cores) -> tuple[object, ...]:
    functions = {core: dict(counts) for core, counts in table.functions.items()}
    return table.load, table.overrun, table.calls, table.heavy, functions, table.full


def test_a_pause_plan_changes_nothing_and_its_commit_frees_the_overrun_too() -> None:
    known = (("long", 10.0, 5.0), ("short", 0.1, 0.05))  # half a core each
    sched = trained(Preemption(), cores=(0,), known=known)
    long = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.observe(long, recent=1.0, overall=0.5)  # a whole core: 0.5 overrun
    short = sched.admit("short", "S", 2.0)
    before = copy.deepcopy(table_state(sched.cores_table))
    plan = sched.plan(2.0)
    assert plan == PauseThenStart(short, 0, 0.5, victim=long)
    assert table_state(sched.cores_table) == before and long.overrun == 0.5
    assert sched.paused == 0 and sched.preempted == 0 and short.waiting
    assert sched.commit(plan, 2.0) is short
    assert sched.cores_table.load[0] == 0.5 and sched.cores_table.overrun[0] == 0.0
    assert long.overrun == 0.0 and sched.paused == 1 and sched.preempted == 1


def test_a_move_plan_changes_nothing_and_names_the_core_the_move_frees() -> None:
    sched = trained(Preemption(share_cores=2), cores=(0, 1, 2))
    calls = [sched.admit("long", name, 1.0) for name in "ABC"]
    for _ in calls:
        sched.start(1.0)
    short = sched.admit("short", "S", 2.0)
    before = copy.deepcopy(table_state(sched.cores_table))
    plan = sched.plan(2.0)
    assert plan == MoveThenStart(short, 0, 1.0, moved=calls[0], to=1)
    assert sched.plan(2.0, pausable=lambda c: False) is None  # the caller's say
    assert table_state(sched.cores_table) == before and sched.moved == 0
    assert calls[0].core == 0 and not calls[0].shared_core and short.waiting
    assert sched.commit(plan, 2.0) is short and short.core == 0
    assert sched.cores_table.calls == {0: 1, 1: 2, 2: 1} and sched.moved == 1
    assert sched.cores_table.functions[1] == {"long": 2} and calls[0].shared_core


def test_a_join_plan_names_the_container_and_its_core_and_takes_no_share() -> None:
    sched: NodeScheduler[str] = NodeScheduler(FC, cores=[0, 1])
    first = sched.admit("f", "A", 1.0, group="g", limit=2)
    second = sched.admit("f", "B", 1.0, group="g", limit=2)
    sched.start(1.0)
    assert first.shared is not None and first.shared.core == 0
    assert sched.plan(1.0) == Start(second, 0, 0.0, first.shared)


def test_a_call_paused_or_moved_off_a_shared_core_takes_its_overrun_with_it() -> None:
    known = (("long", 10.0), ("half", 10.0, 5.0))
    sched = trained(Preemption(share_cores=2), cores=(0, 1), known=known)
    other = sched.admit("long", "O", 1.0)
    sched.start(1.0)
    half = sched.admit("half", "H", 1.0)
    sched.start(1.0)
    assert (other.core, half.core) == (0, 1)  # half a core more does not fit beside O
    table = sched.cores_table
    for leave in (lambda: sched.move(half, 1), lambda: sched.pause(half, 2.0)):
        sched.move(half, 0)
        sched.observe(half, recent=1.0, overall=0.5)  # a whole core: 0.5 overrun, on core 0
        assert table.load[0] == 2.0 and table.overrun[0] == 0.5
        leave()
        assert table.load[0] == 1.0 and table.overrun[0] == 0.0 and half.overrun == 0.0
    assert table.load[1] == 0.0 and half.paused_at == 2.0


# -- preemption: moves --


def test_no_sharing_move_while_a_call_is_paused() -> None:
    sched = trained(Preemption(share_cores=2), cores=(0, 1, 2))
    calls = [sched.admit("long", name, 1.0) for name in "ABC"]
    for _ in calls:
        sched.start(1.0)
    s1 = sched.admit("short", "S1", 2.0)
    sched.commit(PauseThenStart(s1, 2, 1.0, victim=calls[2]), 2.0)  # as if share_cores were 1
    sched.admit("short", "S2", 2.0)
    assert sched.sharing_move(2.0) is None


def three_long(share_cores: int = 2) -> NodeScheduler[str]:
    """Cores 0, 1, 2 hold ``long`` calls A, B, C, started at 1.0; ``short`` waits."""
    sched = trained(Preemption(share_cores=share_cores), cores=(0, 1, 2))
    for name in "ABC":
        sched.admit("long", name, 1.0)
        sched.start(1.0)
    sched.admit("short", "S", 2.0)
    return sched


def test_a_call_that_may_not_be_paused_is_not_moved_either() -> None:
    sched = three_long()
    call, core = sched.sharing_move(2.0, pausable=lambda c: c.payload != "A")
    assert (call.payload, core) == ("B", 2)


def test_a_sharing_move_is_not_weighed_against_a_pause_cost() -> None:
    sched = three_long()
    call, core = sched.sharing_move(10.5)  # 0.5 s left each, the head needs 0.1
    assert (call.payload, core) == ("A", 1)


def test_a_call_moves_onto_the_core_with_the_fewest_long_calls() -> None:
    sched = trained(Preemption(share_cores=3), cores=(0, 1, 2, 3))
    calls = {name: sched.admit("long", name, 1.0) for name in "ABCD"}
    for _ in calls:
        sched.start(1.0)
    sched.move(calls["D"], 1)  # core 1: B and D; core 3 idle
    sched.admit("short", "S", 2.0)
    assert sched.start(2.0).core == 3
    sched.admit("short", "S2", 2.0)
    call, core = sched.sharing_move(2.0)
    assert (call.payload, core) == ("A", 2)


def six_long(moves: dict[str, int]) -> tuple[NodeScheduler[str], dict[str, Call[str]]]:
    """Cores 0..5 held by ``long`` calls A..F, started at 1.0, then ``moves``."""
    sched = trained(Preemption(share_cores=3), cores=range(6))
    calls = {name: sched.admit("long", name, 1.0) for name in "ABCDEF"}
    for _ in calls:
        sched.start(1.0)
    for name, core in moves.items():
        sched.move(calls[name], core)
    return sched, calls


def test_spread_takes_from_the_most_loaded_core_and_the_lowest_of_equals() -> None:
    sched, calls = six_long({"B": 0, "E": 3})  # cores 0 and 3: two each
    assert sched.spread_move(2.0) == (calls["A"], 1)
    sched, calls = six_long({"B": 0, "E": 3, "F": 3})  # core 3: three
    assert sched.spread_move(2.0) == (calls["D"], 1)
    sched, calls = six_long({"B": 0, "C": 0, "E": 3})  # core 0: three
    assert sched.spread_move(2.0) == (calls["A"], 1)
    assert sched.spread_move(2.0, movable=lambda c: c.payload != "A") == (calls["B"], 1)


def test_spread_moves_only_a_call_of_the_crowded_core() -> None:
    sched = trained(Preemption(share_cores=3), cores=range(4))
    calls = [sched.admit("long", name, 1.0) for name in "ABC"]
    for _ in calls:
        sched.start(1.0)
    sched.move(calls[1], 0)  # core 0: A and B; core 1 idle
    sched.admit("short", "S", 2.0)
    assert sched.start(2.0).core == 1
    sched.finish(calls[2], 10.0, cpu_s=10.0)  # core 2 idle
    assert sched.spread_move(2.0) == (calls[0], 2)


def test_a_core_at_exactly_its_capacity_is_not_crowded() -> None:
    known = (("a", 10.0, 5.0), ("b", 10.0, 6.0))  # half a core, 0.6 of one
    sched = trained(Preemption(share_cores=2), (0, 1), known)
    for name in "ab":
        sched.admit(name, name, 1.0)
        assert sched.start(1.0).core == 0
    assert sched.cores_table.load[0] == 1.1  # 1 + the margin
    assert sched.spread_move(2.0) is None


def test_a_core_past_its_capacity_by_its_float_slack_only_is_not_crowded() -> None:
    sched = trained(Preemption(share_cores=2), cores=(0, 1), known=(("a", 10.0, 5.0),))
    table = sched.cores_table
    sched.admit("a", "A", 1.0)
    assert sched.start(1.0).core == 0
    sched.stats.finish("b", 10.0, cpu_s=0.0)
    sched.stats.observed("b", 1.0 + table.margin + 1e-9 - 0.5)  # 0.6000000010000002
    sched.admit("b", "B", 1.0)
    assert sched.start(1.0).core == 0
    assert table.load[0] == 1.0 + table.margin + 1e-9
    assert sched.spread_move(2.0) is None


def test_moves_are_counted() -> None:
    sched = trained(Preemption(share_cores=3), cores=(0, 1, 2))
    calls = [sched.admit("long", name, 1.0) for name in "ABC"]
    for _ in calls:
        sched.start(1.0)
    assert sched.move(calls[1], 0) == 1 and calls[1].core == 0
    assert sched.move(calls[2], 0) == 2 and calls[2].core == 0
    assert sched.moved == 2
    assert sched.move(calls[2], 2) == 0 and calls[2].core == 2
    assert sched.moved == 3


# -- overdue calls --


def test_an_overdue_call_goes_beside_calls_that_need_exactly_as_long() -> None:
    sched = overdue_node(cores=(0,))
    sched.admit("huge", "H", 1.0)
    sched.start(1.0)
    mid = sched.admit("mid", "M", 1.0)
    assert overdue(sched, 11.0) is mid  # H has 20 s left, M needs 20


def test_an_overdue_call_skips_running_calls_that_may_not_be_paused() -> None:
    sched = overdue_node(cores=(0, 1))
    for name in ("H0", "H1"):
        sched.admit("huge", name, 1.0)
        sched.start(1.0)
    sched.admit("mid", "M", 1.0)
    assert overdue(sched, 7.0, pausable=lambda c: c.payload != "H0") is not None
    assert commit_plan(sched, 7.0, pausable=lambda c: c.payload != "H0").core == 1


def test_an_overdue_call_may_join_two_longer_calls_but_not_share_cores_of_them() -> None:
    sched = overdue_node(cores=(0, 1, 2))
    huge = [sched.admit("huge", f"H{i}", 1.0) for i in range(3)]
    for _ in huge:
        sched.start(1.0)
    sched.move(huge[1], 0)
    sched.move(huge[2], 0)  # core 0: three, cores 1 and 2 idle
    for core in (1, 2):
        sched.admit("short", "S", 1.0)
        assert sched.start(1.0).core == core
    sched.admit("mid", "M", 1.0)
    assert overdue(sched, 7.0) is None  # core 0 holds share_cores long calls
    sched.move(huge[2], 2)  # core 0: two, core 2: H2 and a short call
    assert overdue(sched, 7.0).payload == "M" and commit_plan(sched, 7.0).core == 0


# -- resuming --


def test_paused_calls_past_their_estimates_resume_most_overrun_first() -> None:
    sched = trained(Preemption(max_paused=2), cores=(0, 1))
    a = sched.admit("mid", "A", 1.0)
    b = sched.admit("long", "B", 1.0)
    sched.start(1.0)
    sched.start(1.0)
    sched.pause(a, 7.0)  # 1 s past its 5
    sched.pause(b, 15.0)  # 4 s past its 10
    assert sched.resume(15.0) is b and sched.resume(15.0) is a


def test_a_paused_call_resumes_when_nothing_waits_even_if_the_rule_waits_for_shorter() -> None:
    sched = trained(Preemption(resume_first=False), cores=(0,))
    call = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.pause(call, 2.0)
    assert sched.resume(2.0) is call


def test_a_paused_call_resumes_before_a_longer_head_when_the_rule_waits_for_shorter() -> None:
    sched = trained(Preemption(resume_first=False), cores=(0,))
    call = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("short", "S", 2.0)
    sched.pause(call, 2.0)  # 9 s left
    sched.finish(sched.start(2.0), 0.1, cpu_s=0.1)
    sched.admit("long", "L2", 2.1)  # needs 10 (the node's prior is 5.03)
    assert sched.peek() is None and sched.resume(2.1) is call


# -- finish and observe --


def test_a_call_measured_without_cpu_time_leaves_a_shared_core_as_it_came() -> None:
    sched = trained(Preemption(), cores=(0,))
    sched.stats.finish("w", 10.0, cpu_s=0.5)
    calls = [sched.admit("w", f"W{i}", 1.0) for i in range(2)]
    for _ in calls:
        sched.start(1.0)
    sched.finish(calls[0], 10.0)
    assert sched.cores_table.load[0] == 0.05


def test_a_call_without_a_duration_is_no_measurement_of_its_share() -> None:
    sched = trained(Preemption(), cores=(0,))
    sched.stats.finish("f", 8.0, cpu_s=2.0)  # a quarter of a core
    calls = [sched.admit("f", f"F{i}", 1.0) for i in range(4)]
    for _ in calls:
        assert sched.start(1.0).core == 0
    sched.finish(calls[0], None, cpu_s=1.0)
    assert 0 not in sched.cores_table.full
    sched.finish(calls[1], 10.0, cpu_s=2.0)  # 0.2 of a core: within 0.25 + the margin
    assert 0 not in sched.cores_table.full


def test_a_moved_calls_estimate_is_its_time_less_a_short_wait() -> None:
    sched, a = moved_beside_a_long_call()
    sched.finish(a, 5.0, cpu_s=2.0, waited_s=0.5)
    assert sched.stats.expected("g") == 4.5
    assert sched.stats.share("g") == pytest.approx(2.0 / 4.5)


def test_calls_in_a_shared_container_or_paused_are_not_sampled() -> None:
    sched = trained(Preemption(), cores=(0, 1))
    sched.stats.finish("half", 10.0, cpu_s=5.0)
    grouped = sched.admit("half", "G", 1.0, group="g", limit=2)
    sched.start(1.0)
    sched.observe(grouped, recent=1.0, overall=1.0)
    assert grouped.overrun == 0.0 and sched.cores_table.load[0] == 1.0
    paused = sched.admit("half", "P", 1.0)
    sched.start(1.0)
    sched.pause(paused, 2.0)
    sched.observe(paused, recent=1.0, overall=1.0)
    assert paused.overrun == 0.0 and sched.stats.share("half") == 0.5


def test_a_call_sampled_within_the_margin_over_its_run_changes_no_estimate() -> None:
    sched = trained(Preemption(), cores=(0,))
    sched.stats.finish("half", 10.0, cpu_s=5.0)
    call = sched.admit("half", "H", 1.0)
    sched.start(1.0)
    sched.observe(call, recent=0.6, overall=0.6)  # exactly 0.5 + the margin
    sched.observe(call, recent=0.55, overall=0.55)
    assert sched.stats.share("half") == 0.5 and call.overrun == 0.0
    sched.observe(call, recent=0.7, overall=0.7)
    assert sched.stats.share("half") == 0.7


# -- drain --


def test_drained_calls_wait_no_more_and_a_group_with_a_container_goes_on() -> None:
    sched = trained()
    first = sched.admit("c", "A", 1.0, group="g", limit=3)
    sched.start(1.0)
    plain = sched.admit("long", "L", 1.0)
    drained = sched.drain()
    assert drained == [plain] and plain.waiting is False
    sched.admit("c", "B", 2.0, group="g", limit=3)
    assert joins(sched) is first.shared
    sched.start(2.0)
    assert sched.peek() is None and sched.queued == 0


# -- the queue's stale entries --


def one_call_per_core(cores) -> NodeScheduler[str]:
    """A core takes one call; ``huge`` 30 s, ``io`` 20 s but light (1 s of CPU); a call is
    overdue after a quarter of its E[p]; a paused call resumes only before longer calls."""
    rule = Preemption(share_cores=3, overdue=0.25, resume_first=False)
    known = (("huge", 30.0), ("io", 20.0, 1.0))
    return trained(rule, Cores(cores, max_calls=1), known)


def test_a_light_call_started_overdue_is_not_the_head_any_more() -> None:
    sched = one_call_per_core((0, 1))
    h0 = sched.admit("huge", "H0", 1.0)
    h1 = sched.admit("huge", "H1", 1.0)
    sched.start(1.0)
    sched.start(1.0)
    sched.admit("io", "L", 1.0)  # light, but no core takes another call
    sched.admit("huge", "X", 1.0)
    assert overdue(sched, 6.0).payload == "L" and commit_plan(sched, 6.0).core == h0.core
    sched.finish(h1, 5.0, cpu_s=5.0)
    assert sched.peek().payload == "X"


def test_a_paused_call_is_weighed_against_the_head_not_a_light_call_started_overdue() -> None:
    sched = one_call_per_core((0, 1, 2))
    calls = [sched.admit("huge", name, 1.0) for name in ("H0", "H1", "P")]
    for _ in calls:
        sched.start(1.0)
    sched.admit("io", "L", 1.0)
    sched.admit("huge", "X", 1.0)
    assert overdue(sched, 6.0).payload == "L" and commit_plan(sched, 6.0).core == 0
    sched.pause(calls[2], 6.0)  # 25 s left: shorter than X, longer than L
    assert sched.resume(6.0) is calls[2]


def test_a_paused_call_is_weighed_against_the_head_not_a_call_that_joined_a_container() -> None:
    known = (("long", 10.0), ("mid", 5.0), ("short", 0.1), ("c", 0.05))
    sched = trained(Preemption(resume_first=False), (0, 1), known)
    a = sched.admit("long", "A", 1.0)
    sched.start(1.0)
    sched.admit("c", "G1", 1.0, group="g", limit=2)
    assert sched.start(1.0).core == 1  # its container holds core 1
    sched.admit("short", "S", 2.0)
    sched.pause(a, 2.0)  # 9 s left
    s = sched.start(2.0)
    sched.admit("c", "G2", 2.0, group="g", limit=2)
    assert sched.start(2.0).shared is not None  # joins G1
    sched.admit("mid", "M", 2.0)
    sched.finish(s, 0.1, cpu_s=0.1)
    assert sched.resume(2.1) is None  # M needs 5
    assert sched.peek().payload == "M"


def test_scheduler_orders_by_priority_then_arrival_and_limits_cores():
    sched = NodeScheduler(SEPT, cores=[1, 2])
    sched.stats.finish("long", 5.0)
    sched.stats.finish("short", 1.0)
    sched.admit("long", "L1", 0.0)
    sched.admit("short", "S1", 0.1)
    sched.admit("short", "S2", 0.2)
    a = sched.start(1.0)
    b = sched.start(1.0)
    assert (a.payload, a.core) == ("S1", 1)
    assert (b.payload, b.core) == ("S2", 2)
    assert sched.peek() is None and sched.queued == 1
    sched.finish(b, 1.5)
    c = sched.start(2.0)
    assert (c.payload, c.core) == ("L1", 2)
    assert sched.stats.expected("short") == pytest.approx(1.25)


def test_baseline_is_not_limited_by_cores():
    sched = NodeScheduler(OPENWHISK, cores=[1])
    for i in range(5):
        sched.admit("f", i, float(i))
    started = [sched.start(9.0) for _ in range(5)]
    assert [c.payload for c in started] == [0, 1, 2, 3, 4]
    assert all(c.core is None for c in started)


def test_equal_keys_keep_admission_order_and_drain_in_order():
    sched = NodeScheduler(FC, cores=[0])
    for i in range(4):
        sched.admit(f"f{i}", i, 0.0)  # all unseen: equal keys
    assert [c.payload for c in sched.drain()] == [0, 1, 2, 3]
    assert sched.queued == 0


def test_rect_uses_previous_arrival_of_the_same_function():
    sched = NodeScheduler(RECT, cores=[0])
    sched.stats.finish("f", 1.0)
    sched.admit("f", "first", 10.0)
    second = sched.admit("f", "second", 20.0)
    assert second.priority == pytest.approx(10.0 + 1.0)


def test_eect_prevents_starvation_of_a_long_call():
    sched = NodeScheduler(EECT, cores=[0])
    sched.stats.finish("long", 10.0)
    sched.stats.finish("short", 1.0)
    sched.admit("long", "L", 0.0)  # key 10
    sched.admit("short", "S-early", 5.0)  # key 6
    sched.admit("short", "S-late", 11.0)  # key 12: after the long call
    order = []
    while sched.queued:
        c = sched.start(0.0)
        order.append(c.payload)
        sched.finish(c, None)
    assert order == ["S-early", "L", "S-late"]


def test_action_cores_syntax():
    from invoker.config import available_cores, parse_cores

    assert parse_cores("0,") == (0,)
    assert parse_cores("1-3") == (1, 2, 3)
    assert parse_cores("0,2") == (0, 2)
    assert parse_cores("1") == (available_cores()[-1],)  # a count: the last core


@pytest.mark.parametrize("policy", [FIFO, EECT])
def test_order_follows_receipt_not_admission(policy):
    """A call received first but admitted last (its action fetch was slow) runs first."""
    sched = NodeScheduler(policy, cores=[0])
    sched.stats.finish("f", 1.0)
    sched.admit("f", "second", 2.0, order=2)
    sched.admit("f", "third", 3.0, order=3)
    sched.admit("f", "first", 1.0, order=1)  # admitted last
    order = []
    while sched.queued:
        c = sched.start(9.0)
        order.append(c.payload)
        sched.finish(c, None)
    assert order == ["first", "second", "third"]


def test_equal_receipt_times_keep_receipt_order():
    sched = NodeScheduler(FIFO, cores=[0])
    sched.admit("f", "b", 5.0, order=8)
    sched.admit("f", "a", 5.0, order=7)
    assert [c.payload for c in sched.drain()] == ["a", "b"]


def _measured(sched, function, share, runs=3):
    for _ in range(runs):
        sched.stats.finish(function, 1.0, share)


def test_waiting_calls_share_a_core_and_cpu_bound_calls_do_not():
    sched = NodeScheduler(FC, cores=[1])
    _measured(sched, "sleep", 0.01)
    _measured(sched, "spin", 1.0)
    for i in range(3):
        sched.admit("spin", f"spin{i}", float(i))
    for i in range(10):
        sched.admit("sleep", f"sleep{i}", 10.0 + i)
    started = []
    while sched.peek() is not None:
        started.append(sched.start(20.0))
    # One CPU-bound call on the core, and light calls beside it up to 8 calls per core.
    assert [c.payload for c in started] == ["spin0"] + [f"sleep{i}" for i in range(7)]
    assert all(c.core == 1 for c in started)
    assert sched.cores_table.load[1] == pytest.approx(1.07)
    sched.finish(started[0], 1.0, 1.0)
    nxt = sched.start(21.0)  # the next CPU-bound call fits beside the waiting ones
    assert nxt.payload == "spin1" and sched.peek() is None


def test_unknown_function_takes_a_whole_core():
    sched = NodeScheduler(FIFO, cores=[0, 1])
    for i in range(3):
        sched.admit("new", f"n{i}", float(i))
    n0, n1 = sched.start(3.0), sched.start(3.0)
    assert (n0.core, n1.core) == (0, 1) and n0.share == n1.share == 1.0
    assert sched.peek() is None


def test_best_fit_keeps_idle_cores_whole_for_cpu_bound_calls():
    sched = NodeScheduler(FIFO, cores=[0, 1])
    _measured(sched, "half", 0.5)
    _measured(sched, "spin", 1.0)
    sched.admit("half", "a", 0.0)
    a = sched.start(0.0)
    sched.admit("half", "b", 1.0)
    b = sched.start(1.0)
    assert a.core == b.core == 0  # 0.5 + 0.5 on one core
    sched.admit("spin", "c", 2.0)
    assert sched.start(2.0).core == 1


def test_light_calls_pass_a_blocked_head_only_beside_a_heavy_call():
    sched = NodeScheduler(FIFO, cores=[0])
    _measured(sched, "sleep", 0.02)
    _measured(sched, "spin", 1.0)
    sched.admit("spin", "spin0", 0.0)
    running = sched.start(0.0)
    sched.admit("spin", "spin1", 1.0)  # the head: waits for the core
    sched.admit("sleep", "sleep0", 2.0)
    sched.admit("sleep", "sleep1", 3.0)
    assert sched.peek().payload == "sleep0"  # passes the blocked head, beside spin0
    light = [sched.start(4.0), sched.start(4.0)]
    assert [c.payload for c in light] == ["sleep0", "sleep1"]
    sched.finish(running, 1.0, 1.0)
    head = sched.start(5.0)  # 0.04 + 1.0 fits in 1.1: the head goes at once
    assert head.payload == "spin1"
    # With no heavy call on the core, a light call cannot keep a blocked head waiting.
    sched.finish(head, 1.0, 1.0)
    for c in light:
        sched.finish(c, 1.0, 0.02)
    _measured(sched, "fat", 0.3)
    sched.admit("fat", "f0", 6.0)
    sched.admit("fat", "f1", 6.0)
    sched.admit("fat", "f2", 6.0)
    sched.admit("fat", "f3", 6.0)
    fats = [sched.start(7.0) for _ in range(3)]  # 0.9
    sched.admit("sleep", "sleep2", 8.0)
    assert sched.peek().payload == "sleep2"  # 0.9 + 0.02 fits; f3 (1.2) does not
    assert [c.payload for c in fats] == ["f0", "f1", "f2"]


def test_a_light_call_never_passes_a_blocked_head_onto_a_core_of_light_calls():
    """The "only" half: a core holding light calls alone (each within the margin, none
    heavy) is room the head will have as soon as they end, so a later light call must not
    go there ahead of it, although it would fit."""
    sched = NodeScheduler(FIFO, cores=[0])
    _measured(sched, "sleep", 0.1)  # at the margin: still light
    _measured(sched, "spin", 1.0)
    for i in range(3):
        sched.admit("sleep", f"sleep{i}", float(i))
    sleeping = [sched.start(3.0) for _ in range(3)]  # 0.3 of the core, no heavy call
    assert sched.cores_table.heavy[0] == 0
    sched.admit("spin", "spin0", 4.0)  # the head: 0.3 + 1.0 does not fit in 1.1
    sched.admit("sleep", "late", 5.0)  # 0.3 + 0.1 would fit
    assert sched.peek() is None and sched.peek() is None
    for c in sleeping:
        sched.finish(c, 1.0, 0.1)
    assert sched.start(6.0).payload == "spin0"  # the head first, then the light call beside
    assert sched.start(6.0).payload == "late"


def test_a_core_whose_calls_overran_takes_no_more_until_it_empties():
    sched = NodeScheduler(FIFO, cores=[0])
    _measured(sched, "io", 0.05)
    for i in range(4):
        sched.admit("io", i, float(i))
    calls = [sched.start(5.0) for _ in range(3)]
    # The function changed behaviour: a call used 0.9 of a core, predicted 0.05.
    sched.finish(calls[0], 1.0, 0.9)
    assert sched.peek() is None  # never more, although 0.1 + 0.x would fit by estimate
    sched.finish(calls[1], 1.0, 0.9)
    sched.finish(calls[2], 1.0, 0.9)
    nxt = sched.start(6.0)  # the core emptied; the estimate has moved towards the truth
    assert nxt.payload == 3 and nxt.share == pytest.approx((3 * 0.05 + 3 * 0.9) / 6)


def test_an_overrun_that_still_fits_the_core_does_not_close_it():
    sched = NodeScheduler(FIFO, cores=[0])
    _measured(sched, "spin", 0.7)
    _measured(sched, "sleep", 0.0)
    sched.admit("spin", "spin", 0.0)
    sched.admit("sleep", "sleep0", 1.0)
    spin, sleep0 = sched.start(2.0), sched.start(2.0)
    sched.finish(spin, 1.0, 0.95)  # more than 0.7 + 0.1, but no other spin call is there
    sched.admit("sleep", "sleep1", 3.0)
    assert sched.start(3.0).core == 0 and sleep0.core == 0


def test_shared_cores_between_queues():
    from invoker.scheduler import Cores

    cores = Cores([0])
    cpu = NodeScheduler(FC, cores)
    gpu = NodeScheduler(FIFO, cores, cpu.stats)
    gpu.admit("g", "gpu-call", 0.0)
    cpu.admit("f", "cpu-call", 0.0)
    g = gpu.start(0.0)
    assert g.core == 0 and cores.calls[0] == 1
    assert cpu.peek() is None  # the GPU call's CPU side holds the only core
    gpu.finish(g, 1.0)
    assert cpu.start(1.0).core == 0


def test_time_waiting_for_a_cpu_is_not_part_of_the_share():
    """A CPU-bound call that shared its core (1 s of CPU in 2 s, 1 s of it runnable but
    waiting) is CPU-bound, not half."""
    s = FunctionStats()
    s.finish("spin", 2.0, 1.0, waited_s=1.0)
    assert s.share("spin") == 1.0
    sched = NodeScheduler(FIFO, cores=[0])
    _measured(sched, "io", 0.0)
    for i in range(3):
        sched.admit("io", i, float(i))
    calls = [sched.start(5.0) for _ in range(3)]  # three "light" calls that turn CPU-bound
    sched.finish(calls[0], 3.0, 1.0, waited_s=2.0)  # used 1.0 of its own time: overran
    assert 0 in sched.cores_table.full


def test_a_running_call_sampled_over_its_share_closes_its_core_until_it_falls_back():
    """The misprediction guard while calls run: a call expected to wait (0.05) is sampled
    burning a whole core; its core takes nothing that no longer fits beside it, and opens
    again when a later sample (or its end) says the demand has fallen."""
    sched = NodeScheduler(FIFO, cores=[0, 1])
    _measured(sched, "io", 0.05)
    _measured(sched, "most", 0.7)
    sched.admit("io", "io0", 0.0)
    sched.admit("io", "io1", 0.0)
    io0, io1 = sched.start(0.0), sched.start(0.0)
    assert io0.core == io1.core == 0
    table = sched.cores_table
    assert table.may_overrun(io0.share) and not table.may_overrun(1.0)
    sched.observe(io0, 0.12, 0.12)  # within share + margin: the estimate stands
    assert io0.overrun == 0.0 and table.load[0] == pytest.approx(0.1)
    sched.observe(io0, 1.0, 0.7)  # it turned CPU-bound
    assert table.load[0] == pytest.approx(1.05) and table.overrun[0] == pytest.approx(0.95)
    assert sched.stats.share("io") == 0.7  # its waiting calls are placed by what it uses
    sched.admit("most", "m0", 1.0)
    m0 = sched.start(1.0)
    assert m0.core == 1  # by estimate (0.1 + 0.7) it fitted core 0; by measure it does not
    sched.admit("most", "m1", 1.0)
    assert sched.peek() is None  # core 0 is closed to it, core 1 has 0.4 left
    sched.observe(io0, 0.05, 0.5)  # the burst is over
    assert table.load[0] == pytest.approx(0.1) and table.overrun[0] == 0.0
    assert sched.start(2.0).core == 0
    sched.observe(io1, 1.0, 0.1)  # a burst in a call that mostly waits
    assert sched.stats.share("io") == 0.7
    sched.finish(io1, 1.0, 0.05)  # a finished call takes its overrun with it
    assert table.overrun[0] == 0.0 and table.load[0] == pytest.approx(0.75)


def test_a_core_forgets_a_function_when_its_last_call_leaves():
    sched = NodeScheduler(FIFO, cores=[0])
    _measured(sched, "io", 0.05)
    sched.admit("io", "a", 0.0)
    sched.admit("io", "b", 0.0)
    a, b = sched.start(1.0), sched.start(1.0)
    assert sched.cores_table.functions[0] == {"io": 2}
    sched.finish(a, 1.0, 0.05)
    assert sched.cores_table.functions[0] == {"io": 1}
    sched.finish(b, 1.0, 0.05)
    assert sched.cores_table.functions[0] == {}


G = ("guest", "guest/sleepy", "1-abc")  # a group: the calls that may share a container


def test_calls_join_a_running_container_up_to_its_limit_on_one_core():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0])
    for i in range(4):
        sched.admit("guest/sleepy", f"c{i}", float(i), group=G, limit=3)
    first = sched.start(10.0)
    assert joins(sched) is first.shared and first.core == 0
    second, third = sched.start(10.0), sched.start(10.0)
    assert [c.payload for c in (first, second, third)] == ["c0", "c1", "c2"]
    assert {c.shared for c in (first, second, third)} == {first.shared}
    assert first.shared.calls == 3
    assert sched.cores_table.calls[0] == 1  # one container on the core, not three calls
    assert sched.peek() is None  # the fourth waits: the container is full, the core held
    assert sched.queued == 1 and sched.running == 3
    sched.finish(second, 1.0)
    assert joins(sched) is first.shared
    fourth = sched.start(11.0)
    assert fourth.payload == "c3" and fourth.shared is first.shared and fourth.core == 0
    for call in (first, third, fourth):
        sched.finish(call, 1.0)
    assert sched.cores_table.calls[0] == 0 and sched.cores_table.load[0] == 0.0
    assert sched.running == 0 and sched.queued == 0


def test_concurrency_one_keeps_one_call_per_core():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0])
    for i in range(3):
        sched.admit("guest/sleepy", f"c{i}", float(i), group=G, limit=1)
    first = sched.start(10.0)
    assert first.shared is None and first.group is None
    assert sched.peek() is None and joins(sched) is None


def test_joining_calls_go_in_the_policys_order_among_the_actions_calls():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0])
    # Received at the same time, numbered out of admission order: receipt order decides.
    for order, name in ((5, "late"), (1, "first"), (3, "middle"), (4, "next")):
        sched.admit("guest/sleepy", name, 0.0, order, group=G, limit=3)
    started = [sched.start(1.0).payload for _ in range(3)]
    assert started == ["first", "middle", "next"]
    assert sched.peek() is None


def test_a_waiting_call_of_another_action_does_not_stop_joins_nor_get_the_core():
    sched: NodeScheduler[str] = NodeScheduler(SEPT, cores=[0])
    sched.stats.finish("other", 0.5)  # shorter: SEPT puts it first
    sched.stats.finish("guest/sleepy", 1.0)
    sched.admit("guest/sleepy", "g0", 0.0, group=G, limit=2)
    g0 = sched.start(0.0)
    sched.admit("other", "o", 1.0)
    sched.admit("guest/sleepy", "g1", 2.0, group=G, limit=2)
    assert sched.peek().payload == "g1" and joins(sched) is g0.shared
    g1 = sched.start(2.0)
    assert g1.shared is g0.shared
    assert sched.peek() is None  # "other" waits for the core the container holds
    sched.finish(g0, 1.0)
    assert sched.peek() is None  # one call still in the container: the core stays held
    sched.finish(g1, 1.0)
    o = sched.start(3.0)
    assert o.payload == "o" and o.core == 0


def test_a_closed_container_takes_no_more_and_the_next_call_starts_its_own():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0, 1])
    for i in range(3):
        sched.admit("guest/sleepy", f"c{i}", float(i), group=G, limit=3)
    first = sched.start(1.0)
    sched.close(first.shared)  # e.g. a call in it failed: its container is going
    assert joins(sched) is None
    second = sched.start(1.0)
    assert second.shared is not first.shared and second.core == 1
    third = sched.start(1.0)  # joins the new one
    assert third.shared is second.shared
    sched.finish(first, 1.0)
    assert sched.cores_table.calls[0] == 0  # the closed one freed its core when it emptied
    sched.finish(second, 1.0)
    sched.finish(third, 1.0)
    sched.admit("guest/sleepy", "c3", 5.0, group=G, limit=3)
    fresh = sched.start(5.0)  # nothing running: a container (a warm one) of its own
    assert fresh.shared not in (first.shared, second.shared) and fresh.shared.calls == 1


def test_groups_are_apart_and_a_joined_container_holds_a_whole_core():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0, 1])
    h = ("bob", "guest/sleepy", "1-abc")  # another invoking namespace: another container
    sched.admit("guest/sleepy", "g", 0.0, group=G, limit=4)
    sched.admit("guest/sleepy", "h", 1.0, group=h, limit=4)
    sched.admit("guest/sleepy", "h2", 2.0, group=h, limit=4)
    a, b, c = sched.start(3.0), sched.start(3.0), sched.start(3.0)
    assert (a.core, b.core, c.core) == (0, 1, 1)
    assert c.shared is b.shared and a.shared is not b.shared
    assert sched.cores_table.load == {0: 1.0, 1: 1.0}


def test_cpu_time_of_a_shared_call_is_not_taken_as_the_functions():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0])
    sched.admit("guest/sleepy", "a", 0.0, group=G, limit=2)
    sched.admit("guest/sleepy", "b", 0.0, group=G, limit=2)
    a, b = sched.start(0.0), sched.start(0.0)
    sched.finish(a, 1.0, cpu_s=0.9)  # the container's counters: both calls' CPU
    sched.finish(b, 1.0, cpu_s=0.9)
    assert sched.stats.expected("guest/sleepy") == pytest.approx(1.0)
    assert sched.stats.snapshot()["guest/sleepy"]["cpu_samples"] == 0


def test_baseline_joins_too_and_starts_another_container_when_full():
    sched: NodeScheduler[str] = NodeScheduler(OPENWHISK, cores=[0])
    for i in range(3):
        sched.admit("guest/sleepy", f"c{i}", float(i), group=G, limit=2)
    calls = [sched.start(1.0) for _ in range(3)]
    assert calls[1].shared is calls[0].shared
    assert calls[2].shared is not calls[0].shared and calls[2].shared.calls == 1
    assert all(c.core is None for c in calls)


def test_drain_and_waiting_skip_calls_that_started_by_joining():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0])
    sched.admit("other", "o", 0.5)  # heavy (unmeasured): a core of its own
    for i in range(4):
        sched.admit("guest/sleepy", f"c{i}", 1.0 + i, group=G, limit=3)
    a = sched.start(4.0)
    assert a.payload == "o"  # first received: starts first
    sched.finish(a, 1.0)
    started = [sched.start(5.0) for _ in range(3)]
    assert [c.payload for c in started] == ["c0", "c1", "c2"]
    assert sched.queued == 1
    assert [c.payload for c in sched.waiting()] == ["c3"]
    assert [c.payload for c in sched.drain()] == ["c3"]
    assert sched.queued == 0 and sched.peek() is None


def test_limit_below_one_is_refused():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0])
    with pytest.raises(ValueError):
        sched.admit("f", "x", 0.0, group=G, limit=0)


def test_a_late_call_starts_ahead_of_the_queue_within_its_share_of_the_running_calls():
    """``Policy.late`` (calls sharing the CPU): from its deadline on, a call starts ahead of
    better-ranked ones while the calls started late are at most ``late_share`` of the
    running ones; before its deadline, or beyond the share, the queue's order holds."""
    deadline = {"long": 10.0, "short": 1000.0}
    policy = dataclasses.replace(
        OPENWHISK,
        name="late",
        priority=lambda i: 0.0 if i.function == "short" else 1.0,
        late=lambda i: i.received + deadline[i.function],
        late_share=0.25,
    )
    sched: NodeScheduler[str] = NodeScheduler(policy, cores=[0])
    old = sched.admit("long", "old", 0.0)  # late from 10.0
    for i in range(12):
        sched.admit("short", f"s{i}", 1.0)

    def start_short(now: float) -> None:
        plan = sched.plan(now)
        assert type(plan) is Start and plan.call.function == "short"
        sched.commit(plan, now)

    start_short(10.0)  # late, but 1 of 1 running would be late: over a quarter
    start_short(10.0)  # 1 of 2
    start_short(5.0)  # 1 of 3
    start_short(9.9)  # 1 of 4 would be a quarter, but it is not late yet: the queue's head
    assert sched.peek().function == "short"  # no time given: the queue's order
    queued = sched.queued
    plan = sched.plan(10.0)  # 1 of 4: a quarter
    assert isinstance(plan, LateStart) and plan.call is old
    assert sched.commit(plan, 10.0) is old and old.share == 1.0  # 1 of 5
    assert (sched.running_late, sched.late_starts, sched.queued) == (1, 1, queued - 1)
    start_short(11.0)
    old2 = sched.admit("long", "old2", 0.5)
    start_short(11.0)  # 2 of 7 would be late: over a quarter
    plan = sched.plan(11.0)  # 2 of 8
    assert isinstance(plan, LateStart) and plan.call is old2
    sched.commit(plan, 11.0)
    assert (sched.running_late, sched.late_starts, sched.queued) == (2, 2, queued - 3)
    sched.finish(old, 1.0)
    sched.finish(old2, 1.0)
    assert sched.running_late == 0
    # A late call at the head of the queue starts as any head does, not counted as late.
    assert sorted(c.payload for c in sched.drain()) == sorted(f"s{i}" for i in range(6, 12))
    alone = sched.admit("long", "alone", 20.0)
    plan = sched.plan(40.0)
    assert type(plan) is Start and plan.call is alone
    sched.commit(plan, 40.0)
    assert sched.running_late == 0 and sched.plan(50.0) is None


def test_upcoming_lists_the_next_waiting_calls_in_policy_order():
    """What the invoker creates containers ahead for (``--create-ahead``): the first n
    queued calls by priority, light and heavy heaps together, started ones left out."""
    sched = trained(preemption=None, cores=(0, 1))
    for fn, name in (("long", "l1"), ("short", "s1"), ("mid", "m1"), ("short", "s2")):
        sched.admit(fn, name, 1.0)
    assert [c.payload for c in sched.upcoming(3)] == ["s1", "s2", "m1"]
    sched.commit(sched.plan(1.0), 1.0)  # s1 starts
    assert [c.payload for c in sched.upcoming(10)] == ["s2", "m1", "l1"]
    assert sched.upcoming(0) == []
