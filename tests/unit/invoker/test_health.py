"""The node's health (``invoker/health.py``) on a virtual clock: which queued calls count as
having outlived an outage (answered, not started) and which still run."""

from __future__ import annotations

from invoker.health import EXPIRY_GRACE_S, NodeHealth
from whisk.clock import VirtualClock


def test_expiry_only_after_an_outage_and_past_the_time_limit_plus_grace():
    clock = VirtualClock(start=0.0, epoch_ms_at_start=1_000_000)
    health = NodeHealth(clock)  # started at epoch 1 000 000 ms
    user = ["aaaabbbbccccddddeeeeffff00001111", 0]
    limit_ms = 1_000
    old = 1_000_000 - 1  # accepted by the controller before this node started
    clock.advance_to(EXPIRY_GRACE_S + 0.5)
    assert not health.expired(user, old, limit_ms)  # not yet past limit + grace
    clock.advance_to(EXPIRY_GRACE_S + 2)
    assert health.expired(user, old, limit_ms)
    assert not health.expired(["sid_invokerHealth", old], old, limit_ms)  # health tests run
    # Accepted while the node was healthy: it runs however long it queued (overload).
    fresh = clock.epoch_ms()
    clock.advance_to(1000)
    assert not health.expired(user, fresh, limit_ms)
    # Kafka away is no outage: the queued calls can still run.
    health.report("kafka", "Kafka did not take a health ping")
    clock.advance_to(1000.5)
    health.report("kafka", None)
    assert not health.expired(user, fresh, limit_ms)
    # ... but containers that cannot be created are: the call waited through an outage.
    health.report("containers", "cannot create containers")
    assert health.expired(user, fresh, limit_ms)
    clock.advance_to(1001)
    health.report("containers", None)
    assert health.healthy and health.expired(user, fresh, limit_ms)
    after = clock.epoch_ms() + 1
    clock.advance_to(2000)
    assert not health.expired(user, after, limit_ms)
