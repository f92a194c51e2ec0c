"""A stand-in for the OpenWhisk scheduler, for tests where the Scala one cannot run.

Its two faces are the real protocols: the ``activation.ActivationService`` over real gRPC
on 127.0.0.1 (a memory queue per invocation namespace, action and revision; a fetch is held
open until an activation is queued or ``hold_s`` passes), and the Kafka side, which publishes
``ContainerCreationMessage``/``ContainerDeletionMessage`` on ``<prefix>invoker<N>`` and reads
``ContainerCreationAckMessage``s from ``<prefix>creationAck<S>``. Messages are written with
``invoker.fpc.messages``, the module the invoker parses them with. Answers follow upstream's
``ActivationServiceImpl``: a fetch for a revision whose queue is gone is ``ActionMismatch``,
for an action with no queue ``NoMemoryQueue``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
from aiokafka import AIOKafkaProducer

from harness.controller import follow_topic
from invoker.fpc.activation_pb2 import (
    FetchRequest,
    FetchResponse,
    RescheduleRequest,
    RescheduleResponse,
)
from invoker.fpc.messages import ContainerCreation, ContainerDeletion, CreationAck, encode
from whisk.bus.kafka import KafkaBus
from whisk.clock import SystemClock
from whisk.protocol import QualifiedName, loads
from whisk.protocol.controller import action_document
from whisk.protocol.json import dumps_str
from whisk.supervisor import spawn

QueueKey = tuple[str, str, str | None]  # (invocationNamespace, "<path>/<name>", revision)

# The MemoryQueueError answers, exactly as upstream's ActivationResponse writes them.
NO_ACTIVATION = {
    "noActivationMessage": "no activation message exist",
    "type": "NoActivationMessage",
}
NO_MEMORY_QUEUE = {"noMemoryQueue": "no memory queue exist", "type": "NoMemoryQueue"}
ACTION_MISMATCH = {"actionMisMatch": "action version does not match", "type": "ActionMismatch"}


def queue_key(invocation_ns: str, action: QualifiedName, revision: str | None) -> QueueKey:
    """Upstream keys a queue by namespace and DocInfo (doc id and revision): the
    version in the FQN is not part of it."""
    return (invocation_ns, action.docid, revision)


def action_metadata(doc: dict[str, Any]) -> dict[str, Any]:
    """WhiskActionMetaData from an action document: the document without its code and
    CouchDB fields, as the scheduler puts it in a creation message."""
    meta = {k: v for k, v in doc.items() if not k.startswith("_") and k != "entityType"}
    meta["exec"] = {k: v for k, v in doc["exec"].items() if k != "code"}
    return meta


@dataclass
class ContainerSeen:
    """What the last fetch of a container told the scheduler."""

    invocation_namespace: str
    fqn: dict[str, Any]
    revision: str | None
    transaction_id: list[Any]
    warmed: bool
    last_duration_ms: int | None
    alive: bool
    fetches: int = 1


@dataclass
class StandInScheduler:
    """The stand-in; ``bootstrap`` (a broker) is only needed for the Kafka side."""

    bootstrap: str | None = None
    topic_prefix: str = ""
    index: str = "0"  # the scheduler's instance id: its creationAck<S> topic
    hold_s: float = 5.0  # how long a fetch waits (upstream: its 5 s ask timeout)
    host: str = "127.0.0.1"
    port: int = 0
    seen: dict[str, ContainerSeen] = field(default_factory=dict)
    acks: dict[str, CreationAck] = field(default_factory=dict)
    bad_acks: list[bytes] = field(default_factory=list)  # what did not parse as an ack
    reschedules: list[dict[str, Any]] = field(default_factory=list)
    _queues: dict[QueueKey, deque[dict[str, Any]]] = field(default_factory=dict)
    _waiters: dict[QueueKey, deque[asyncio.Future[dict[str, Any]]]] = field(default_factory=dict)
    _garbage: deque[str] = field(default_factory=deque)
    _server: Any = None
    _producer: AIOKafkaProducer | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _acked: asyncio.Event = field(default_factory=asyncio.Event)
    on_ack: Callable[[CreationAck], None] | None = None  # told of every ack that parses

    @property
    def ack_topic(self) -> str:
        return f"{self.topic_prefix}creationAck{self.index}"

    def invoker_topic(self, invoker: int) -> str:
        return f"{self.topic_prefix}invoker{invoker}"

    # -- life cycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Serve gRPC (``port`` is then the one bound), and with a broker, create the ack
        topic (the scheduler owns it) and follow it."""
        handler = grpc.method_handlers_generic_handler(
            "activation.ActivationService",
            {
                "FetchActivation": grpc.unary_unary_rpc_method_handler(
                    self._fetch,
                    request_deserializer=FetchRequest.FromString,
                    response_serializer=FetchResponse.SerializeToString,
                ),
                "RescheduleActivation": grpc.unary_unary_rpc_method_handler(
                    self._reschedule,
                    request_deserializer=RescheduleRequest.FromString,
                    response_serializer=RescheduleResponse.SerializeToString,
                ),
            },
        )
        self._server = grpc.aio.server()
        self._server.add_generic_rpc_handlers((handler,))
        self.port = self._server.add_insecure_port(f"{self.host}:{self.port}")
        await self._server.start()
        if self.bootstrap is not None:
            await KafkaBus(self.bootstrap).ensure_topic(self.ack_topic, {})
            self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap)
            await self._producer.start()
            self._tasks.append(
                spawn(follow_topic(self.bootstrap, self.ack_topic, self._on_ack), name="acks")
            )

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._producer is not None:
            await self._producer.stop()
        if self._server is not None:
            await self._server.stop(grace=None)
        for waiters in self._waiters.values():
            for w in waiters:
                w.cancel()

    # -- the queues -------------------------------------------------------------------

    def create_queue(self, invocation_ns: str, action: QualifiedName, revision: str | None) -> None:
        """A memory queue for this revision (the scheduler makes one on the first call)."""
        self._queues.setdefault(queue_key(invocation_ns, action, revision), deque())

    def remove_queue(self, invocation_ns: str, action: QualifiedName, revision: str | None) -> None:
        key = queue_key(invocation_ns, action, revision)
        self._queues.pop(key, None)

    def enqueue(
        self,
        invocation_ns: str,
        action: QualifiedName,
        revision: str | None,
        message: dict[str, Any],
    ) -> None:
        """Queue an ActivationMessage (its JSON); a fetch waiting on the queue gets it."""
        key = queue_key(invocation_ns, action, revision)
        self.create_queue(invocation_ns, action, revision)
        if not self._hand_over(key, message):
            self._queues[key].append(message)

    def queued(self, invocation_ns: str, action: QualifiedName, revision: str | None) -> list[dict]:
        return list(self._queues.get(queue_key(invocation_ns, action, revision), ()))

    def waiting(self, invocation_ns: str, action: QualifiedName, revision: str | None) -> int:
        """How many fetches are being held on this queue."""
        key = queue_key(invocation_ns, action, revision)
        return sum(not w.done() for w in self._waiters.get(key, ()))

    def answer_garbage(self, text: str = "this is not JSON", times: int = 1) -> None:
        """Answer the next ``times`` fetches with ``text`` as the activationMessage."""
        self._garbage.extend([text] * times)

    @property
    def alive_containers(self) -> set[str]:
        return {cid for cid, c in self.seen.items() if c.alive}

    def _hand_over(self, key: QueueKey, message: dict[str, Any]) -> bool:
        waiters = self._waiters.get(key)
        while waiters:
            w = waiters.popleft()
            if not w.done():
                w.set_result(message)
                return True
        return False

    # -- gRPC -------------------------------------------------------------------------

    async def _fetch(self, request: FetchRequest, context: Any) -> FetchResponse:
        action, revision = await self._read_target(request.fqn, request.rev, context)
        transid = _json(request.transactionId)
        if not (isinstance(transid, list) and len(transid) >= 2 and isinstance(transid[0], str)):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "transactionId is not a tid")
        seen = self.seen.get(request.containerId)
        self.seen[request.containerId] = ContainerSeen(
            invocation_namespace=request.invocationNamespace,
            fqn=action.to_json(),
            revision=revision,
            transaction_id=transid,
            warmed=request.warmed,
            last_duration_ms=(
                request.lastDuration.value if request.HasField("lastDuration") else None
            ),
            alive=request.alive,
            fetches=seen.fetches + 1 if seen is not None else 1,
        )
        if not request.alive:
            return _answer(NO_ACTIVATION)  # the container is gone: nothing more for it
        if self._garbage:
            return FetchResponse(activationMessage=self._garbage.popleft())
        key = queue_key(request.invocationNamespace, action, revision)
        queue = self._queues.get(key)
        if queue is None:
            same_action = any(k[:2] == key[:2] for k in self._queues)
            return _answer(ACTION_MISMATCH if same_action else NO_MEMORY_QUEUE)
        if queue:
            return _answer(queue.popleft())
        return _answer(await self._hold(key))

    async def _hold(self, key: QueueKey) -> dict[str, Any]:
        """Wait for an activation on the queue for up to ``hold_s``; an activation handed
        over just as the call ends (the client gave up) goes back to the queue's head."""
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, deque()).append(waiter)
        try:
            async with asyncio.timeout(self.hold_s):
                return await asyncio.shield(waiter)
        except TimeoutError:
            if waiter.done():
                return waiter.result()
            return NO_ACTIVATION
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._queues.setdefault(key, deque()).appendleft(waiter.result())
            raise
        finally:
            waiter.cancel()
            waiters = self._waiters.get(key)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)

    async def _reschedule(self, request: RescheduleRequest, context: Any) -> RescheduleResponse:
        action, revision = await self._read_target(request.fqn, request.rev, context)
        message = _json(request.activationMessage)
        if not isinstance(message, dict) or "activationId" not in message:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not an ActivationMessage")
        self.reschedules.append(message)
        key = queue_key(request.invocationNamespace, action, revision)
        if key not in self._queues:
            return RescheduleResponse(isRescheduled=False)
        if not self._hand_over(key, message):
            self._queues[key].appendleft(message)
        return RescheduleResponse(isRescheduled=True)

    async def _read_target(
        self, fqn: str, rev: str, context: Any
    ) -> tuple[QualifiedName, str | None]:
        """The fqn and rev fields as upstream parses them: JSON, or the call fails."""
        f, r = _json(fqn), _json(rev)
        if not (isinstance(f, dict) and isinstance(f.get("path"), str) and "name" in f):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"fqn is not an FQN: {fqn!r}")
        if r is not None and not isinstance(r, str):  # null: an action with no document
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"rev is not a DocRevision: {rev!r}"
            )
        return QualifiedName(f["path"], f["name"], f.get("version")), r

    # -- Kafka ------------------------------------------------------------------------

    async def create_container(
        self,
        invoker: int,
        invocation_ns: str,
        action: QualifiedName,
        revision: str | None,
        metadata: dict[str, Any] | None = None,
        *,
        kind: str = "python:3.11",
        retry_count: int = 0,
        creation_id: str | None = None,
        rpc_port: int | None = None,
    ) -> ContainerCreation:
        """Ask invoker ``invoker`` for a container of this revision (creating its queue,
        as the scheduler does first). ``metadata`` defaults to a plain action's;
        ``rpc_port`` names another ActivationService than this one's."""
        self.create_queue(invocation_ns, action, revision)
        creation = ContainerCreation(
            transid=[uuid.uuid4().hex, SystemClock().epoch_ms()],
            invocation_namespace=invocation_ns,
            action=action,
            revision=revision,
            metadata=metadata or _metadata(action, kind),
            scheduler_index={"asString": self.index},
            scheduler_host=self.host,
            rpc_port=self.port if rpc_port is None else rpc_port,
            creation_id=creation_id or uuid.uuid4().hex,
            retry_count=retry_count,
        )
        await self.publish(self.invoker_topic(invoker), encode(creation))
        return creation

    async def delete_containers(
        self,
        invoker: int,
        invocation_ns: str,
        action: QualifiedName,
        revision: str | None,
        metadata: dict[str, Any] | None = None,
        *,
        kind: str = "python:3.11",
    ) -> ContainerDeletion:
        """Tell invoker ``invoker`` that this revision's containers are to go."""
        deletion = ContainerDeletion(
            transid=[uuid.uuid4().hex, SystemClock().epoch_ms()],
            invocation_namespace=invocation_ns,
            action=action,
            revision=revision,
            metadata=metadata or _metadata(action, kind),
        )
        await self.publish(self.invoker_topic(invoker), encode(deletion))
        return deletion

    async def publish(self, topic: str, value: bytes) -> None:
        """Publish raw bytes (what a test sends to see a malformed message answered)."""
        if self._producer is None:
            raise RuntimeError("the stand-in scheduler was started without a Kafka broker")
        await self._producer.send_and_wait(topic, value)

    async def wait_ack(self, creation_id: str, timeout_s: float = 30) -> CreationAck:
        """The creation ack for ``creation_id``, once it is on the ack topic."""
        async with asyncio.timeout(timeout_s):
            while creation_id not in self.acks:
                self._acked.clear()
                await self._acked.wait()
        return self.acks[creation_id]

    def _on_ack(self, value: bytes) -> None:
        try:
            ack = CreationAck.from_json(value)
        except ValueError:
            self.bad_acks.append(value)
        else:
            self.acks[ack.creation_id] = ack
            if self.on_ack is not None:
                self.on_ack(ack)
        self._acked.set()


_INVALID = object()


def _json(text: str) -> Any:
    try:
        return loads(text)
    except ValueError:
        return _INVALID


def _answer(message: dict[str, Any]) -> FetchResponse:
    """Upstream's ActivationResponse: ``{"message": <activation or queue error>}``."""
    return FetchResponse(activationMessage=dumps_str({"message": message}))


def _metadata(action: QualifiedName, kind: str) -> dict[str, Any]:
    doc = action_document(action.namespace, action.name, kind=kind, package=action.package)
    return action_metadata(doc)


@asynccontextmanager
async def stand_in_scheduler(
    bootstrap: str | None = None, **settings: Any
) -> AsyncIterator[StandInScheduler]:
    """A started stand-in, stopped after."""
    scheduler = StandInScheduler(bootstrap, **settings)
    await scheduler.start()
    try:
        yield scheduler
    finally:
        await scheduler.stop()
