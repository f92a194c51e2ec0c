"""Malformed acks on ``completed<C>`` and pings on ``health`` over the real Kafka broker: the
front's consumers go on, so a blocking invoke still gets its result."""

from __future__ import annotations

import uuid

import pytest

from containers.simulated import SimulatedBackend
from tests.front_platform import platform
from tests.unit.front.test_controller import _invoke_after_poison
from whisk.store.embedded import EmbeddedStore


@pytest.mark.services
async def test_bad_acks_and_pings_are_skipped_over_kafka(kafka, tmp_path):
    from whisk.bus.kafka import KafkaBus

    prefix = f"t{uuid.uuid4().hex[:8]}_"
    store = EmbeddedStore(tmp_path / "db.sqlite3")
    async with platform(
        bus=KafkaBus(kafka.bootstrap),
        store=store,
        backend=SimulatedBackend(),
        state_dir=tmp_path,
        policy="fifo",
        action_cores=(0,),
        topic_prefix=prefix,
    ) as p:
        await _invoke_after_poison(p, prefix)
    await store.close()
