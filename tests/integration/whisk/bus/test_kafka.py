"""Topic creation against the real broker: its per-topic answer is read, not assumed."""

from __future__ import annotations

import logging

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from services import unique_name

from whisk.bus.kafka import INVOKER_TOPIC_CONFIG, KafkaBus, TopicError

pytestmark = pytest.mark.services


async def topics(bootstrap: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return await admin.list_topics()
    finally:
        await admin.close()


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "whisk.bus.kafka"]


async def test_ensuring_a_topic_twice_creates_it_once_then_says_it_exists(kafka, caplog):
    caplog.set_level(logging.INFO, logger="whisk.bus.kafka")
    bus, topic = KafkaBus(kafka.bootstrap), unique_name("ensure")
    await bus.ensure_topic(topic, INVOKER_TOPIC_CONFIG)
    await bus.ensure_topic(topic, INVOKER_TOPIC_CONFIG)
    assert said(caplog) == [f"created topic {topic}", f"topic {topic} exists"]
    assert topic in await topics(kafka.bootstrap)


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({"retention.ms": "forever"}, "InvalidConfigurationError"),
        ({"no.such.setting": "1"}, "InvalidConfigurationError"),
    ],
)
async def test_a_topic_the_broker_refuses_is_a_clear_error(kafka, caplog, config, reason):
    caplog.set_level(logging.INFO, logger="whisk.bus.kafka")
    bus, topic = KafkaBus(kafka.bootstrap), unique_name("refused")
    with pytest.raises(TopicError, match=f"cannot create Kafka topic {topic}: {reason}: .+"):
        await bus.ensure_topic(topic, config)
    assert not said(caplog), "nothing may claim the topic was created"
    assert topic not in await topics(kafka.bootstrap)
