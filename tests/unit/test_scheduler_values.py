"""What the node scheduler (invoker/scheduler.py) decides and counts, exactly, where the
behavioural tests (test_policies, test_preemption, test_scheduler_view) only see the
outcome: each refusal's words, the per-core counts of heavy calls, the bounds of the
misprediction guard and of the overdue heap, and the bookkeeping of pauses and moves (the
mutation run, tests/mutation/run.py, uses them)."""

from __future__ import annotations

import pytest

from invoker.scheduler import Call, Cores, NodeScheduler, Preemption
from policies import SEPT


def trained(
    preemption: Preemption | None = Preemption(),
    cores=(0,),
    known=(("long", 10.0), ("mid", 5.0), ("short", 0.1)),
) -> NodeScheduler[str]:
    """A SEPT scheduler that knows how long each function of ``known`` takes (by default
    ``long`` 10 s, ``mid`` 5 s and ``short`` 0.1 s), each using a whole core."""
    sched: NodeScheduler[str] = NodeScheduler(SEPT, cores=list(cores), preemption=preemption)
    for fn, p in known:
        sched.admit(fn, "warm-up", 0.0)
        sched.finish(sched.start(0.0), p, cpu_s=p)
    return sched


def overdue_node(cores) -> NodeScheduler[str]:
    """Overdue calls may share a core with up to two longer ones; ``huge`` takes 30 s,
    ``mid`` 20 s (overdue 5 s after it arrives) and ``short`` 0.1 s."""
    known = (("huge", 30.0), ("mid", 20.0), ("short", 0.1))
    return trained(Preemption(share_cores=3, overdue=0.25), cores, known)


def overrunning(sched: NodeScheduler[str]) -> Call[str]:
    """A call expected to use half a core, started at 1.0 and sampled using a whole one."""
    sched.stats.finish("half", 10.0, cpu_s=5.0)
    call = sched.admit("half", "H", 1.0)
    sched.start(1.0)
    sched.observe(call, recent=1.0, overall=0.6)
    return call


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
    a = sched.admit("long", "A", 1.0)
    b = sched.admit("long", "B", 1.0)
    sched.start(1.0)
    sched.start(1.0)
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
    running = sched.start(1.0)
    sched.pause(running, 2.0)
    sched.admit("long", "L2", 2.0)
    sched.start(2.0)
    with pytest.raises(RuntimeError) as err:
        sched._put_on_core(running, 3.0)
    assert str(err.value) == "no core has room for the paused call"


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
    assert sched.choose_overdue(7.0) is mid
    assert sched.start(7.0).core == 2


def paused_long(resume_first: bool, pause_at: float) -> NodeScheduler[str]:
    """One core: ``long`` (10 s) started at 1.0, paused at ``pause_at`` for a short call
    that has since finished; ``mid`` (5 s) waits behind."""
    sched = trained(Preemption(resume_first=resume_first), cores=(0,))
    long = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    sched.admit("short", "S", pause_at)
    sched.pause(long, pause_at)
    sched.finish(sched.start(pause_at), 0.1, cpu_s=0.1)
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
    a = sched.admit("long", "A", 1.0)
    b = sched.admit("long", "B", 1.0)
    sched.start(1.0)
    sched.start(1.0)
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
    a = sched.admit("long", "A", 1.0)
    b = sched.admit("long", "B", 1.0)
    sched.start(1.0)
    sched.start(1.0)
    sched.move(b, a.core)
    sched.admit("short", "S", 2.0)
    sched.start(2.0)
    sched.admit("short", "S2", 2.0)
    assert not sched.can_start() and sched.preemption_victim(2.0) is None


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
    assert not sched.can_start() and sched.preemption_victim(2.0) is c


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


def test_a_moved_calls_estimate_is_its_time_less_its_wait() -> None:
    sched = trained(Preemption(share_cores=2), cores=(0, 1))
    a = sched.admit("g", "A", 1.0)
    b = sched.admit("long", "B", 1.0)
    sched.start(1.0)
    sched.start(1.0)
    sched.move(a, b.core)
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
    call = sched.admit("long", "L", 1.0)
    sched.start(1.0)
    with pytest.raises(RuntimeError) as err:
        sched.unpause(call, 1.0)
    assert str(err.value) == "unpause() of a call that is not the one just paused"


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
    assert shared.closed is True and sched.joining() is None
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
        assert sched.choose_overdue(7.0) is not None
        sched.start(7.0)
    assert sched.overdue_starts == 2 and sched.queued == 0


def test_the_bounds_of_light_and_of_sampling_a_call() -> None:
    table = Cores([0], margin=0.1)
    assert table.light(0.1) and not table.light(0.1001)
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
