"""Per-device model caches: LRU lists bounded by device memory, with pin counts.

Pure bookkeeping (no torch, no I/O). The scheduler asks where a model lives and which victims
a miss would evict; the device workers only carry out the decisions. Pins (one per request
running on or queued for a device) guarantee that a model in use is never chosen as a victim.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


class ModelTooLarge(ValueError):
    """A model that cannot fit on any device, however much is evicted."""

    def __init__(self, key: str, size: int, largest: int) -> None:
        super().__init__(
            f"model {key[:12]} needs {size / 2**20:.1f} MiB but the largest GPU device has "
            f"{largest / 2**20:.1f} MiB: it can never be resident, so the pool refuses it"
        )
        self.key = key
        self.size = size
        self.largest = largest


@dataclass
class Resident:
    key: str
    size: int
    pins: int = 0
    last_used: float = 0.0


class DeviceCache:
    """LRU list of the models resident on one device (oldest first)."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("device capacity must be positive")
        self.capacity = capacity
        self.used = 0
        self._lru: OrderedDict[str, Resident] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._lru

    def __len__(self) -> int:
        return len(self._lru)

    @property
    def free(self) -> int:
        return self.capacity - self.used

    def lru(self) -> list[str]:
        """Resident model keys, least recently used first."""
        return list(self._lru)

    def get(self, key: str) -> Resident | None:
        return self._lru.get(key)

    def plan(self, key: str, size: int) -> list[str] | None:
        """Victims (LRU order) whose eviction lets ``key`` fit; None while pins prevent it."""
        if key in self._lru:
            return []
        if size > self.capacity:
            raise ModelTooLarge(key, size, self.capacity)
        need = size - self.free
        victims: list[str] = []
        for r in self._lru.values():
            if need <= 0:
                break
            if r.pins == 0:
                victims.append(r.key)
                need -= r.size
        return victims if need <= 0 else None

    def insert(self, key: str, size: int, now: float) -> None:
        if key in self._lru:
            self.touch(key, now)
            return
        if size > self.free:
            raise RuntimeError(f"model {key[:12]} does not fit: evict first")
        self._lru[key] = Resident(key, size, 0, now)
        self.used += size

    def remove(self, key: str) -> Resident:
        r = self._lru.pop(key)
        if r.pins:
            self._lru[key] = r
            raise RuntimeError(f"model {key[:12]} is pinned ({r.pins}) and cannot be evicted")
        self.used -= r.size
        return r

    def touch(self, key: str, now: float) -> None:
        r = self._lru[key]
        r.last_used = now
        self._lru.move_to_end(key)

    def pin(self, key: str) -> None:
        self._lru[key].pins += 1

    def unpin(self, key: str) -> None:
        r = self._lru.get(key)
        if r is not None and r.pins > 0:
            r.pins -= 1

    def clear(self) -> list[str]:
        keys = list(self._lru)
        self._lru.clear()
        self.used = 0
        return keys


ResidencyListener = Callable[[str, int, float], None]
"""Called with (model key, number of devices now holding it, time) on every change."""


class CacheView:
    """All devices' caches plus a model → devices index, and eviction/load counters."""

    def __init__(self, capacities: Sequence[int]) -> None:
        self.devices = [DeviceCache(c) for c in capacities]
        self._holders: dict[str, set[int]] = {}
        self.loads = 0
        self.reloads = 0
        self.evictions = 0
        self._ever_loaded: set[str] = set()
        self.listeners: list[ResidencyListener] = []

    @property
    def largest(self) -> int:
        return max(d.capacity for d in self.devices)

    def check_fits(self, key: str, size: int) -> None:
        """Refuse a model that no device could ever hold."""
        if size > self.largest:
            raise ModelTooLarge(key, size, self.largest)

    def holders(self, key: str) -> set[int]:
        return self._holders.get(key, set())

    def holds(self, device: int, key: str) -> bool:
        return key in self.devices[device]

    def plan(self, device: int, key: str, size: int) -> list[str] | None:
        return self.devices[device].plan(key, size)

    def admit(self, device: int, key: str, size: int, now: float) -> list[str]:
        """Make ``key`` resident on ``device`` (evicting LRU victims); return the victims."""
        cache = self.devices[device]
        if key in cache:
            cache.touch(key, now)
            return []
        victims = cache.plan(key, size)
        if victims is None:
            raise RuntimeError(f"device {device}: pinned models leave no room for {key[:12]}")
        for v in victims:
            self.evict(device, v, now)
        cache.insert(key, size, now)
        self.loads += 1
        if key in self._ever_loaded:
            self.reloads += 1
        self._ever_loaded.add(key)
        self._change(key, device, True, now)
        return victims

    def evict(self, device: int, key: str, now: float) -> None:
        self.devices[device].remove(key)
        self.evictions += 1
        self._change(key, device, False, now)

    def clear_device(self, device: int, now: float) -> list[str]:
        """Forget everything on a device (its worker died); pins go with it."""
        keys = self.devices[device].clear()
        for k in keys:
            self._change(k, device, False, now)
        return keys

    def pin(self, device: int, key: str) -> None:
        self.devices[device].pin(key)

    def unpin(self, device: int, key: str) -> None:
        self.devices[device].unpin(key)

    def _change(self, key: str, device: int, added: bool, now: float) -> None:
        hs = self._holders.setdefault(key, set())
        if added:
            hs.add(device)
        else:
            hs.discard(device)
        n = len(hs)
        if not hs:
            del self._holders[key]
        for listener in self.listeners:
            listener(key, n, now)


def victims_age(cache: DeviceCache, victims: Iterable[str]) -> float:
    """Most recent use among the victims (-inf when nothing is evicted): lower is cheaper."""
    ages = [r.last_used for v in victims if (r := cache.get(v)) is not None]
    return max(ages) if ages else float("-inf")
