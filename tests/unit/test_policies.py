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
    late = s.arrive("f", 140.0)  # received before 161 but admitted after it (slow fetch)
    assert late.received == 140.0 and late.recent_calls == 3
    assert late.previous_received == 140.0  # never a previous call received after it
    assert s.arrive("f", 162.0).previous_received == 161.0


def test_statistics_are_bounded():
    s = FunctionStats(max_functions=3)
    for i in range(10):
        s.finish(f"f{i}", float(i))
    assert len(s) == 3
    assert s.expected("f9") == 9.0
    assert s.prior() == pytest.approx((7 + 8 + 9) / 3)


def test_an_arrival_exactly_window_s_before_the_latest_is_out_of_the_window():
    s = FunctionStats(window_s=60)
    s.arrive("f", 0.0)
    assert s.arrive("f", 60.0).recent_calls == 1  # the window is (0, 60]: 0 is out
    assert s.arrive("f", 119.5).recent_calls == 2  # (59.5, 119.5] holds 60 and 119.5


def test_a_call_received_a_window_before_the_latest_counts_itself():
    s = FunctionStats(window_s=60)
    s.arrive("f", 100.0)
    late = s.arrive("g", 10.0)  # out of g's window (40, 100] as soon as it is recorded
    assert (late.received, late.previous_received, late.recent_calls) == (10.0, 10.0, 1)
    assert s.snapshot()["g"]["recent_calls"] == 0


def test_an_arrival_expects_the_mean_of_its_function_finished_calls():
    s = FunctionStats()
    s.finish("f", 1.0)
    s.finish("f", 4.0)
    s.finish("g", 10.0)
    assert s.arrive("f", 0.0).expected == 2.5
    assert s.arrive("new", 0.0).expected == 6.25  # the prior: (2.5 + 10) / 2


def test_the_prior_follows_a_known_function_s_new_mean():
    s = FunctionStats()
    s.finish("f", 1.0)
    s.finish("f", 3.0)  # f's mean goes from 1 to 2: its old mean leaves the sum
    assert s.prior() == 2.0
    s.finish("g", 4.0)
    assert s.prior() == 3.0
    assert s.expected("new") == 3.0


def test_the_snapshot_shows_each_function_s_mean_and_the_prior_for_one_not_finished():
    s = FunctionStats()
    s.finish("f", 1.0)
    s.finish("h", 3.0)
    s.arrive("g", 5.0)  # arrived, never finished: the prior, (1 + 3) / 2
    snap = s.snapshot()
    assert [snap[n]["expected_s"] for n in ("f", "h", "g")] == [1.0, 3.0, 2.0]
    assert [snap[n]["samples"] for n in ("f", "h", "g")] == [1, 1, 0]


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


def test_cpu_share_is_measured_per_function():
    s = FunctionStats()
    assert s.share("new") == 1.0  # a full core until measured
    s.finish("io", 1.0, 0.01)
    s.finish("io", 3.0, 0.03)
    s.finish("io", 2.0)  # no CPU measurement: not in the share
    assert s.share("io") == pytest.approx(0.01)
    s.finish("spin", 0.2, 0.25)  # clock granularity: never above one core
    assert s.share("spin") == 1.0
    assert s.snapshot()["io"]["cpu_share"] == pytest.approx(0.01)


def test_waiting_calls_share_a_core_and_cpu_bound_calls_do_not():
    sched = NodeScheduler(FC, cores=[1])
    _measured(sched, "sleep", 0.01)
    _measured(sched, "spin", 1.0)
    for i in range(3):
        sched.admit("spin", f"spin{i}", float(i))
    for i in range(10):
        sched.admit("sleep", f"sleep{i}", 10.0 + i)
    started = []
    while sched.can_start():
        started.append(sched.start(20.0))
    # One CPU-bound call on the core, and light calls beside it up to 8 calls per core.
    assert [c.payload for c in started] == ["spin0"] + [f"sleep{i}" for i in range(7)]
    assert all(c.core == 1 for c in started)
    assert sched.cores_table.load[1] == pytest.approx(1.07)
    sched.finish(started[0], 1.0, 1.0)
    nxt = sched.start(21.0)  # the next CPU-bound call fits beside the waiting ones
    assert nxt.payload == "spin1" and not sched.can_start()


def test_unknown_function_takes_a_whole_core():
    sched = NodeScheduler(FIFO, cores=[0, 1])
    for i in range(3):
        sched.admit("new", f"n{i}", float(i))
    n0, n1 = sched.start(3.0), sched.start(3.0)
    assert (n0.core, n1.core) == (0, 1) and n0.share == n1.share == 1.0
    assert not sched.can_start()


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
    assert sched.peek() is None and not sched.can_start()
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
    assert not sched.can_start()  # never more, although 0.1 + 0.x would fit by estimate
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
    assert not cpu.can_start()  # the GPU call's CPU side holds the only core
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
    assert not sched.can_start()  # core 0 is closed to it, core 1 has 0.4 left
    sched.observe(io0, 0.05, 0.5)  # the burst is over
    assert table.load[0] == pytest.approx(0.1) and table.overrun[0] == 0.0
    assert sched.start(2.0).core == 0
    sched.observe(io1, 1.0, 0.1)  # a burst in a call that mostly waits
    assert sched.stats.share("io") == 0.7
    sched.finish(io1, 1.0, 0.05)  # a finished call takes its overrun with it
    assert table.overrun[0] == 0.0 and table.load[0] == pytest.approx(0.75)


def test_a_cpu_share_between_two_readings_leaves_out_the_wait():
    from containers.cpu import CpuTimes, share_between

    assert share_between(CpuTimes(1.0), CpuTimes(1.25), 0.5) == pytest.approx(0.5)
    assert share_between(CpuTimes(1.0, 2.0), CpuTimes(1.25, 2.25), 0.5) == pytest.approx(1.0)
    assert share_between(CpuTimes(1.0, 2.0), CpuTimes(1.0, 2.5), 0.5) == 1.0  # all waiting
    assert share_between(CpuTimes(1.0), CpuTimes(1.0), 0.0) is None


def test_a_history_of_one_keeps_the_last_call_and_the_snapshot_shows_it():
    s = FunctionStats(history=1, window_s=60)
    s.arrive("f", 1.0)
    s.arrive("f", 2.0)
    s.finish("f", 4.0, cpu_s=1.0)
    s.finish("f", 2.0, cpu_s=1.0)  # only this one counts: 2 s, half of it on the CPU
    assert s.snapshot() == {
        "f": {
            "expected_s": 2.0,
            "samples": 1,
            "recent_calls": 2,
            "cpu_share": 0.5,
            "cpu_samples": 1,
        }
    }
    with pytest.raises(ValueError, match="must be positive"):
        FunctionStats(history=0)


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


def test_statistics_defaults_limits_and_the_share_cap():
    s = FunctionStats()  # the documented defaults: 10 durations, T = 60 s, 10 000 functions
    assert (s.history, s.window_s, s.max_functions) == (10, 60.0, 10_000)
    FunctionStats(history=1, window_s=0.5, max_functions=1)  # the smallest valid ones
    for bad in ({"window_s": 0.0}, {"max_functions": 0}, {"history": 0}):
        with pytest.raises(ValueError, match=r"^history, window_s and max_functions must be pos"):
            FunctionStats(**bad)
    s.finish("f", 1.0, cpu_s=0.2)
    assert s.share("f") == pytest.approx(0.2)  # measured over a run of exactly 1 s
    s.observed("f", 1.5)  # a sample above a whole core (counters' jitter) counts as one core
    assert s.share("f") == 1.0
    s.finish("g", 0.0, cpu_s=0.0)  # no time on the CPU to divide by: the share stays
    assert s.share("g") == 1.0
