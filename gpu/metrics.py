"""Prometheus metrics of the GPU pool, registered in a CollectorRegistry the owner passes in."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gpu.dispatcher import JobResult
from gpu.scheduler import Dispatch

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class PoolMetrics:
    def __init__(self, registry: CollectorRegistry, n_devices: int, prefix: str = "owgpu") -> None:
        p = prefix
        self.latency = Histogram(
            f"{p}_request_latency_seconds",
            "Arrival to result of a GPU request (queueing + upload + inference)",
            ["outcome"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.requests = Counter(
            f"{p}_requests", "GPU requests dispatched, by cache outcome", ["outcome"],
            registry=registry,
        )  # fmt: skip
        self.false_misses = Counter(
            f"{p}_false_misses", "Misses while the model was resident on another device",
            registry=registry,
        )  # fmt: skip
        self.evictions = Counter(
            f"{p}_evictions", "Models evicted, by tier", ["tier"], registry=registry
        )
        self.loads = Counter(
            f"{p}_model_loads", "Models uploaded to a device, by path", ["path"], registry=registry
        )
        self.failures = Counter(
            f"{p}_request_failures", "GPU requests that failed", ["reason"], registry=registry
        )
        self.restarts = Counter(
            f"{p}_worker_restarts", "Device workers replaced", ["device", "reason"],
            registry=registry,
        )  # fmt: skip
        self.busy = Counter(
            f"{p}_device_busy_seconds",
            "Seconds each device spent uploading or inferring (rate() = utilisation)",
            ["device"],
            registry=registry,
        )
        self.infer = Counter(
            f"{p}_device_inference_seconds",
            "Seconds each device spent inferring (rate() = SM-style utilisation)",
            ["device"],
            registry=registry,
        )
        self.duplicates = Gauge(
            f"{p}_popular_model_duplicates",
            "Devices holding the most requested model right now",
            registry=registry,
        )
        self.queue = Gauge(f"{p}_queue_length", "GPU requests waiting", registry=registry)
        self.resident = Gauge(
            f"{p}_device_resident_bytes", "Model bytes resident per device", ["device"],
            registry=registry,
        )  # fmt: skip
        self.nvml_util = Gauge(
            f"{p}_device_nvml_utilization", "SM utilisation reported by NVML (0..1)", ["device"],
            registry=registry,
        )  # fmt: skip
        self.kaas_constants = Counter(
            f"{p}_kaas_constant_lookups",
            "kTask constant buffers looked up in device memory, by outcome (hit, miss)",
            ["outcome"],
            registry=registry,
        )
        self.n_devices = n_devices

    def bind(
        self,
        queue_len: Callable[[], float],
        duplicates: Callable[[], float],
        resident: Sequence[Callable[[], float]],
        nvml: Sequence[Callable[[], float]] = (),
    ) -> None:
        """Gauges read at scrape time from the live objects."""
        self.queue.set_function(queue_len)
        self.duplicates.set_function(duplicates)
        for i, f in enumerate(resident):
            self.resident.labels(str(i)).set_function(f)
        for i, f in enumerate(nvml):
            self.nvml_util.labels(str(i)).set_function(f)

    def on_event(self, kind: str, d: Dispatch, res: JobResult | None) -> None:
        if kind == "dispatch":
            outcome = "hit" if d.hit else "miss"
            self.requests.labels(outcome).inc()
            if d.false_miss:
                self.false_misses.inc()
            if d.victims:
                self.evictions.labels("device").inc(len(d.victims))
            if not d.hit:
                self.loads.labels("cold" if d.cold_start else "host_tier").inc()
        elif kind == "finish" and res is not None:
            dev = str(d.device)
            self.busy.labels(dev).inc(res.upload_s + res.infer_s)
            self.infer.labels(dev).inc(res.infer_s)

    def on_kaas_constant(self, event: str, n: int) -> None:
        """Observer of the kTask constant cache: hits, misses; evictions as tier kaas_constant."""
        if event == "evict":
            self.evictions.labels("kaas_constant").inc(n)
        else:
            self.kaas_constants.labels(event).inc(n)

    def on_latency(self, hit: bool, seconds: float) -> None:
        self.latency.labels("hit" if hit else "miss").observe(seconds)
