"""Pool statistics computed from scheduler decisions and finished requests (pure, no I/O).

The same collector summarises a simulation and a live run, so the figures the simulator
prints and those the live benchmark prints mean the same thing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from gpu.scheduler import Dispatch, Request
from whisk.summary import percentile


@dataclass
class _Residency:
    count: int = 0
    since: float = 0.0
    area: float = 0.0


@dataclass
class PoolStats:
    """Counts and time integrals over one run."""

    n_devices: int
    start: float = 0.0
    dispatches: int = 0
    hits: int = 0
    misses: int = 0
    false_misses: int = 0
    out_of_order: int = 0
    cold_starts: int = 0
    evicted: int = 0
    failures: int = 0
    latencies: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    busy_s: list[float] = field(default_factory=list)
    infer_s: list[float] = field(default_factory=list)
    client_gpu_s: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    client_done: Counter = field(default_factory=Counter)
    requests_per_model: Counter = field(default_factory=Counter)
    _residency: dict[str, _Residency] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.busy_s = [0.0] * self.n_devices
        self.infer_s = [0.0] * self.n_devices

    def on_residency(self, key: str, count: int, now: float) -> None:
        r = self._residency.setdefault(key, _Residency(0, self.start))
        r.area += r.count * (now - r.since)
        r.count, r.since = count, now

    def on_dispatch(self, d: Dispatch, now: float) -> None:
        self.dispatches += 1
        self.requests_per_model[d.request.model] += 1
        self.waits.append(now - d.request.arrival)
        if d.hit:
            self.hits += 1
        else:
            self.misses += 1
        self.false_misses += d.false_miss
        self.out_of_order += d.out_of_order
        self.cold_starts += d.cold_start
        self.evicted += len(d.victims)

    def on_finish(
        self, req: Request, device: int, now: float, upload_s: float, infer_s: float
    ) -> None:
        self.latencies.append(now - req.arrival)
        self.busy_s[device] += upload_s + infer_s
        self.infer_s[device] += infer_s
        self.client_gpu_s[req.client] += upload_s + infer_s
        self.client_done[req.client] += 1

    def duplicates_of_most_popular(self, end: float) -> float:
        """Time-averaged number of devices holding the most requested model."""
        if not self.requests_per_model or end <= self.start:
            return 0.0
        top = self.requests_per_model.most_common(1)[0][0]
        r = self._residency.get(top)
        if r is None:
            return 0.0
        area = r.area + r.count * (end - r.since)
        return area / (end - self.start)

    def summary(self, end: float) -> dict[str, float | int]:
        lat = sorted(self.latencies)
        span = max(1e-9, end - self.start)
        n = max(1, self.dispatches)
        return {
            "requests": len(lat),
            "failed": self.failures,
            "mean_latency_s": sum(lat) / len(lat) if lat else float("nan"),
            "p50_latency_s": percentile(lat, 50),
            "p90_latency_s": percentile(lat, 90),
            "p99_latency_s": percentile(lat, 99),
            "mean_wait_s": sum(self.waits) / len(self.waits) if self.waits else float("nan"),
            "miss_ratio": self.misses / n,
            "false_miss_ratio": self.false_misses / n,
            "out_of_order": self.out_of_order,
            "cold_starts": self.cold_starts,
            "evictions": self.evicted,
            "avg_duplicates": self.duplicates_of_most_popular(end),
            "utilization": sum(self.infer_s) / (span * self.n_devices),
            "busy": sum(self.busy_s) / (span * self.n_devices),
            "throughput_rps": len(lat) / span,
        }

    def gpu_share(self) -> dict[str, float]:
        """Each client's share of the GPU time that was used."""
        total = sum(self.client_gpu_s.values()) or 1.0
        return {c: t / total for c, t in sorted(self.client_gpu_s.items())}
