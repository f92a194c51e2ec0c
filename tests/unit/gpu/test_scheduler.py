"""Hand-made scenarios for the pure GPU scheduler, cache and estimator (no torch, no I/O)."""

from __future__ import annotations

import pytest

from gpu.cache import CacheView, DeviceCache, ModelTooLarge, victims_age
from gpu.cfs import CFSAffinityScheduler
from gpu.estimates import DeviceTypePrior, Estimator, LinearFit
from gpu.exclusive import ExclusiveScheduler
from gpu.policies import make_scheduler
from gpu.scheduler import DeviceSlot, GpuScheduler, LALBScheduler, LBScheduler, Request
from whisk.clock import VirtualClock

MB = 1 << 20


def est(upload_s: float = 1.0, infer_s: float = 0.1) -> Estimator:
    """Estimates fixed by observation: every upload ``upload_s``, every inference ``infer_s``."""
    e = Estimator(priors={"t": DeviceTypePrior(copy_bw=1e9, compute_bw=1e9)})
    for size in (10 * MB, 20 * MB):
        e.observe_upload(size, "t", upload_s)
    for m in "ABCDEFGH":
        e.observe_infer(m, 10 * MB, 1, "t", infer_s)
    return e


def make(policy: str, n: int = 2, cap_mb: int = 30, clock=None, e=None, **kw):
    clock = clock or VirtualClock()
    slots = [DeviceSlot(i, cap_mb * MB, "t") for i in range(n)]
    return make_scheduler(policy, slots, clock, estimator=e or est(), **kw), clock


def req(model: str, client: str = "", size_mb: int = 10, t: float = 0.0) -> Request:
    return Request(model, size_mb * MB, 1, client or f"fn-{model}", t)


def run(s, *reqs: Request):
    for r in reqs:
        s.submit(r)
    return s.schedule()


# -- cache ---------------------------------------------------------------------------------


def test_lru_victims_are_least_recently_used_and_pins_protect() -> None:
    c = DeviceCache(30 * MB)
    for t, k in enumerate("ABC"):
        c.insert(k, 10 * MB, float(t))
    c.touch("A", 5.0)
    assert c.plan("D", 10 * MB) == ["B"]
    assert c.plan("D", 20 * MB) == ["B", "C"]
    c.pin("B")
    assert c.plan("D", 10 * MB) == ["C"]
    c.pin("C")
    c.pin("A")
    assert c.plan("D", 10 * MB) is None  # everything in use: wait, never evict a pinned model


def test_a_device_cache_keeps_sizes_pins_and_order_exactly() -> None:
    """The bookkeeping the scheduler trusts: a model that just fits, a re-insert that only
    touches, pins counted one by one, a pinned model never removed, the refusals' words."""
    with pytest.raises(ValueError, match="device capacity must be positive"):
        DeviceCache(0)
    assert DeviceCache(1).capacity == 1
    c = DeviceCache(20 * MB)
    c.insert("A", 10 * MB, 1.0)
    c.insert("B", 10 * MB, 2.0)
    assert c.free == 0 and c.plan("B", 10 * MB) == [] and c.plan("C", 10 * MB) == ["A"]
    c.insert("A", 10 * MB, 3.0)  # resident already: touched, not added
    a = c.get("A")
    assert a is not None and a.last_used == 3.0 and a.size == 10 * MB and a.pins == 0
    assert c.lru() == ["B", "A"] and c.used == 20 * MB
    with pytest.raises(RuntimeError, match=r"model C does not fit: evict first"):
        c.insert("C", 1, 4.0)
    c.pin("A")
    c.pin("A")
    c.unpin("A")
    assert c.get("A").pins == 1  # type: ignore[union-attr]
    with pytest.raises(RuntimeError, match=r"model A is pinned \(1\) and cannot be evicted"):
        c.remove("A")
    assert c.get("A") is not None and c.used == 20 * MB  # still there, still counted
    c.unpin("A")
    c.unpin("A")  # more unpins than pins: nothing goes below zero
    c.unpin("nope")  # not resident: nothing to do
    assert c.get("A").pins == 0  # type: ignore[union-attr]
    assert c.remove("B").key == "B" and c.used == 10 * MB
    assert c.clear() == ["A"] and c.used == 0 and len(c) == 0
    with pytest.raises(ModelTooLarge) as refused:
        c.plan("0123456789abcdef", 21 * MB)
    assert (refused.value.key, refused.value.size, refused.value.largest) == (
        "0123456789abcdef",
        21 * MB,
        20 * MB,
    )
    assert str(refused.value).startswith("model 0123456789ab needs 21.0 MiB")


def test_model_larger_than_any_device_is_refused_with_clear_error() -> None:
    view = CacheView([30 * MB, 40 * MB])
    with pytest.raises(ModelTooLarge, match=r"needs 50\.0 MiB but the largest GPU device has 40"):
        view.check_fits("big", 50 * MB)
    s, _ = make("lalb")
    with pytest.raises(ModelTooLarge):
        s.submit(req("Z", size_mb=31))


def test_cache_counts_loads_reloads_and_evictions() -> None:
    view = CacheView([20 * MB])
    view.admit(0, "A", 10 * MB, 0)
    view.admit(0, "B", 10 * MB, 1)
    assert view.admit(0, "C", 10 * MB, 2) == ["A"]
    view.admit(0, "A", 10 * MB, 3)
    assert (view.loads, view.reloads, view.evictions) == (4, 1, 2)
    assert view.holders("A") == {0} and view.holders("B") == set()


def test_cache_edges_the_words_of_its_refusals_and_what_listeners_hear() -> None:
    key = "0123456789abcdef"  # longer than the 12 characters an error shows
    with pytest.raises(ValueError) as bad:
        DeviceCache(0)
    assert str(bad.value) == "device capacity must be positive"
    c = DeviceCache(10)
    c.insert(key, 5, 1.0)
    assert c.get(key).last_used == 1.0  # type: ignore[union-attr]
    c.insert("B", 4, 2.0)
    assert c.plan("C", 2) == [key]  # one byte short: the oldest goes
    with pytest.raises(RuntimeError) as refused:
        c.insert("0123456789abcdefX", 2, 3.0)
    assert str(refused.value) == "model 0123456789ab does not fit: evict first"
    c.pin(key)
    assert c.plan("C", 6) is None  # B's 4 leave it one byte short: the pinned one stays
    with pytest.raises(RuntimeError) as pinned:
        c.remove(key)
    assert str(pinned.value) == "model 0123456789ab is pinned (1) and cannot be evicted"

    heard: list[tuple[str, int, float]] = []
    view = CacheView([10, 10])
    view.listeners.append(lambda k, n, now: heard.append((k, n, now)))
    view.admit(0, key, 6, 1.0)
    view.admit(1, key, 6, 2.0)
    assert view.plan(0, key, 6) == []  # resident: nothing to evict
    view.evict(0, key, 3.0)
    assert view.clear_device(1, 4.0) == [key]
    assert heard == [(key, 1, 1.0), (key, 2, 2.0), (key, 1, 3.0), (key, 0, 4.0)]
    view.admit(0, key, 6, 5.0)
    view.evict(0, key, 6.0)
    view.admit(0, key, 6, 7.0)
    assert (view.loads, view.reloads) == (4, 3)
    with pytest.raises(ModelTooLarge) as large:
        view.admit(1, "0123456789abcdefZ", 11, 8.0)
    assert large.value.key == "0123456789abcdefZ"
    view.pin(0, key)
    with pytest.raises(RuntimeError) as full:
        view.admit(0, "0123456789abcdefY", 6, 9.0)
    assert str(full.value) == "device 0: pinned models leave no room for 0123456789ab"


def test_victims_age_is_the_most_recent_use_among_them() -> None:
    c = DeviceCache(10)
    c.insert("A", 3, 1.0)
    c.insert("B", 3, 5.0)
    assert victims_age(c, []) == float("-inf")  # nothing evicted: the cheapest
    assert victims_age(c, ["A"]) == 1.0
    assert victims_age(c, ["A", "B", "gone"]) == 5.0


# -- LB --------------------------------------------------------------------------------------


def test_lb_sends_head_to_longest_idle_device_ignoring_locality() -> None:
    s, clock = make("lb")
    (d,) = run(s, req("A"))
    assert (d.device, d.hit) == (0, False)
    clock.advance_to(1)
    s.complete(0)
    # device 1 has been idle longer than device 0, so A goes there: a false miss
    (d,) = run(s, req("A"))
    assert (d.device, d.hit, d.false_miss) == (1, False, True)
    assert isinstance(s, LBScheduler)


# -- LALB ------------------------------------------------------------------------------------


def test_lalb_idle_hit_beats_longest_idle() -> None:
    s, clock = make("lalb")
    run(s, req("A"))
    clock.advance_to(1)
    s.complete(0)
    (d,) = run(s, req("A"))
    assert (d.device, d.hit) == (0, True)


def test_busy_hit_wins_when_upload_is_expensive() -> None:
    s, clock = make("lalb", e=est(upload_s=5.0, infer_s=0.1))
    (_d0,) = run(s, req("A"))  # miss on 0, busy until ~5.1
    clock.advance_to(5.0)
    assert run(s, req("A")) == []  # 0.1 left + 0.1 < 5 + 0.1: wait on device 0 (local queue)
    assert len(s.state[0].local) == 1 and not s.state[1].busy
    s.complete(0)
    (d,) = s.schedule()
    assert (d.device, d.hit) == (0, True)


def test_idle_miss_wins_when_busy_device_is_far_from_done() -> None:
    s, clock = make("lalb", e=est(upload_s=0.5, infer_s=2.0))
    run(s, req("A"))  # busy until 2.5
    clock.advance_to(0.1)
    (d,) = run(s, req("A"))  # busy hit 2.4 + 2.0 > miss 0.5 + 2.0
    assert (d.device, d.hit, d.false_miss) == (1, False, True)


def test_local_queue_is_drained_before_global_queue() -> None:
    s, clock = make("lalb", n=1, e=est(upload_s=5.0, infer_s=0.1))
    run(s, req("A"))
    clock.advance_to(4.0)
    s.submit(req("B", t=4.0))  # no idle device: stays in the global queue
    s.submit(req("A", t=4.1))  # behind B in arrival order
    assert s.schedule() == []
    s.complete(0)
    (d,) = s.schedule()
    assert d.request.model == "B"  # the head of the global queue, in order (no O3)
    assert isinstance(s, LALBScheduler) and s.o3_limit == 0


def test_local_queue_runs_first_when_device_frees() -> None:
    s, clock = make("lalb", n=2, e=est(upload_s=5.0, infer_s=0.1))
    run(s, req("A"), req("B"))  # A on 0, B on 1, both missing
    clock.advance_to(5.0)
    run(s, req("A", t=5.0))  # busy hit on 0 → local queue of device 0
    s.submit(req("C", t=5.01))  # older-than-nothing global request, arrived later
    s.complete(0)
    (d,) = s.schedule()
    assert (d.request.model, d.device, d.hit) == ("A", 0, True)


def test_o3_jumps_idle_hits_ahead_and_counts_skips() -> None:
    s, clock = make("lalbo3", n=2, e=est(upload_s=1.0, infer_s=0.1), o3_limit=2)
    run(s, req("A"), req("B"))  # A on 0, B on 1
    clock.advance_to(2)
    s.submit(req("C", t=2))  # head: no device holds C
    s.submit(req("B", t=2.1))
    s.complete(1)  # device 1 idle and holds B
    (d,) = s.schedule()
    assert (d.request.model, d.device, d.hit, d.out_of_order) == ("B", 1, True, True)
    head = s._head()
    assert head is not None and head.model == "C" and s.skips(head) == 1


def _head_passed_once() -> GpuScheduler:
    """O3 with a limit of 1: A on device 0, B on 1; then C (on no device) waits ahead of two
    B calls, and one B passes it on device 1, which leaves C at its limit."""
    s, clock = make("lalbo3", n=2, cap_mb=10, e=est(upload_s=1.0, infer_s=0.1), o3_limit=1)
    run(s, req("A"), req("B"))
    clock.advance_to(2)
    s.submit(req("C", t=2))
    s.submit(req("B", t=2.1))
    s.submit(req("B", t=2.2))
    s.complete(1)
    (d,) = s.schedule()
    assert d.out_of_order and d.request.model == "B"  # C skipped once: at the limit now
    clock.advance_to(3)
    return s


def test_o3_limit_forces_the_starved_head_out_hit_or_miss() -> None:
    s = _head_passed_once()
    s.complete(1)
    (d,) = s.schedule()
    # a B request still waits and device 1 holds B, but C has reached the limit: C goes first
    assert (d.request.model, d.device, d.hit, d.victims) == ("C", 1, False, ("B",))


def test_o3_limit_zero_is_plain_lalb() -> None:
    s, clock = make("lalbo3", n=2, e=est(upload_s=1.0, infer_s=0.1), o3_limit=0)
    run(s, req("A"), req("B"))
    clock.advance_to(2)
    s.submit(req("C", t=2))
    s.submit(req("B", t=2.1))
    s.complete(1)
    (d,) = s.schedule()
    assert (d.request.model, d.out_of_order) == ("C", False)


def test_miss_prefers_free_room_then_least_recently_used_victims() -> None:
    s, clock = make("lalb", n=2, cap_mb=20)
    run(s, req("A"), req("B"))
    clock.advance_to(2)
    s.complete(0)
    s.complete(1)
    (d,) = run(s, req("C"))  # both have 10 MB free: no victims needed
    assert d.victims == ()
    clock.advance_to(4)
    s.complete(d.device)
    other = 1 - d.device
    run(s, req("A" if d.device == 1 else "B"))  # refresh the other device's model
    clock.advance_to(5)
    s.complete(other)
    (d2,) = run(s, req("D", size_mb=20))  # must evict; the device used least recently loses
    assert d2.device == d.device


def test_reset_device_requeues_local_queue_and_forgets_models() -> None:
    s, clock = make("lalb", e=est(upload_s=5.0, infer_s=0.1))
    run(s, req("A"))
    clock.advance_to(5.0)
    run(s, req("A", t=5))
    assert len(s.state[0].local) == 1
    lost = s.reset_device(0)
    assert lost is not None and lost.model == "A"
    assert s.cache.holders("A") == set() and s.pending == 1
    (d,) = s.schedule()
    assert d.hit is False


def test_the_schedulers_refuse_what_cannot_work_in_words() -> None:
    with pytest.raises(ValueError) as none:
        LBScheduler([], VirtualClock())
    assert str(none.value) == "a GPU scheduler needs at least one device"
    with pytest.raises(ValueError) as negative:
        make("lalbo3", o3_limit=-1)
    assert str(negative.value) == "o3_limit must be >= 0"
    s, _ = make("lalb")
    with pytest.raises(RuntimeError) as idle:
        s.complete(1)
    assert str(idle.value) == "device 1 completed but was not running anything"


def test_requests_are_numbered_from_zero_and_a_number_given_is_kept() -> None:
    s, _ = make("lalb", n=1)
    first, second, kept = req("A"), req("B"), req("C")
    kept.seq = 0  # a request that had its number (as a retry does)
    for r in (first, second, kept):
        s.submit(r)
    assert (first.seq, second.seq, kept.seq) == (0, 1, 0)


def test_a_retry_goes_back_to_its_arrival_position_with_its_attempts_counted() -> None:
    s, _ = make("lalb", n=1)
    (d,) = run(s, req("A"))
    s.submit(req("B", t=0.5))
    lost = s.reset_device(0)
    assert lost is d.request
    s.requeue(lost)
    s.requeue(lost)  # a second crash
    assert lost.attempts == 2 and s._head() is lost and s.pending == 2


def test_a_reset_device_is_idle_with_nothing_promised_and_listeners_hear_when() -> None:
    s, clock = make("lalb", e=est(upload_s=5.0, infer_s=0.1))
    heard: list[tuple[str, int, float]] = []
    s.cache.listeners.append(lambda k, n, now: heard.append((k, n, now)))
    run(s, req("A"))
    clock.advance_to(5.0)
    run(s, req("A", t=5))  # a busy hit: device 0's local queue
    assert s.state[0].local_est > 0
    clock.advance_to(6.0)
    s.reset_device(0)
    assert s.state[0].local_est == 0.0 and not s.state[0].busy and 0 in s.idle_devices()
    assert heard[-1] == ("A", 0, 6.0)


def test_estimates_of_a_hit_a_miss_and_a_cold_start() -> None:
    s, clock = make("lalb", n=1, e=est(upload_s=1.0, infer_s=0.25))
    (miss,) = run(s, req("A"))
    assert (miss.hit, miss.false_miss) == (False, False)  # nowhere else: not a false miss
    assert miss.estimate_s == pytest.approx(1.25)
    clock.advance_to(2)
    s.complete(0)
    (hit,) = run(s, req("A", t=2))
    assert (hit.hit, hit.false_miss, hit.estimate_s) == (True, False, pytest.approx(0.25))
    e = est(upload_s=1.0, infer_s=0.25)
    x, _ = make("exclusive", n=1, e=e)
    (cold,) = run(x, req("A", client="alice"))
    assert cold.cold_start
    assert cold.estimate_s == pytest.approx(e.cold_start_s(10 * MB, "t") + 0.25)
    x.reset_device(0)
    assert x.warm_for[0] is None


def test_a_cfs_client_whose_device_died_is_not_counted_running() -> None:
    s, _ = make("cfs-affinity", n=1)
    run(s, req("A", client="alice"))
    assert s._running == {"alice": 1}
    s.reset_device(0)
    assert s._running == {"alice": 0}


def test_a_busy_hit_is_estimated_behind_what_the_device_already_promised() -> None:
    s, clock = make("lalb", n=2, cap_mb=10, e=est(upload_s=1.0, infer_s=0.25))
    run(s, req("A"))  # busy until 1.25
    s.cache.admit(1, "P", 10 * MB, 0.0)
    s.cache.pin(1, "P")  # no miss possible on device 1
    clock.advance_to(0.5)
    run(s, req("A", t=0.5), req("A", t=0.5))  # both queued on device 0
    assert s.state[0].local_est == pytest.approx(0.5)
    assert s.cache.devices[0].get("A").last_used == 0.5  # type: ignore[union-attr]
    assert s._busy_finish(0, req("A")) == pytest.approx(0.75 + 0.5 + 0.25)
    clock.advance_to(2.0)  # past its estimate: nothing remaining, not negative
    assert s._busy_finish(0, req("A")) == pytest.approx(0.5 + 0.25)
    s.complete(0)
    for _ in range(2):
        assert len(s.schedule()) == 1
        s.complete(0)
    assert s.cache.devices[0].get("A").pins == 0  # type: ignore[union-attr]


def test_a_miss_skips_a_device_whose_pins_leave_no_room() -> None:
    s, _ = make("lalb", n=2, cap_mb=10)
    s.cache.admit(0, "P", 10 * MB, 0.0)
    s.cache.pin(0, "P")
    assert s._pick_miss_device(req("A"), [0, 1]) == 1
    s.cache.admit(1, "Q", 10 * MB, 0.0)
    s.cache.pin(1, "Q")
    assert s._pick_miss_device(req("A"), [0, 1]) is None
    s.submit(req("A"))
    assert s.schedule() == []  # nowhere to go: it waits, and planning ends


def test_a_head_with_no_room_on_idle_devices_waits_on_its_busy_holder() -> None:
    s, _ = make("lalb", n=2, cap_mb=10)
    run(s, req("A"))  # device 0 runs A
    s.cache.admit(1, "P", 10 * MB, 0.0)
    s.cache.pin(1, "P")  # the idle device has no room
    assert run(s, req("A", t=0.1)) == [] and len(s.state[0].local) == 1


def test_a_tie_between_a_busy_hit_and_a_miss_goes_to_the_hit_and_planning_goes_on() -> None:
    s, clock = make("lalb", n=2, e=est(upload_s=1.0, infer_s=0.25))
    run(s, req("A"))  # device 0 busy until 1.25
    clock.advance_to(0.25)
    a = req("A", t=0.25)
    assert s._busy_finish(0, a) == s._upload_est(a, 1) + s._infer_est(a, 1) == 1.25
    (d,) = run(s, a, req("B", t=0.25))
    assert len(s.state[0].local) == 1  # the tie: A waits for its busy hit
    assert (d.request.model, d.device) == ("B", 1)  # and B still goes in the same round


def test_lb_starts_as_many_heads_as_devices_are_idle_in_one_round() -> None:
    s, _ = make("lb")
    assert [(d.request.model, d.device) for d in run(s, req("A"), req("B"))] == [
        ("A", 0),
        ("B", 1),
    ]


def test_lalb_fills_every_idle_device_in_one_round() -> None:
    s, clock = make("lalb", n=2)
    run(s, req("A"), req("B"))
    clock.advance_to(2)
    s.complete(0)
    s.complete(1)
    hits = run(s, req("A", t=2), req("B", t=2))  # rule 1 twice
    assert sorted((d.request.model, d.device, d.hit) for d in hits) == [
        ("A", 0, True),
        ("B", 1, True),
    ]


def test_o3_takes_the_earliest_waiting_hit_and_fills_every_idle_device() -> None:
    s, clock = make("lalbo3", n=3, e=est(upload_s=1.0, infer_s=0.1), o3_limit=5)
    run(s, req("A"), req("B"), req("D"))  # A on 0, B on 1, D on 2
    clock.advance_to(2)
    s.complete(0)
    clock.advance_to(3)
    s.complete(1)
    clock.advance_to(4)
    s.complete(2)  # idle longest first: 0, 1, 2
    s.submit(req("C", t=4))  # the head: on no device
    later = [req("D", t=4.1), req("B", t=4.2), req("D", t=4.3)]
    for r in later:
        s.submit(r)
    jumps = s.schedule()
    assert [(d.request.model, d.device, d.out_of_order) for d in jumps] == [
        ("D", 2, True),  # the earliest waiting hit first, though device 0 is idle longer
        ("B", 1, True),
        ("C", 0, False),  # then the head, a miss
    ]
    assert jumps[0].request is later[0] and s.skips(later[2]) == 0  # nothing passed it


def test_o3_between_two_holders_of_a_model_the_longest_idle_gets_it() -> None:
    s, clock = make("lalbo3", n=2, e=est(upload_s=1.0, infer_s=0.1), o3_limit=5)
    run(s, req("B"), req("C"))
    clock.advance_to(2)
    s.complete(1)
    clock.advance_to(3)
    s.complete(0)  # device 1 idle longer
    s.cache.admit(0, "B", 10 * MB, 3.0)
    s.cache.admit(1, "B", 10 * MB, 3.0)  # both hold B now
    s.submit(req("X", t=3))  # head on neither
    b = req("B", t=3.1)
    s.submit(b)
    (d, *_) = s.schedule()
    assert (d.request, d.device, d.out_of_order) == (b, 1, True)


def test_lalb_is_in_order_unless_asked() -> None:
    s = LALBScheduler([DeviceSlot(0, 10 * MB)], VirtualClock())
    assert (s.o3_limit, s.name) == (0, "lalb")


def test_a_round_drains_local_queues_and_then_goes_on_with_the_global_one() -> None:
    s, clock = make("lalb", n=2, e=est(upload_s=5.0, infer_s=0.1))
    run(s, req("A"))  # device 0 busy until 5.1
    clock.advance_to(5.0)
    run(s, req("A", t=5.0), req("B", t=5.0))  # A waits on device 0, B misses on device 1
    s.submit(req("C", t=5.05))
    s.complete(0)
    s.complete(1)
    assert [(d.request.model, d.device) for d in s.schedule()] == [("A", 0), ("C", 1)]


def test_a_round_goes_on_after_the_starved_head_is_sent() -> None:
    s = _head_passed_once()
    s.complete(1)
    s.complete(0)
    assert [(d.request.model, d.device, d.hit) for d in s.schedule()] == [
        ("C", 0, False),  # the starved head, where the victims are oldest
        ("B", 1, True),  # and the round goes on
    ]


# -- CFS-Affinity ----------------------------------------------------------------------------


def test_cfs_gives_each_client_equal_gpu_time() -> None:
    e = est(upload_s=0.0, infer_s=0.1)
    e.observe_infer("Q", 10 * MB, 1, "t", 0.3)  # Q's requests cost 3x A's
    s, clock = make("cfs-affinity", n=1, e=e)
    assert isinstance(s, CFSAffinityScheduler)
    for i in range(40):
        s.submit(req("A", "a", t=i * 1e-3))
        s.submit(req("Q", "b", t=i * 1e-3))
    served = []
    for _ in range(40):
        (d,) = s.schedule()
        served.append(d.request.client)
        clock.advance_to(clock.now() + d.estimate_s)
        s.complete(0)
    a, b = served.count("a"), served.count("b")
    assert a == pytest.approx(3 * b, abs=2)  # equal GPU time, not equal request counts


def test_cfs_prefers_affinity_and_pays_penalty_elsewhere() -> None:
    s, _clock = make("cfs-affinity", n=2, e=est(upload_s=0.0, infer_s=0.1))
    run(s, req("A", "a"))
    run(s, req("B", "b"))
    assert s.affinity("a") == {0} and s.affinity("b") == {1}
    for d in (0, 1):
        s.complete(d)
    s.submit(req("A", "a", t=1))
    s.submit(req("A", "a", t=1.1))
    out = s.schedule()  # work-conserving: a's second request takes b's idle device
    assert sorted(d.device for d in out) == [0, 1]
    assert s.vtime["a"] == pytest.approx(0.1 * 3 + 1.0)  # 3 runs + 10x0.1 penalty once


def test_cfs_client_back_from_idle_gets_no_banked_credit() -> None:
    s, _clock = make("cfs-affinity", n=1, e=est(upload_s=0.0, infer_s=0.1))
    run(s, req("A", "a"))
    s.complete(0)
    for i in range(10):  # b works alone for a while
        (_d,) = run(s, req("B", "b", t=i))
        s.complete(0)
    s.submit(req("A", "a", t=20))
    assert s.vtime["a"] >= s.vtime["b"] - 0.1 - 1e-9  # starts at the minimum, not far behind


def test_cfs_ties_go_to_least_recently_served() -> None:
    s, _clock = make("cfs-affinity", n=1, e=est(upload_s=0.0, infer_s=0.1))
    s.submit(req("A", "a"))
    s.submit(req("B", "b"))
    (d,) = s.schedule()
    assert d.request.client == "a"  # both at 0, neither served yet: first seen
    s.complete(0)
    s.vtime["a"] = s.vtime["b"] = 1.0
    s.submit(req("A", "a"))
    s.submit(req("B", "b"))
    (d,) = s.schedule()
    assert d.request.client == "b"


def test_cfs_affinity_covers_every_gpu() -> None:
    s, _ = make("cfs-affinity", n=4)
    for c in "ab":
        s.submit(req("A", c))
    assert set().union(*(s.affinity(c) for c in "ab")) == {0, 1, 2, 3}


# -- Exclusive ---------------------------------------------------------------------------------


def test_exclusive_switch_is_a_cold_start_taken_from_the_largest_pool() -> None:
    s, clock = make("exclusive", n=2)
    assert isinstance(s, ExclusiveScheduler)
    out = run(s, req("A", "a"), req("A", "a", t=0.1))
    assert [(d.device, d.cold_start) for d in out] == [(0, True), (1, True)]
    assert s.pool("a") == [0, 1]
    s.submit(req("B", "b", t=1))  # b has no device; a's pool (2) is larger: reserve one
    assert s.schedule() == []
    assert list(s.reserved.values()) == ["b"]
    clock.advance_to(2)
    dev = next(iter(s.reserved))
    s.complete(dev)
    (d,) = s.schedule()
    assert (d.request.client, d.device, d.cold_start) == ("b", dev, True)
    assert d.victims == ("A",)


def test_exclusive_equal_pools_wait_for_their_own_device() -> None:
    s, _clock = make("exclusive", n=2)
    run(s, req("A", "a"), req("B", "b"))
    s.submit(req("A", "a", t=1))  # a's pool (1) is not smaller than b's (1): wait
    assert s.schedule() == [] and not s.reserved
    s.complete(0)
    (d,) = s.schedule()
    assert (d.device, d.cold_start, d.hit) == (0, False, True)


# -- estimates ---------------------------------------------------------------------------------


def test_linear_fit_and_priors() -> None:
    f = LinearFit()
    for x in (1, 2, 4):
        f.add(x, 0.5 + 0.25 * x)
    assert f.predict(8) == pytest.approx(2.5)
    e = Estimator(priors={"v": DeviceTypePrior(copy_bw=1e9, compute_bw=2e9)})
    assert e.upload_s(10**9, "v") == pytest.approx(1.0)  # prior: the measured bandwidth
    assert e.infer_s("m", 10**9, 2, "v") == pytest.approx(1.0)
    e.observe_infer("m", 10**9, 1, "v", 0.2)
    e.observe_infer("m", 10**9, 4, "v", 0.5)
    assert e.infer_s("m", 10**9, 2, "v") == pytest.approx(0.3)
    assert e.infer_s("other", 5 * 10**8, 1, "v") > 0  # per-byte fit from other models


def test_unknown_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown GPU policy"):
        make("fifo")
