"""Kafka through aiokafka, configured like the stock invoker (spec section 1.2)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    InconsistentGroupProtocolError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    TopicAlreadyExistsError,
    for_code,
)
from aiokafka.structs import OffsetAndMetadata

from whisk.bus.base import BusUnavailable, MessageTooLarge, Record
from whisk.bus.kafka_security import KafkaSecurity
from whisk.protocol.messages import MAX_MESSAGE_BYTES

log = logging.getLogger(__name__)

# The stock invoker's topic settings for invoker<N>.
INVOKER_TOPIC_CONFIG = {
    "segment.bytes": "536870912",
    "retention.bytes": "1073741824",
    "retention.ms": "172800000",
    "max.message.bytes": str(MAX_MESSAGE_BYTES),
}
C = TypeVar("C", AIOKafkaConsumer, AIOKafkaProducer)
START_BACKOFF_S = (0.5, 5.0)  # first and largest wait between attempts to start a client


def _start_problem(e: KafkaError, bootstrap: str) -> str:
    """What a failed client start waits for, in words for the log."""
    if isinstance(e, InconsistentGroupProtocolError):
        return (
            "for a member that speaks an incompatible protocol to leave: a previous invoker "
            "with this id that did not leave the group; the broker drops it when its session "
            "times out (30 s for the stock invoker)"
        )
    if isinstance(e, KafkaConnectionError):
        return f"for Kafka at {bootstrap} to answer ({e})"
    return f"{e.__class__.__name__}: {e}"


async def _start_with_retry(
    client: C, make: Callable[[], C], what: str, problem: Callable[[KafkaError], str]
) -> C:
    """Start an aiokafka client, retrying with back-off for as long as it takes (a failed
    client cannot be started again: each attempt uses a new one from ``make``)."""
    backoff, largest = START_BACKOFF_S
    while True:
        try:
            await client.start()
            return client
        except KafkaError as e:
            log.warning("%s: waiting %s; next try in %.1f s", what, problem(e), backoff)
            try:
                await client.stop()
            except Exception as stop_error:
                log.debug("stopping the failed %s: %s", what, stop_error)
            client = make()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, largest)


class KafkaConsumer:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        session_timeout_ms: int = 30_000,
        heartbeat_interval_ms: int = 10_000,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.bootstrap = bootstrap
        self.group = group
        self._make = lambda: AIOKafkaConsumer(
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
            **(client_options or {}),
        )
        self._consumer = self._make()
        self._paused = False

    async def start(self) -> None:
        """Join the group; while it cannot (the broker not ready, a lingering previous
        member), log why and keep trying."""
        self._consumer = await _start_with_retry(
            self._consumer,
            self._make,
            f"joining consumer group {self.group} on {self.topic}",
            lambda e: _start_problem(e, self.bootstrap),
        )

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
        self,
        bootstrap: str,
        request_timeout_ms: int = 30_000,
        linger_ms: int = 0,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        # Idempotent: a batch whose request timed out on a half-open link is retried by the
        # client under its sequence number, never expired and sent again by our retry (which
        # duplicated a completion when the first send had reached the broker after all).
        self._make = lambda: AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            max_request_size=MAX_MESSAGE_BYTES,
            request_timeout_ms=request_timeout_ms,
            linger_ms=linger_ms,
            **(client_options or {}),
        )
        self._producer = self._make()

    async def start(self) -> None:
        """Connect; while the broker is not ready, log it and keep trying."""
        self._producer = await _start_with_retry(
            self._producer,
            self._make,
            "starting a Kafka producer",
            lambda e: _start_problem(e, self.bootstrap),
        )

    async def send(self, topic: str, value: bytes) -> None:
        try:
            await self._producer.send_and_wait(topic, value)
        except MessageSizeTooLargeError as e:
            raise MessageTooLarge(str(e)) from e
        except KafkaTimeoutError as e:
            raise BusUnavailable(f"Kafka did not acknowledge a message to {topic}: {e}") from e

    async def stop(self) -> None:
        await self._producer.stop()


class TopicError(ValueError):
    """The broker refused to create a topic (bad configuration, not an outage)."""


class KafkaBus:
    """``security``: TLS and SASL for every client (one SSL context, made here, so a bad
    key or CA file fails at start)."""

    def __init__(
        self,
        bootstrap: str,
        replication_factor: int = 1,
        security: KafkaSecurity | None = None,
        **consumer_options: int,
    ):
        self.bootstrap = bootstrap
        self.replication_factor = replication_factor
        self._consumer_options = consumer_options
        self._client_options = security.client_options() if security else {}

    def consumer(self, topic: str, group: str) -> KafkaConsumer:
        return KafkaConsumer(
            self.bootstrap,
            topic,
            group,
            client_options=self._client_options,
            **self._consumer_options,
        )

    def producer(self, batching: bool = False) -> KafkaProducer:
        # Batching (a 5 ms linger) halves the broker's work per ack under load.
        return KafkaProducer(
            self.bootstrap, linger_ms=5 if batching else 0, client_options=self._client_options
        )

    def _admin(self) -> AIOKafkaAdminClient:
        return AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **self._client_options)

    async def ensure_topic(self, topic: str, config: dict[str, str]) -> None:
        """Create ``topic`` unless it exists. The broker answers per topic inside its response
        rather than by raising: "already exists" is fine, any other answer is a
        :class:`TopicError` naming the topic and the broker's reason."""
        admin = self._admin()
        await admin.start()
        try:
            response = await admin.create_topics(
                [NewTopic(topic, 1, self.replication_factor, topic_configs=config)]
            )
        except TopicAlreadyExistsError:  # in case a client version raises it after all
            response = None
        finally:
            await admin.close()
        answers = {a[0]: a[1:] for a in response.topic_errors} if response else {}
        code, *message = answers.get(topic, (TopicAlreadyExistsError.errno,))
        if code == 0:
            log.info("created topic %s", topic)
        elif code == TopicAlreadyExistsError.errno:
            log.info("topic %s exists", topic)
        else:
            error = for_code(code)
            reason = (message[0] if message else None) or error.description
            raise TopicError(f"cannot create Kafka topic {topic}: {error.__name__}: {reason}")

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until the broker answers metadata requests."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        attempts = 0
        while True:
            admin = self._admin()
            try:
                await admin.start()
                await admin.close()
                return
            except KafkaError as e:
                if asyncio.get_running_loop().time() > deadline:
                    raise BusUnavailable(f"Kafka at {self.bootstrap} unreachable: {e}") from e
                if attempts % 20 == 0:  # every 10 s
                    log.warning("waiting for Kafka at %s to answer: %s", self.bootstrap, e)
                attempts += 1
                await asyncio.sleep(0.5)
