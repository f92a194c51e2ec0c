"""The scheduler mode's health ring (upstream's InvokerHealthManager rules) and the test
action's document."""

from __future__ import annotations

from invoker.fpc.health import BUFFER, TOLERANCE, HealthRing, health_action_document
from whisk.protocol import action_from_document


def test_the_first_outcome_decides_and_three_whisk_errors_in_ten_make_it_unhealthy():
    ring = HealthRing()
    assert not ring.healthy and ring.problem == "the health test action has not run yet"
    ring.add(False)  # upstream: one failure is within the tolerance
    assert ring.healthy and ring.problem is None
    ring.add(False)
    assert ring.healthy
    ring.add(False)
    assert not ring.healthy and ring.problem == "3 of the last 3 calls ended in a whisk error"
    for _ in range(BUFFER - TOLERANCE):
        ring.add(True)
    assert not ring.healthy, "the three errors are still among the last ten"
    ring.add(True)  # the first error leaves the ring
    assert ring.healthy and ring.errors == TOLERANCE - 1


def test_the_test_action_is_the_stock_invokers():
    doc = health_action_document(3, "nodejs:20", 1_717_000_000_000)
    assert doc["_id"] == "whisk.system/invokerHealthTestAction3"
    assert doc["limits"] == {"timeout": 60000, "memory": 128, "logs": 0, "concurrency": 1}
    action = action_from_document(doc)
    assert action.kind == "nodejs:20" and action.code == "function main(params) { return params; }"
