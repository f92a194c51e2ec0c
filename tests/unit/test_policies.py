"""Policy keys, the statistics they read, and the node scheduler's queue and cores."""

import pytest

from invoker.scheduler import NodeScheduler
from policies import EECT, FC, FIFO, OPENWHISK, RECT, SEPT, CallInfo, FunctionStats, get_policy


@pytest.mark.parametrize(
    "policy,expected",
    [(FIFO, 10.0), (SEPT, 2.0), (EECT, 12.0), (RECT, 9.0), (FC, 6.0), (OPENWHISK, 10.0)],
)
def test_policy_keys(policy, expected):
    info = CallInfo(received=10.0, expected=2.0, previous_received=7.0, recent_calls=3)
    assert policy.priority(info) == expected


def test_get_policy_names_and_errors():
    assert get_policy("FC") is FC
    with pytest.raises(ValueError, match="choose one of fifo, sept, eect, rect, fc, openwhisk"):
        get_policy("lifo")


def test_expected_time_is_mean_of_last_ten():
    s = FunctionStats()
    for d in range(1, 13):  # 1..12: the last ten are 3..12
        s.finish("f", float(d))
    assert s.expected("f") == pytest.approx(sum(range(3, 13)) / 10)


def test_unseen_function_gets_the_node_wide_prior():
    s = FunctionStats()
    assert s.expected("new") == 0.0
    s.finish("a", 1.0)
    s.finish("b", 3.0)
    assert s.expected("new") == pytest.approx(2.0)
    assert s.arrive("new", 0.0).expected == pytest.approx(2.0)


def test_arrivals_window_previous_arrival_and_clock_jumps():
    s = FunctionStats(window_s=60)
    first = s.arrive("f", 100.0)
    assert first.previous_received == 100.0 and first.recent_calls == 1
    second = s.arrive("f", 130.0)
    assert second.previous_received == 100.0 and second.recent_calls == 2
    third = s.arrive("f", 161.0)  # 100 fell out of (101, 161]
    assert third.recent_calls == 2 and third.previous_received == 130.0
    back = s.arrive("f", 50.0)  # a clock jump backwards is read as "no time passed"
    assert back.received == 161.0 and back.recent_calls == 3


def test_statistics_are_bounded():
    s = FunctionStats(max_functions=3)
    for i in range(10):
        s.finish(f"f{i}", float(i))
    assert len(s) == 3
    assert s.expected("f9") == 9.0
    assert s.prior() == pytest.approx((7 + 8 + 9) / 3)


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
    assert not sched.can_start() and sched.queued == 1
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
