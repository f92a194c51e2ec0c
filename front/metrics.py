"""Prometheus metrics of the front, in a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from whisk.metrics import counter_by_error_kind


class FrontMetrics:
    """The front's own counters: acks and pings its consumers had to skip."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.bad_acks = counter_by_error_kind(
            "front_bad_acks", "Acks on completed<C> that could not be read, skipped", self.registry
        )
        self.bad_pings = counter_by_error_kind(
            "front_bad_pings", "Pings on health that could not be read, skipped", self.registry
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
