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


def test_finished_offsets_above_an_unfinished_one_are_not_in_flight():
    t = OffsetTracker()
    t.received(0, 0)
    t.received(0, 1)
    t.finished(0, 1)  # finished, but above 0, which still runs
    assert t.in_flight == 1 and t.committable() == {0: 0}


def test_an_offset_taken_before_is_refused_running_or_finished():
    # Offsets 0..5 taken, 0..3 finished; then a rejoin's seek back delivers 2..5 again: none
    # is taken twice, and the running ones, finished once, free the position as before.
    t = OffsetTracker()
    assert all(t.received(0, o) for o in range(6))
    for o in range(4):
        t.finished(0, o)
    assert not any(t.received(0, o) for o in range(2, 6))
    assert t.in_flight == 2 and t.committable() == {0: 4}
    t.finished(0, 4)
    t.finished(0, 5)
    assert t.in_flight == 0 and t.committable() == {0: 6}
    assert t.received(0, 6) and t.received(1, 0)  # new offsets, and other partitions, are taken


def test_the_first_offset_committed_is_remembered():
    t = OffsetTracker()
    t.received(0, 0)
    t.committed(t.committable())  # position 0: nothing finished yet
    assert t.committable() == {}
    t.finished(0, 0)
    assert t.committable() == {0: 1}


def test_a_late_answer_to_an_older_commit_does_not_move_it_back():
    t = OffsetTracker()
    for o in range(5):
        t.received(0, o)
        t.finished(0, o)
    t.committed({0: 5})
    t.committed({0: 3})  # an earlier commit whose answer came last
    assert t.committable() == {}
