"""Kafka through aiokafka, configured like the stock invoker (spec section 1.2)."""

from __future__ import annotations

import asyncio
import logging

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    TopicAlreadyExistsError,
)
from aiokafka.structs import OffsetAndMetadata

from invoker.bus.base import BusUnavailable, MessageTooLarge, Record
from invoker.protocol.messages import MAX_MESSAGE_BYTES

log = logging.getLogger(__name__)

# The stock invoker's topic settings for invoker<N>.
INVOKER_TOPIC_CONFIG = {
    "segment.bytes": "536870912",
    "retention.bytes": "1073741824",
    "retention.ms": "172800000",
    "max.message.bytes": str(MAX_MESSAGE_BYTES),
}


class KafkaConsumer:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        session_timeout_ms: int = 30_000,
        heartbeat_interval_ms: int = 10_000,
    ) -> None:
        self.topic = topic
        self._consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=f"consumer-{topic}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            max_poll_interval_ms=1_800_000,
            fetch_max_wait_ms=500,
            max_partition_fetch_bytes=2 * MAX_MESSAGE_BYTES,
            fetch_max_bytes=8 * MAX_MESSAGE_BYTES,
        )
        self._paused = False

    async def start(self) -> None:
        await self._consumer.start()

    async def poll(self, max_records: int, timeout_s: float) -> list[Record]:
        batches = await self._consumer.getmany(
            timeout_ms=int(timeout_s * 1000), max_records=max_records
        )
        return [
            Record(tp.topic, tp.partition, m.offset, m.value or b"")
            for tp, messages in batches.items()
            for m in messages
        ]

    async def commit(self, offsets: dict[int, int]) -> None:
        await self._consumer.commit(
            {TopicPartition(self.topic, p): OffsetAndMetadata(o, "") for p, o in offsets.items()}
        )

    def pause(self) -> None:
        if not self._paused:
            self._consumer.pause(*self._consumer.assignment())
            self._paused = True

    def resume(self) -> None:
        if self._paused:
            self._consumer.resume(*self._consumer.assignment())
            self._paused = False

    async def end_offsets(self) -> dict[int, int]:
        tps = list(self._consumer.assignment())
        ends = await self._consumer.end_offsets(tps) if tps else {}
        return {tp.partition: o for tp, o in ends.items()}

    async def stop(self) -> None:
        await self._consumer.stop()


class KafkaProducer:
    def __init__(
        self, bootstrap: str, request_timeout_ms: int = 30_000, linger_ms: int = 0
    ) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks=1,
            max_request_size=MAX_MESSAGE_BYTES,
            request_timeout_ms=request_timeout_ms,
            linger_ms=linger_ms,
        )

    async def start(self) -> None:
        await self._producer.start()

    async def send(self, topic: str, value: bytes) -> None:
        try:
            await self._producer.send_and_wait(topic, value)
        except MessageSizeTooLargeError as e:
            raise MessageTooLarge(str(e)) from e
        except KafkaTimeoutError as e:
            raise BusUnavailable(f"Kafka did not acknowledge a message to {topic}: {e}") from e

    async def stop(self) -> None:
        await self._producer.stop()


class KafkaBus:
    def __init__(self, bootstrap: str, replication_factor: int = 1, **consumer_options: int):
        self.bootstrap = bootstrap
        self.replication_factor = replication_factor
        self._consumer_options = consumer_options

    def consumer(self, topic: str, group: str) -> KafkaConsumer:
        return KafkaConsumer(self.bootstrap, topic, group, **self._consumer_options)

    def producer(self, batching: bool = False) -> KafkaProducer:
        # Batching (a 5 ms linger) halves the broker's work per ack under load.
        return KafkaProducer(self.bootstrap, linger_ms=5 if batching else 0)

    async def ensure_topic(self, topic: str, config: dict[str, str]) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(topic, 1, self.replication_factor, topic_configs=config)]
            )
            log.info("created topic %s", topic)
        except TopicAlreadyExistsError:
            pass
        except KafkaError as e:
            # Some brokers answer "exists" inside the response rather than raising.
            if "exist" not in str(e).lower():
                raise
        finally:
            await admin.close()

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until the broker answers metadata requests."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            try:
                await admin.start()
                await admin.close()
                return
            except KafkaError as e:
                if asyncio.get_running_loop().time() > deadline:
                    raise BusUnavailable(f"Kafka at {self.bootstrap} unreachable: {e}") from e
                await asyncio.sleep(0.5)
