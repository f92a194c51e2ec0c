"""Prometheus helpers shared by the invoker's and the front's metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from whisk.protocol.errors import KINDS


def counter_by_error_kind(name: str, doc: str, registry: CollectorRegistry) -> Counter:
    """A counter of unreadable input by kind, every kind shown from the start (at 0)."""
    counter = Counter(name, doc, ["kind"], registry=registry)
    for kind in KINDS:
        counter.labels(kind)
    return counter
