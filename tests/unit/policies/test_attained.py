"""The Gittins index from a sample, the bounded per-function history and the weight tiers
of the attained-service policies (issue 40)."""

import itertools
import math

import pytest

from policies.attained import (
    AGE_FLOOR_S,
    AGE_GRID,
    HIGH,
    LOW,
    MID,
    TAIL,
    Aged,
    Attained,
    DurationHistory,
    aged_deadline,
    aged_ranking,
    aged_weights,
    cpu_weights,
    gittins_index,
    partial_weight,
)


def index(durations: list[float], age: float) -> float:
    s = sorted(durations)
    return gittins_index(s, [0.0, *itertools.accumulate(s)], age)


def test_the_index_of_equal_durations_is_one_over_what_is_left():
    assert index([2.0, 2.0, 2.0], 0.0) == pytest.approx(0.5)
    assert index([2.0, 2.0, 2.0], 1.5) == pytest.approx(2.0)  # it runs ahead of a new one


def test_the_index_takes_the_best_quantum_and_falls_once_the_short_calls_are_outrun():
    # [1, 10] at 0: to 1, P 1/2 over E[min(X, 1)] = 1 -> 0.5; to 10, 1 over 5.5.
    assert index([1.0, 10.0], 0.0) == pytest.approx(0.5)
    assert index([1.0, 10.0], 2.0) == pytest.approx(1 / 8)  # only the long one is left


def test_a_call_past_every_sample_gets_the_index_of_a_pareto_tail_at_its_age():
    assert index([1.0, 2.0], 4.0) == pytest.approx(TAIL / 4.0)
    assert index([1.0, 2.0], 40.0) > index([1.0, 100.0], 40.0)  # not one 60 s ahead of it


def test_the_history_keeps_a_window_per_function_and_forgets_the_least_recent():
    h = DurationHistory(samples=4, min_samples=1, max_functions=2)
    for d in (100.0, 1.0, 1.0, 1.0, 1.0):
        h.add("f", d)
    assert h.samples_of("f") == 4
    assert h.index("f", 0.0) == pytest.approx(1.0)  # the 100 s call left the window
    h.add("g", 1.0)
    h.add("h", 1.0)
    assert len(h) == 2 and h.samples_of("f") == 0


def test_a_function_with_few_samples_takes_the_pooled_prior():
    h = DurationHistory(min_samples=3)
    assert h.index("new", 0.0) == math.inf  # nothing finished yet: all new calls alike
    for _ in range(3):
        h.add("short", 1.0)
    h.add("long", 100.0)
    assert h.index("long", 0.0) == pytest.approx(index([1.0, 1.0, 1.0, 100.0], 0.0))
    assert h.index("short", 0.0) == pytest.approx(1.0)


def test_the_sorted_window_is_rebuilt_once_a_sixteenth_of_it_is_new():
    h = DurationHistory(samples=32, min_samples=1)
    for _ in range(32):
        h.add("f", 1.0)
    assert h.index("f", 0.0) == pytest.approx(1.0)
    h.add("f", 2.0)  # 1 of 32 new: the cached index stands
    assert h.index("f", 0.0) == pytest.approx(1.0)
    h.add("f", 2.0)
    assert h.index("f", 0.0) < 1.0


def test_ages_share_an_index_within_a_step_of_the_grid():
    h = DurationHistory(min_samples=1)
    for d in (0.1, 1.0, 10.0):
        h.add("f", d)
    assert h.index("f", AGE_FLOOR_S / 2) == h.index("f", 0.0)
    step = AGE_FLOOR_S * AGE_GRID**100 * 1.001  # just past a grid point: 0.13 s
    assert h.index("f", step) == h.index("f", step * 1.04) != h.index("f", step * 1.06)


def test_weights_come_in_three_tiers_of_cores():
    ranked = [(key, 1.0) for key in "abcde"]
    assert cpu_weights(ranked, 2) == {"a": HIGH, "b": HIGH, "c": MID, "d": MID, "e": LOW}
    assert 1 <= LOW < MID < HIGH <= 10_000


def test_calls_that_mostly_wait_fill_a_tier_by_the_cpu_they_use():
    ranked = [("a", 0.5), ("b", 0.5), ("c", 0.5), ("d", 1.0), ("e", 0.1)]
    assert cpu_weights(ranked, 1) == {"a": HIGH, "b": HIGH, "c": MID, "d": MID, "e": LOW}


def test_a_bad_ordering_is_refused():
    with pytest.raises(ValueError):
        Attained("srpt")
    with pytest.raises(ValueError):
        Attained("las", quantum_s=0.0)
    for bad in ({"slack": 0.0}, {"overdue_share": 0.0}, {"overdue_share": 1.5}):
        with pytest.raises(ValueError):
            Attained("gittins-aged", **bad)


def test_the_deadline_is_the_receipt_plus_slack_times_the_rank():
    assert aged_deadline(10.0, 0.5, 4.0) == pytest.approx(18.0)  # rank 2 s
    assert aged_deadline(10.0, math.inf, 4.0) == 10.0  # nothing finished: receipt order


# A call of a long function received long ago (index 0.01: rank 100 s), and new short ones.
OLD = Aged("old", received=0.0, gittins=0.01)
NEW = [Aged(f"new{i}", received=499.0, gittins=1.0, order=i + 1) for i in range(4)]


def keys(ranking: tuple[list[tuple[str, float]], tuple[str, float] | None]) -> list[str]:
    ranked, _ = ranking
    return [key for key, _ in ranked]


def test_calls_are_ranked_by_index_until_their_deadline():
    ranking = aged_ranking([OLD, *NEW], 300.0, 4, 4.0, 0.25)  # its deadline is 400
    assert keys(ranking) == ["new0", "new1", "new2", "new3", "old"]
    assert ranking[1] is None


def test_a_late_call_goes_first_within_its_share_of_the_cores():
    ranking = aged_ranking([*NEW, OLD], 500.0, 4, 4.0, 0.25)
    assert keys(ranking) == ["old", "new0", "new1", "new2", "new3"]
    assert aged_weights([*NEW, OLD], 500.0, 4, 4.0, 0.25)["old"] == HIGH  # gittins: MID
    # A second late call is past the quarter of the 4 cores: it goes by its index.
    older = Aged("older", received=-50.0, gittins=0.01, order=9)
    ranking = aged_ranking([*NEW, OLD, older], 500.0, 4, 4.0, 0.25)
    assert keys(ranking) == ["older", "new0", "new1", "new2", "new3", "old"]
    assert ranking[1] is None
    # Late calls that use half a core each: two fill the quarter of 4 cores.
    halves = [OLD._replace(share=0.5), older._replace(share=0.5)]
    assert keys(aged_ranking([*NEW, *halves], 500.0, 4, 4.0, 0.25))[:3] == ["older", "old", "new0"]


def test_on_one_core_a_late_call_gets_a_quarter_of_it_not_the_core():
    """A quarter of one core is less than a call: the late call gets the weight that gives
    it a quarter of the core beside the best-ranked call (which keeps HIGH), not HIGH."""
    ranking = aged_ranking([*NEW, OLD], 500.0, 1, 4.0, 0.25)
    assert keys(ranking) == ["new0", "new1", "new2", "new3"]
    assert ranking[1] == ("old", pytest.approx(0.25))
    weights = aged_weights([*NEW, OLD], 500.0, 1, 4.0, 0.25)
    assert weights["new0"] == HIGH
    assert weights["old"] == partial_weight(0.25) == round(HIGH / 3)
    assert weights["old"] / (weights["old"] + HIGH) == pytest.approx(0.25, abs=1e-4)
    # On 7 cores, 1.75: one late call whole, the next in part.
    older = Aged("older", received=-50.0, gittins=0.01, order=9)
    ranking = aged_ranking([*NEW, OLD, older], 500.0, 7, 4.0, 0.25)
    assert keys(ranking)[0] == "older" and ranking[1] == ("old", pytest.approx(0.75))


def test_a_partial_weight_is_at_most_high_for_half_a_core():
    assert partial_weight(0.5) == partial_weight(0.9) == HIGH
    assert partial_weight(0.0) == 1


def test_without_a_share_every_call_goes_by_its_deadline():
    ranking = aged_ranking([*NEW, OLD], 300.0, 4, 4.0, None)
    assert keys(ranking) == ["old", "new0", "new1", "new2", "new3"]
