"""Call-sequence generation: counts, uniform window, seeded determinism, function mix."""

from __future__ import annotations

from collections import Counter

import pytest

from sebs_wrappers.scenario import call_count, split_counts, uniform_calls

ACTIONS = ["a", "b", "c"]
PARAMS = {"a": {"x": 1}, "b": {}, "c": {"y": [1]}}


def gen(**kw):
    base = dict(intensity=120, cores=2, window_s=60.0, seed=7, repetition=0)
    return uniform_calls(ACTIONS, PARAMS, **{**base, **kw})


def test_counts_follow_intensity_cores_and_window() -> None:
    assert call_count(120, 2, 60) == 240  # N = I * C for the paper's 60 s window
    assert call_count(30, 18, 60) == 540
    assert call_count(120, 2, 15) == 60  # same rate in a shorter window
    assert len(gen()) == 240
    assert len(gen(intensity=30, cores=4)) == 120


def test_times_are_sorted_inside_the_window_and_spread() -> None:
    calls = gen(window_s=10.0, intensity=600)
    times = [c.t for c in calls]
    assert times == sorted(times)
    assert all(0.0 <= t < 10.0 for t in times)
    # uniform: every second of the window gets a share (expected 20 of 200)
    per_second = Counter(int(t) for t in times)
    assert set(per_second) == set(range(10))
    assert all(8 <= n <= 35 for n in per_second.values())
    assert [c.seq for c in calls] == list(range(len(calls)))


def test_seeded_determinism_and_variation() -> None:
    assert gen() == gen()
    assert [c.t for c in gen()] != [c.t for c in gen(repetition=1)]
    assert [c.t for c in gen()] != [c.t for c in gen(seed=8)]
    assert [c.action for c in gen()] != [c.action for c in gen(repetition=1)]


def test_equal_mix_and_params_attached() -> None:
    calls = gen()
    assert Counter(c.action for c in calls) == {"a": 80, "b": 80, "c": 80}
    assert all(c.params == PARAMS[c.action] for c in calls)
    calls[0].params["mutated"] = True
    assert "mutated" not in PARAMS[calls[0].action]


def test_weighted_mix() -> None:
    calls = gen(weights=[2, 1, 1])
    assert Counter(c.action for c in calls) == {"a": 120, "b": 60, "c": 60}


@pytest.mark.parametrize(
    ("n", "weights", "expected"),
    [
        (10, [1, 1, 1], [4, 3, 3]),
        (7, [1, 0], [7, 0]),
        (0, [1, 2], [0, 0]),
        (5, [1, 1, 2], [1, 1, 3]),
    ],
)
def test_split_counts(n: int, weights: list[float], expected: list[int]) -> None:
    assert split_counts(n, weights) == expected


def test_bad_input() -> None:
    with pytest.raises(ValueError):
        split_counts(3, [0, 0])
    with pytest.raises(ValueError):
        uniform_calls([], {}, intensity=1, cores=1)
    with pytest.raises(ValueError):
        gen(window_s=0)
