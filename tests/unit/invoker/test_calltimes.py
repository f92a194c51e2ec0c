"""Per-function response-time and stretch histograms (invoker/calltimes.py): fixed buckets,
upper bounds inclusive, bounded number of functions, snapshots that are copies."""

import pytest

from invoker.calltimes import RESPONSE_EDGES_S, STRETCH_EDGES, CallTimes


def bucket(edges: tuple[float, ...], counts: list[int]) -> list[str]:
    """The buckets that hold calls, as labels (``<=edge`` or ``>last``)."""
    labels = [f"<={e:g}" for e in edges] + [f">{edges[-1]:g}"]
    return [label for label, n in zip(labels, counts, strict=True) for _ in range(n)]


def test_buckets_take_their_upper_bound_and_the_last_takes_what_is_above():
    times = CallTimes()
    times.observe("f", 0.01, 0.01)  # exactly an edge: that bucket; stretch 1
    times.observe("f", 0.0100001, 0.005)  # just above: the next; stretch just above 2
    times.observe("f", 400.0, 1.0)  # beyond the last edge; stretch 400
    snap = times.snapshot()["f"]
    assert bucket(RESPONSE_EDGES_S, snap["response"]) == ["<=0.01", "<=0.025", ">300"]
    assert bucket(STRETCH_EDGES, snap["stretch"]) == ["<=1.1", "<=3", "<=1000"]
    assert len(snap["response"]) == len(RESPONSE_EDGES_S) + 1
    assert len(snap["stretch"]) == len(STRETCH_EDGES) + 1


def test_means_and_maximum():
    times = CallTimes()
    times.observe("f", 2.0, 1.0)  # waited 1 s: stretch 2
    times.observe("f", 4.0, 1.0)  # stretch 4
    snap = times.snapshot()["f"]
    assert snap["calls"] == 2
    assert snap["meanResponseS"] == pytest.approx(3.0)
    assert snap["maxResponseS"] == pytest.approx(4.0)
    assert snap["meanStretch"] == pytest.approx(3.0)


def test_a_call_without_processing_time_has_a_response_time_but_no_stretch():
    times = CallTimes()
    times.observe("f", 0.5, 0.0)
    snap = times.snapshot()["f"]
    assert snap["calls"] == 1 and sum(snap["response"]) == 1
    assert sum(snap["stretch"]) == 0 and snap["meanStretch"] is None


def test_stretch_is_at_least_one_despite_clock_rounding():
    times = CallTimes()
    times.observe("f", 0.999, 1.0)
    assert times.snapshot()["f"]["meanStretch"] == 1.0


def test_bounded_the_least_recently_finished_function_is_forgotten():
    times = CallTimes(max_functions=2)
    times.observe("a", 1.0, 1.0)
    times.observe("b", 1.0, 1.0)
    times.observe("a", 1.0, 1.0)  # a is now the most recent
    times.observe("c", 1.0, 1.0)  # b goes
    assert len(times) == 2 and times.forgotten == 1
    assert list(times.snapshot()) == ["c", "a"]  # most recently finished first
    assert list(times.snapshot(limit=1)) == ["c"]


def test_a_snapshot_is_a_copy():
    times = CallTimes()
    times.observe("f", 1.0, 1.0)
    snap = times.snapshot()
    times.observe("f", 1.0, 1.0)
    assert snap["f"]["calls"] == 1 and sum(snap["f"]["response"]) == 1


def test_max_functions_must_be_positive():
    with pytest.raises(ValueError):
        CallTimes(max_functions=0)
