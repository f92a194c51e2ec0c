"""Pure container placement: warm, prewarm, cold, LRU eviction (prewarmed containers last),
waiting; keep-alive by footprint (kept containers at what they use, eviction by value)."""

from containers.placement import (
    How,
    Placement,
    SlotState,
    SlotView,
    WarmKey,
    charged_mb,
    place,
    used_memory,
)

K = WarmKey("guest", "guest/a", "1-x")
OTHER = WarmKey("guest", "guest/b", "1-y")


def slot(state, key=None, kind="python:3.11", memory=256, last=0.0):
    return SlotView(kind, memory, state, key, last)


def test_warm_container_of_same_namespace_and_revision_first():
    slots = {
        1: slot(SlotState.PREWARM),
        2: slot(SlotState.IDLE, K, last=5),
        3: slot(SlotState.IDLE, K, last=9),
    }
    p = place(slots, K, "python:3.11", 256, 2048)
    assert p.how is How.WARM and p.slot == 3


def test_other_revision_or_namespace_is_not_warm():
    slots = {1: slot(SlotState.IDLE, WarmKey("guest", "guest/a", "2-z"))}
    assert place(slots, K, "python:3.11", 256, 2048).how is How.COLD
    slots = {1: slot(SlotState.IDLE, WarmKey("alice", "guest/a", "1-x"))}
    assert place(slots, K, "python:3.11", 256, 2048).how is How.COLD


def test_busy_warm_container_is_not_reused_and_prewarm_needs_same_kind_and_memory():
    slots = {
        1: slot(SlotState.BUSY, K),
        2: slot(SlotState.PREWARM, memory=128),
        3: slot(SlotState.PREWARM, kind="nodejs:20"),
        4: slot(SlotState.PREWARM),
    }
    p = place(slots, K, "python:3.11", 256, 2048)
    assert p.how is How.PREWARM and p.slot == 4


def test_evicts_least_recently_used_idle_containers_only_as_needed():
    slots = {
        1: slot(SlotState.IDLE, OTHER, last=3),
        2: slot(SlotState.PAUSED, OTHER, last=1),
        3: slot(SlotState.BUSY, OTHER, last=0),
        4: slot(SlotState.PREWARM, last=0),
    }
    p = place(slots, K, "python:3.11", 512, 1024)
    assert p.how is How.COLD and p.evict == (2, 1)


def test_prewarmed_containers_are_evicted_after_every_idle_one_oldest_first():
    slots = {
        1: slot(SlotState.PREWARM, kind="nodejs:20", last=5),
        2: slot(SlotState.PREWARM, kind="nodejs:20", last=2),
        3: slot(SlotState.IDLE, OTHER, last=9),
        4: slot(SlotState.BUSY, OTHER, last=0),
        5: slot(SlotState.STARTING, last=0),
    }
    # All 1280 MB held: 768 by evictable containers, 512 by busy and starting ones.
    assert place(slots, K, "python:3.11", 256, 1280).evict == (3,)
    assert place(slots, K, "python:3.11", 512, 1280).evict == (3, 2)
    assert place(slots, K, "python:3.11", 768, 1280).evict == (3, 2, 1)
    assert place(slots, K, "python:3.11", 1024, 1280) is None  # never busy or starting ones


def test_waits_when_busy_containers_hold_the_memory():
    slots = {1: slot(SlotState.BUSY, OTHER), 2: slot(SlotState.STARTING)}
    assert place(slots, K, "python:3.11", 256, 512) is None


def test_an_unpaused_warm_container_first_then_the_latest_used_then_the_lowest_id():
    slots = {
        1: slot(SlotState.PAUSED, K, last=9),
        2: slot(SlotState.IDLE, K, last=5),
        3: slot(SlotState.IDLE, K, last=7),
        4: slot(SlotState.IDLE, K, last=7),
    }
    assert place(slots, K, "python:3.11", 256, 2048).slot == 3
    del slots[3], slots[4]
    assert place(slots, K, "python:3.11", 256, 2048).slot == 2  # idle before paused
    del slots[2]
    assert place(slots, K, "python:3.11", 256, 2048).slot == 1  # a paused one still serves


def test_a_call_that_may_not_take_a_prewarmed_container_gets_a_new_one():
    slots = {1: slot(SlotState.PREWARM)}
    p = place(slots, K, "python:3.11", 256, 2048, prewarm=False)
    assert p.how is How.COLD and p.slot is None


# -- keep-alive by footprint ------------------------------------------------------------------


def kept(state, key=None, footprint=None, value=0.0, last=0.0, memory=256):
    return SlotView("python:3.11", memory, state, key, last, footprint, value)


def test_a_kept_container_counts_at_its_footprint_a_running_one_at_its_limit():
    busy = kept(SlotState.BUSY, OTHER, footprint=30)  # a footprint left from before its call
    assert [charged_mb(s) for s in (busy, kept(SlotState.IDLE, OTHER, footprint=30))] == [256, 30]
    assert charged_mb(kept(SlotState.PAUSED, OTHER)) == 256  # not measured yet
    assert charged_mb(kept(SlotState.PREWARM, footprint=20)) == 20
    # 7 idle containers at 30 MB beside a busy one: a new 256 MB call fits in 2048 MB
    # without evicting any; counted at their limits, one would go.
    slots = {i: kept(SlotState.IDLE, WarmKey("guest", f"guest/{i}", "1"), 30) for i in range(7)}
    slots[9] = kept(SlotState.BUSY, OTHER)
    assert used_memory(slots.values()) == 7 * 30 + 256
    assert place(slots, K, "python:3.11", 256, 2048) == Placement(How.COLD, None)
    limits = {i: SlotView("python:3.11", 256, s.state, s.key, 0.0) for i, s in slots.items()}
    assert place(limits, K, "python:3.11", 256, 2048).evict == (0,)


def test_a_warm_container_grows_back_to_its_limit_evicting_others_or_waiting():
    slots = {
        1: kept(SlotState.IDLE, K, footprint=40),
        2: kept(SlotState.IDLE, OTHER, footprint=200, value=5.0),
        3: kept(SlotState.IDLE, OTHER, footprint=200, value=2.0),
        4: kept(SlotState.BUSY, OTHER, memory=512),
    }
    # 952 of 1000 MB held; running slot 1 needs 216 more: the lower-valued kept one goes.
    assert place(slots, K, "python:3.11", 256, 1000) == Placement(How.WARM, 1, (3,))
    assert place(slots, K, "python:3.11", 256, 1200) == Placement(How.WARM, 1)
    alone = {1: slots[1], 4: slots[4]}  # nothing else to evict: it waits
    assert place(alone, K, "python:3.11", 256, 600) is None


def test_kept_containers_are_evicted_by_value_before_recency_prewarmed_ones_last():
    slots = {
        1: kept(SlotState.IDLE, OTHER, footprint=50, value=9.0, last=1),
        2: kept(SlotState.PAUSED, OTHER, footprint=50, value=1.0, last=8),
        3: kept(SlotState.PREWARM, footprint=50, value=0.0, last=0),
        4: kept(SlotState.BUSY, OTHER, memory=850),
    }
    assert place(slots, K, "python:3.11", 100, 1000).evict == (2, 1)
    assert place(slots, K, "python:3.11", 150, 1000).evict == (2, 1, 3)
