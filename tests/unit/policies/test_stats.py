"""The statistics the policies read (policies/stats.py): expected times, priors, arrival
windows, CPU shares, bounds and defaults."""

import pytest

from policies import FunctionStats


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
