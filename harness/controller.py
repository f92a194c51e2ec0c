"""A stand-in for the stock controller on the real Kafka and CouchDB: it stores actions,
publishes ``ActivationMessage``s on ``invoker<N>`` and reads the acks and pings back, in the
stock controller's formats; and an invoker in this process wired to the same services."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from containers.backend import ContainerBackend
from containers.process.backend import ProcessBackend
from invoker.config import InvokerConfig
from invoker.gpu import make_gpu_pool
from invoker.service import Invoker
from whisk.bus.kafka import INVOKER_TOPIC_CONFIG, KafkaBus
from whisk.clock import SystemClock
from whisk.protocol import QualifiedName, dumps, loads
from whisk.protocol.controller import action_document, activation_message
from whisk.store.couch import CouchStore
from whisk.supervisor import spawn


class KafkaAddress(Protocol):
    """Where a broker listens (the tests' and benchmarks' service objects are ones)."""

    @property
    def bootstrap(self) -> str: ...


class CouchAddress(Protocol):
    """Where a CouchDB-API server listens, and its admin credentials."""

    @property
    def url(self) -> str: ...

    @property
    def user(self) -> str: ...

    @property
    def password(self) -> str: ...


async def follow_topic(bootstrap: str, topic: str, on_message: Callable[[bytes], None]) -> None:
    """Hand every message of a single-partition topic, from its beginning, to
    ``on_message``, until cancelled; waits for the topic to exist (without a consumer group:
    the reader of a stand-in sees everything, whoever else reads the topic)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        # The broker offers no event for a topic's creation: poll its metadata.
        while topic not in (await consumer.topics()):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        async for m in consumer:
            on_message(m.value)
    finally:
        await consumer.stop()


@dataclass
class ControllerStub:
    """Publishes ActivationMessages and reads acks and pings like a stock controller."""

    bootstrap: str
    config: InvokerConfig
    store: CouchStore
    producer: AIOKafkaProducer | None = None
    acks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pings: list[dict[str, Any]] = field(default_factory=list)
    ping_times: list[float] = field(default_factory=list)  # monotonic, as each ping came
    ack_times: dict[str, float] = field(default_factory=dict)  # its latest ack's arrival
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        self.producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, max_request_size=2_000_000
        )
        await self.producer.start()
        for topic, sink in (
            (self.config.completed_topic("0"), self._on_ack),
            (self.config.health_topic, self._on_ping),
        ):
            self._tasks.append(spawn(self._read(topic, sink), name=f"stub-{topic}"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.producer is not None:
            await self.producer.stop()

    async def _read(self, topic: str, sink: Callable[[dict[str, Any]], None]) -> None:
        def on_message(value: bytes) -> None:
            sink(loads(value))
            self._changed.set()

        await follow_topic(self.bootstrap, topic, on_message)

    def _on_ack(self, ack: dict[str, Any]) -> None:
        response: Any = ack.get("response")
        aid = ack.get("activationId") or (
            response if isinstance(response, str) else response["activationId"]
        )
        self.acks.setdefault(aid, []).append(ack)
        self.ack_times[aid] = SystemClock().now()

    def _on_ping(self, ping: dict[str, Any]) -> None:
        self.pings.append(ping)
        self.ping_times.append(SystemClock().now())

    async def create_action(
        self,
        name: str,
        code: bytes | None,
        *,
        kind: str = "python:3.11",
        namespace: str = "guest",
        binary: bool = False,
        revision_check: bool = True,
        **kw: Any,
    ) -> tuple[QualifiedName, str]:
        doc = action_document(namespace, name, kind=kind, code=code, binary=binary, **kw)
        rev = await self.store.put(self.config.whisks_db, doc)
        att = doc["exec"].get("code", {}).get("attachmentName", "")
        if att.startswith("couch:"):
            assert code is not None  # an attachment holds the code
            rev = await self.store.put_attachment(
                self.config.whisks_db,
                doc["_id"],
                rev,
                att[6:],
                code,
                doc["exec"]["code"]["attachmentType"],
            )
        return QualifiedName(namespace, name, "0.0.1"), rev

    async def publish_raw(self, value: bytes) -> None:
        assert self.producer is not None
        await self.producer.send_and_wait(self.config.invoker_topic, value)

    async def invoke(
        self,
        action: QualifiedName,
        revision: str | None,
        *,
        blocking: bool = True,
        content: Any = None,
        **kw: Any,
    ) -> str:
        msg = activation_message(
            action,
            revision,
            start_ms=SystemClock().epoch_ms(),
            blocking=blocking,
            content=content,
            **kw,
        )
        await self.publish_raw(dumps(msg.to_json()))
        return msg.activation_id

    async def wait_acks(self, aid: str, count: int = 1, timeout_s: float = 30) -> list[dict]:
        async with asyncio.timeout(timeout_s):
            while len(self.acks.get(aid, [])) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.acks[aid]

    async def wait_completion(self, aid: str, timeout_s: float = 30) -> list[dict]:
        async with asyncio.timeout(timeout_s):
            while not any("instance" in a for a in self.acks.get(aid, [])):
                self._changed.clear()
                await self._changed.wait()
        return self.acks[aid]

    async def record(self, aid: str, namespace: str = "guest", timeout_s: float = 15) -> dict:
        async with asyncio.timeout(timeout_s):
            while True:
                doc = await self.store.get(self.config.activations_db, f"{namespace}/{aid}")
                if doc is not None:
                    return doc
                await asyncio.sleep(0.05)


def make_config(tmp_path: Path, **overrides: Any) -> InvokerConfig:
    """An invoker configuration of its own: topics, databases and container names carry a
    fresh tag, so runs on shared services never see each other's."""
    tag = uuid.uuid4().hex[:8]
    values: dict[str, Any] = dict(
        topic_prefix=f"t{tag}_",
        db_prefix=f"t{tag}_",
        state_dir=str(tmp_path / "state"),
        policy="fifo",
        action_cores=(0,),
        user_memory_mb=1024,
        pause_grace_s=60,
        instance=0,
        # Container names (and the process backend's cgroups) are host-wide: a unique name
        # keeps test invokers from reaping each other's containers, or anyone else's.
        unique_name=f"t{tag}",
        # The tests' admin password (by default an invoker makes a random one).
        admin_password="invoker.pass",
    )
    values.update(overrides)
    return InvokerConfig(**values)


@asynccontextmanager
async def controller(
    kafka: KafkaAddress, couchdb: CouchAddress, config: InvokerConfig
) -> AsyncIterator[ControllerStub]:
    """A controller stub on the real services, for an invoker running elsewhere."""
    store = CouchStore(couchdb.url, couchdb.user, couchdb.password)
    for db in (config.whisks_db, config.activations_db):
        await store.ensure_db(db)
    await KafkaBus(kafka.bootstrap).ensure_topic(config.invoker_topic, INVOKER_TOPIC_CONFIG)
    stub = ControllerStub(kafka.bootstrap, config, store)
    await stub.start()
    try:
        yield stub
    finally:
        await stub.stop()
        await store.close()


@asynccontextmanager
async def running_invoker(
    kafka: KafkaAddress,
    couchdb: CouchAddress,
    tmp_path: Path,
    backend: ContainerBackend | None = None,
    **overrides: Any,
) -> AsyncIterator[tuple[Invoker, ControllerStub]]:
    """Yield (invoker, controller stub) on the real services; everything stopped after."""
    config = make_config(tmp_path, **overrides)
    bus = KafkaBus(kafka.bootstrap, session_timeout_ms=6000, heartbeat_interval_ms=1000)
    store = CouchStore(couchdb.url, couchdb.user, couchdb.password)
    for db in (config.whisks_db, config.activations_db):
        await store.ensure_db(db)
    backend = backend or ProcessBackend(
        state_dir=tmp_path / "containers", name_prefix=config.container_prefix
    )
    gpu_pool = make_gpu_pool(config) if config.gpu is not None else None
    invoker = Invoker(
        config, bus=bus, store=store, backend=backend, clock=SystemClock(), gpu_pool=gpu_pool
    )
    stub = ControllerStub(kafka.bootstrap, config, store)
    await invoker.start()
    await stub.start()
    try:
        yield invoker, stub
    finally:
        await stub.stop()
        await invoker.stop(deadline_s=5)
        await store.close()
