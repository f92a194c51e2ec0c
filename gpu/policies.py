"""Scheduler registry: one place that maps a policy name to its class and options."""

from __future__ import annotations

from collections.abc import Sequence

from gpu.cache import CacheView
from gpu.cfs import CFSAffinityScheduler
from gpu.estimates import Estimator
from gpu.exclusive import ExclusiveScheduler
from gpu.scheduler import DeviceSlot, GpuScheduler, LALBScheduler, LBScheduler
from whisk.clock import Clock

POLICIES = ("lb", "lalb", "lalbo3", "cfs-affinity", "exclusive")
DEFAULT_O3_LIMIT = 25  # the LALB paper's default skip limit
DEFAULT_AFFINITY_PENALTY = 10.0  # KaaS raised it from 2 to 10 because thrashing hurt


def make_scheduler(
    policy: str,
    devices: Sequence[DeviceSlot],
    clock: Clock,
    *,
    estimator: Estimator | None = None,
    cache: CacheView | None = None,
    o3_limit: int = DEFAULT_O3_LIMIT,
    affinity_penalty: float = DEFAULT_AFFINITY_PENALTY,
) -> GpuScheduler:
    """Build a scheduler by name; ``lalb`` is LALB without O3, ``lalbo3`` uses ``o3_limit``."""
    kw = {"estimator": estimator, "cache": cache}
    if policy == "lb":
        return LBScheduler(devices, clock, **kw)
    if policy == "lalb":
        return LALBScheduler(devices, clock, o3_limit=0, **kw)
    if policy == "lalbo3":
        return LALBScheduler(devices, clock, o3_limit=o3_limit, **kw)
    if policy == "cfs-affinity":
        return CFSAffinityScheduler(devices, clock, affinity_penalty=affinity_penalty, **kw)
    if policy == "exclusive":
        return ExclusiveScheduler(devices, clock, **kw)
    raise ValueError(f"unknown GPU policy {policy!r}; choose one of {', '.join(POLICIES)}")
