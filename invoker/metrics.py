"""Prometheus metrics of one invoker, in a registry of its own (several invokers can live in
one process, as in the embedded mode and the tests). The container pool's gauges are read at
scrape time (:mod:`invoker.nodeview`); docs/metrics.md lists every metric."""

from __future__ import annotations

from collections import deque

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from whisk.metrics import counter_by_error_kind
from whisk.summary import percentile

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
)


class InvokerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.activations = Counter(
            "invoker_activations", "Activations finished, by status", ["status"], registry=r
        )
        self.starts = Counter(
            "invoker_container_starts",
            "Container starts by kind (cold, warm, prewarm)",
            ["start"],
            registry=r,
        )
        self.bad_messages = Counter(
            "invoker_bad_messages", "Messages that could not be parsed", registry=r
        )
        self.bad_message_kinds = counter_by_error_kind(
            "invoker_bad_message_kinds",
            "Messages on invoker<N> that could not be parsed or admitted, by what was wrong "
            "(answered with a whisk error when their activation id could be read; never "
            "re-delivered)",
            r,
        )
        self.duration = Histogram(
            "invoker_activation_run_seconds",
            "Time spent in /run",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.cpu = Histogram(
            "invoker_activation_cpu_seconds",
            "CPU time the container used during /run",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.wait = Histogram(
            "invoker_activation_wait_seconds",
            "Time from receipt to /init or /run",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.overhead = Histogram(
            "invoker_added_latency_seconds",
            "Invoker's own time per call: receipt to ack minus /init and /run",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_length = Gauge("invoker_queue_length", "Calls waiting for a core", registry=r)
        self.running = Gauge("invoker_running_calls", "Calls running now", registry=r)
        self.paused = Gauge(
            "invoker_paused_calls", "Running calls paused for a shorter one (--preempt)", registry=r
        )
        self.preemptions = Counter(
            "invoker_preemptions", "Running calls paused for a shorter one (--preempt)", registry=r
        )
        self.warm_waits = Counter(
            "invoker_warm_waits",
            "Calls that waited for a busy container of their action instead of a new one "
            "(attained-service policies)",
            registry=r,
        )
        self.pending = Gauge(
            "invoker_pending_activations", "Received and not yet finished", registry=r
        )
        self.spooled = Gauge(
            "invoker_spooled_records", "Records waiting on disk for the database", registry=r
        )
        self.enabled = Gauge("invoker_enabled", "1 while the invoker takes work", registry=r)
        self.healthy = Gauge(
            "invoker_healthy",
            "1 while the node can work (tasks running, containers, Kafka): it pings only then",
            registry=r,
        )
        self.expired = Counter(
            "invoker_expired_activations",
            "Calls answered with an error, not started: they waited through an outage "
            "for longer than their time limit",
            registry=r,
        )
        # Exact recent samples beside the histogram, for percentiles in /status and benchmarks.
        self.added_latency_samples: deque[float] = deque(maxlen=100_000)

    def observe_added_latency(self, seconds: float) -> None:
        self.overhead.observe(seconds)
        self.added_latency_samples.append(seconds)

    def added_latency_percentiles(self) -> dict[str, float]:
        values = sorted(self.added_latency_samples)
        if not values:
            return {}
        return {f"p{q}_ms": percentile(values, q) * 1000 for q in (50, 99)}

    def render(self) -> bytes:
        return generate_latest(self.registry)
