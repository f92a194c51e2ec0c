"""The kTask scheduler's placement and the constant cache's bookkeeping (pure: no torch)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from gpu.kaas import examples
from gpu.kaas.constants import ConstantCache, cache_key
from gpu.kaas.format import parse
from gpu.kaas.placement import ConstantNeed, DeviceState, place, requirements
from gpu.kaas.spec import KTaskError
from gpu.metrics import PoolMetrics
from whisk.clock import VirtualClock

MB = 1 << 20
BW = 1000.0 * MB  # bytes per second: 100 MiB to copy costs 0.1 s


def devices(*backlogs: float, cap: int = 1000 * MB, cuda: bool = False) -> list[DeviceState]:
    return [DeviceState(i, b, cap, cuda) for i, b in enumerate(backlogs)]


def holders_from(where: dict[str, set[int]]):
    return lambda key, version: where.get(f"{key}@{version}", set())


W = [ConstantNeed("w/re", 1, 100 * MB), ConstantNeed("w/im", 1, 100 * MB)]


def test_follows_its_resident_constants() -> None:
    at1 = holders_from({"w/re@1": {1}, "w/im@1": {1}})
    p = place(W, [], devices(0.0, 0.0, 0.0), at1, copy_bytes_per_s=BW)
    assert (p.device, p.missing_bytes, p.estimate_s) == (1, 0, 0.0)


def test_partly_resident_counts_only_the_missing_bytes() -> None:
    where = holders_from({"w/re@1": {0, 2}, "w/im@1": {2}})
    p = place(W, [], devices(0.0, 0.0, 0.05), where, copy_bytes_per_s=BW)
    assert p.device == 2 and p.missing_bytes == 0  # 0.05 s of queue beats 0.1 s of copy
    p = place(W, [], devices(0.0, 0.0, 0.15), where, copy_bytes_per_s=BW)
    assert p.device == 0 and p.missing_bytes == 100 * MB


def test_load_beats_locality_when_the_queue_costs_more_than_the_copy() -> None:
    at0 = holders_from({"w/re@1": {0}, "w/im@1": {0}})
    p = place(W, [], devices(0.5, 0.1), at0, copy_bytes_per_s=BW)
    assert p.device == 1 and p.missing_bytes == 200 * MB
    assert p.estimate_s == pytest.approx(0.3)
    assert place(W, [], devices(0.25, 0.1), at0, copy_bytes_per_s=BW).device == 0


def test_ties_go_to_fewer_bytes_then_lower_index() -> None:
    none = holders_from({})
    assert place(W, [], devices(0.0, 0.0), none, copy_bytes_per_s=BW).device == 0
    assert place([], [], devices(0.2, 0.1, 0.1), none, copy_bytes_per_s=BW).device == 1


def test_a_stale_version_is_not_locality() -> None:
    old = holders_from({"w/re@1": {0}, "w/im@1": {0}})
    new = [ConstantNeed("w/re", 2, 100 * MB), ConstantNeed("w/im", 2, 100 * MB)]
    p = place(new, [], devices(0.01, 0.0), old, copy_bytes_per_s=BW)
    assert p.device == 1 and p.missing_bytes == 200 * MB


def test_waits_for_inputs_then_places() -> None:
    task = parse(examples.cgemm(4, 4, 4))
    versions: dict[str, int] = {"cgemm/W/re": 3, "cgemm/W/im": 1, "cgemm/X/re": 1}
    needs, missing = requirements(task, versions.get)
    assert missing == ["cgemm/X/im"]
    p = place(needs, missing, devices(0.0), holders_from({}), copy_bytes_per_s=BW)
    assert p.device is None and p.waiting_for == ("cgemm/X/im",)
    versions["cgemm/X/im"] = 1
    needs, missing = requirements(task, versions.get)
    assert missing == [] and {(n.key, n.version) for n in needs} == {
        ("cgemm/W/re", 3),
        ("cgemm/W/im", 1),
    }
    assert all(n.nbytes == 64 for n in needs)


def test_a_named_version_not_yet_written_is_not_ready() -> None:
    doc = examples.cgemm(4, 4, 4)
    doc["buffers"]["Xr"]["version"] = 2
    _, missing = requirements(parse(doc), {"cgemm/X/re": 1, "cgemm/X/im": 1}.get)
    assert "cgemm/X/re" in missing


def test_cuda_only_and_too_large_constants() -> None:
    none = holders_from({})
    mixed = [DeviceState(0, 0.0, 1000 * MB), DeviceState(1, 5.0, 1000 * MB, cuda=True)]
    assert place(W, [], mixed, none, copy_bytes_per_s=BW, needs_cuda=True).device == 1
    with pytest.raises(KTaskError, match="CUDA source kernels and the pool has no CUDA device"):
        place(W, [], devices(0.0), none, copy_bytes_per_s=BW, needs_cuda=True)
    with pytest.raises(KTaskError, match=r"need 200.0 MiB together; the largest .* 150.0 MiB"):
        place(W, [], devices(0.0, cap=150 * MB), none, copy_bytes_per_s=BW)
    # a device too small is skipped, not chosen
    sizes = [DeviceState(0, 0.0, 150 * MB), DeviceState(1, 9.0, 300 * MB)]
    assert place(W, [], sizes, none, copy_bytes_per_s=BW).device == 1


# -- the constant cache on the pool's CacheView ---------------------------------------------


def test_hits_misses_lru_eviction_and_index() -> None:
    clock = VirtualClock()
    c = ConstantCache([250 * MB, 250 * MB], clock=clock)
    assert not c.admit(0, "a", 1, 100 * MB).hit
    c.release(0, "a", 1)
    clock.advance_to(1)
    assert not c.admit(0, "b", 1, 100 * MB).hit
    c.release(0, "b", 1)
    clock.advance_to(2)
    assert c.admit(0, "a", 1, 100 * MB).hit  # a is now the most recently used
    c.release(0, "a", 1)
    adm = c.admit(0, "c", 1, 100 * MB)
    assert adm.victims == ["b@1"] and not adm.hit
    c.release(0, "c", 1)
    assert (c.hits, c.misses, c.evictions) == (1, 3, 1)
    assert c.holders("a", 1) == {0} and c.holders("b", 1) == set()
    assert c.resident(0) == ["a@1", "c@1"]


def test_pinned_constants_are_never_victims() -> None:
    c = ConstantCache([250 * MB], clock=VirtualClock())
    c.admit(0, "a", 1, 100 * MB)
    c.admit(0, "b", 1, 100 * MB)  # both pinned: one kTask is using them
    with pytest.raises(KTaskError, match="does not fit on device 0: the constants in use there"):
        c.admit(0, "c", 1, 100 * MB)
    c.release(0, "a", 1)
    assert c.admit(0, "c", 1, 100 * MB).victims == ["a@1"]
    with pytest.raises(KTaskError, match="larger than device 0's constant budget"):
        c.admit(0, "d", 1, 300 * MB)


def test_a_new_version_evicts_the_stale_one() -> None:
    c = ConstantCache([1000 * MB], clock=VirtualClock())
    c.admit(0, "w", 1, 10 * MB)
    c.release(0, "w", 1)
    adm = c.admit(0, "w", 2, 10 * MB)
    assert adm.victims == ["w@1"] and c.resident(0) == [cache_key("w", 2)]


def test_forget_drops_a_load_that_failed() -> None:
    c = ConstantCache([1000 * MB], clock=VirtualClock())
    c.admit(0, "w", 1, 10 * MB)
    c.forget(0, "w", 1)
    assert c.resident(0) == [] and c.holders("w", 1) == set()


def test_counters_reach_the_pools_prometheus_metrics() -> None:
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry, 1)
    c = ConstantCache([150 * MB], clock=VirtualClock(), observer=metrics.on_kaas_constant)
    for key in ("a", "a", "b", "a"):
        c.admit(0, key, 1, 100 * MB)
        c.release(0, key, 1)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("owgpu_kaas_constant_lookups_total", outcome="hit") == 1
    assert value("owgpu_kaas_constant_lookups_total", outcome="miss") == 3
    assert value("owgpu_evictions_total", tier="kaas_constant") == 2


def test_forget_keeps_an_entry_another_call_still_pins() -> None:
    c = ConstantCache([1000 * MB], clock=VirtualClock())
    c.admit(0, "w", 1, 10 * MB)  # call 1 (a miss)
    c.admit(0, "w", 1, 10 * MB)  # call 2, prepared before call 1 ran (a hit)
    c.forget(0, "w", 1)  # call 1's load failed
    assert c.resident(0) == ["w@1"]  # call 2's worker will load it
    c.forget(0, "w", 1)
    assert c.resident(0) == []


def test_stale_versions_count_as_evictions_even_when_the_new_one_does_not_fit() -> None:
    c = ConstantCache([100 * MB], clock=VirtualClock())
    c.admit(0, "w", 1, 10 * MB)
    c.release(0, "w", 1)
    with pytest.raises(KTaskError, match="larger than device 0's constant budget"):
        c.admit(0, "w", 2, 200 * MB)
    assert c.resident(0) == [] and c.evictions == 1
