"""Intra-container concurrency in the node scheduler (pure logic, no clock).

An action with ``limits.concurrency`` N > 1: the call that starts its container takes a
whole core; up to N - 1 more of its waiting calls join that container without a core of
their own, best (priority, order) first, and the core is free once the last one leaves.
"""

from __future__ import annotations

import pytest

from invoker.scheduler import NodeScheduler
from policies import FIFO, OPENWHISK, SEPT

G = ("guest", "guest/sleepy", "1-abc")  # a group: the calls that may share a container


def test_calls_join_a_running_container_up_to_its_limit_on_one_core():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0])
    for i in range(4):
        sched.admit("guest/sleepy", f"c{i}", float(i), group=G, limit=3)
    first = sched.start(10.0)
    assert sched.joining() is first.shared and first.core == 0
    second, third = sched.start(10.0), sched.start(10.0)
    assert [c.payload for c in (first, second, third)] == ["c0", "c1", "c2"]
    assert {c.shared for c in (first, second, third)} == {first.shared}
    assert first.shared.calls == 3
    assert sched.cores_table.calls[0] == 1  # one container on the core, not three calls
    assert not sched.can_start()  # the fourth waits: the container is full, the core held
    assert sched.queued == 1 and sched.running == 3
    sched.finish(second, 1.0)
    assert sched.joining() is first.shared
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
    assert not sched.can_start() and sched.joining() is None


def test_joining_calls_go_in_the_policys_order_among_the_actions_calls():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0])
    # Received at the same time, numbered out of admission order: receipt order decides.
    for order, name in ((5, "late"), (1, "first"), (3, "middle"), (4, "next")):
        sched.admit("guest/sleepy", name, 0.0, order, group=G, limit=3)
    started = [sched.start(1.0).payload for _ in range(3)]
    assert started == ["first", "middle", "next"]
    assert not sched.can_start()


def test_a_waiting_call_of_another_action_does_not_stop_joins_nor_get_the_core():
    sched: NodeScheduler[str] = NodeScheduler(SEPT, cores=[0])
    sched.stats.finish("other", 0.5)  # shorter: SEPT puts it first
    sched.stats.finish("guest/sleepy", 1.0)
    sched.admit("guest/sleepy", "g0", 0.0, group=G, limit=2)
    g0 = sched.start(0.0)
    sched.admit("other", "o", 1.0)
    sched.admit("guest/sleepy", "g1", 2.0, group=G, limit=2)
    assert sched.peek().payload == "g1" and sched.joining() is g0.shared
    g1 = sched.start(2.0)
    assert g1.shared is g0.shared
    assert not sched.can_start()  # "other" waits for the core the container holds
    sched.finish(g0, 1.0)
    assert not sched.can_start()  # one call still in the container: the core stays held
    sched.finish(g1, 1.0)
    o = sched.start(3.0)
    assert o.payload == "o" and o.core == 0


def test_a_closed_container_takes_no_more_and_the_next_call_starts_its_own():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0, 1])
    for i in range(3):
        sched.admit("guest/sleepy", f"c{i}", float(i), group=G, limit=3)
    first = sched.start(1.0)
    sched.close(first.shared)  # e.g. a call in it failed: its container is going
    assert sched.joining() is None
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
    assert sched.queued == 0 and not sched.can_start()


def test_limit_below_one_is_refused():
    sched: NodeScheduler[str] = NodeScheduler(FIFO, cores=[0])
    with pytest.raises(ValueError):
        sched.admit("f", "x", 0.0, group=G, limit=0)
