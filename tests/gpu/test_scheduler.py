"""Hand-made scenarios for the pure GPU scheduler, cache and estimator (no torch, no I/O)."""

from __future__ import annotations

import pytest

from gpu.cache import CacheView, DeviceCache, ModelTooLarge
from gpu.cfs import CFSAffinityScheduler
from gpu.estimates import DeviceTypePrior, Estimator, LinearFit
from gpu.exclusive import ExclusiveScheduler
from gpu.policies import make_scheduler
from gpu.scheduler import DeviceSlot, LALBScheduler, LBScheduler, Request
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


def test_o3_limit_forces_the_starved_head_out_hit_or_miss() -> None:
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
