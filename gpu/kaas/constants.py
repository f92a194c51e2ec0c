"""Where constant buffers sit: the pool's per-device LRU cache, keyed by (key, version).

Pure bookkeeping on :class:`gpu.cache.CacheView` (the machinery that keeps models resident):
LRU per device bounded by its constant budget, pins so that a constant a running kTask uses is
never a victim, a key → devices index that placement reads. Each device's worker holds the
tensors and drops what this cache no longer lists (``gpu.kaas.calls``). A new version of a key
makes the older versions on that device stale: they are evicted when the new one is admitted.
Hits, misses and evictions are counted here and reported to ``observer`` (the pool's
Prometheus counters).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpu.cache import CacheView, ModelTooLarge
from gpu.kaas.spec import KTaskError, mib
from whisk.clock import Clock, SystemClock

Observer = Callable[[str, int], None]
"""Called with ("hit" | "miss" | "evict", count)."""


def cache_key(key: str, version: int) -> str:
    return f"{key}@{version}"


def split_key(ck: str) -> tuple[str, int]:
    key, _, version = ck.rpartition("@")
    return key, int(version)


@dataclass(frozen=True)
class Admission:
    hit: bool
    victims: list[str]  # cache keys the device must drop, stale versions included


class ConstantCache:
    def __init__(
        self,
        capacities: Sequence[int],
        *,
        clock: Clock | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.view = CacheView(capacities)
        self.clock = clock or SystemClock()
        self._observer = observer
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def holders(self, key: str, version: int) -> set[int]:
        return self.view.holders(cache_key(key, version))

    def resident(self, device: int) -> list[str]:
        return self.view.devices[device].lru()

    def admit(self, device: int, key: str, version: int, nbytes: int) -> Admission:
        """Make (key, version) resident on ``device`` and pin it; the caller unpins after use."""
        ck = cache_key(key, version)
        cache = self.view.devices[device]
        now = self.clock.now()
        if ck in cache:
            cache.touch(ck, now)
            self.view.pin(device, ck)
            self.hits += 1
            self._tell("hit", 1)
            return Admission(True, [])
        victims = [
            old
            for old in cache.lru()
            if split_key(old)[0] == key and (r := cache.get(old)) is not None and r.pins == 0
        ]
        for v in victims:  # stale versions go even if the new one turns out not to fit
            self.view.evict(device, v, now)
        self._evicted(len(victims))
        try:
            plan = cache.plan(ck, nbytes)
        except ModelTooLarge:
            raise KTaskError(
                f"constant {key!r} ({mib(nbytes)}) is larger than device {device}'s constant "
                f"budget ({mib(cache.capacity)})"
            ) from None
        if plan is None:
            raise KTaskError(
                f"constant {key!r} ({mib(nbytes)}) does not fit on device {device}: the "
                f"constants in use there leave {mib(cache.free)} of {mib(cache.capacity)}"
            )
        lru = self.view.admit(device, ck, nbytes, now)
        self.view.pin(device, ck)
        self.misses += 1
        self._tell("miss", 1)
        self._evicted(len(lru))
        return Admission(False, victims + lru)

    def release(self, device: int, key: str, version: int) -> None:
        self.view.unpin(device, cache_key(key, version))

    def forget(self, device: int, key: str, version: int) -> None:
        """Release a pin on an entry the device does not really hold (its load failed, or its
        call was abandoned), and drop the entry unless another call still pins it (that call's
        worker loads it then)."""
        ck = cache_key(key, version)
        self.view.unpin(device, ck)
        r = self.view.devices[device].get(ck)
        if r is not None and r.pins == 0:
            self.view.evict(device, ck, self.clock.now())

    def _evicted(self, n: int) -> None:
        if n:
            self.evictions += n
            self._tell("evict", n)

    def _tell(self, event: str, n: int) -> None:
        if self._observer is not None:
            self._observer(event, n)
