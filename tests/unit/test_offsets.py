"""Offsets are committed up to the lowest unfinished activation, never past it."""

from invoker.offsets import OffsetTracker


def test_commits_stop_at_the_lowest_unfinished_offset():
    t = OffsetTracker()
    for o in range(5):
        t.received(0, o)
    assert t.committable() == {0: 0}
    t.finished(0, 1)
    t.finished(0, 2)
    assert t.committable() == {0: 0}
    t.finished(0, 0)
    assert t.committable() == {0: 3}
    t.committed({0: 3})
    assert t.committable() == {}
    t.finished(0, 4)
    t.finished(0, 3)
    assert t.committable() == {0: 5}
    assert t.in_flight == 0


def test_partitions_are_independent():
    t = OffsetTracker()
    t.received(0, 10)
    t.received(1, 3)
    t.finished(1, 3)
    assert t.committable() == {0: 10, 1: 4}
