"""The stand-in scheduler's own decisions, for tests that run a whole scheduler deployment
(a front in the scheduler mode, the stand-in, invokers in the FPC mode) where the Scala
scheduler cannot run.

It does what the stock scheduler does at the edges every other component sees: registers
``<cluster>/scheduler/<S>`` in etcd, reads the ActivationMessages a controller publishes on
``<prefix>scheduler<S>``, makes a memory queue per action revision (writing its leader key,
so controllers find it), asks invokers for containers on ``invoker<N>`` when calls wait and
no container is free to fetch them, choosing invokers by the records they keep in etcd, and
when an action is updated drops the old revision's queue and asks its invokers to delete
that revision's containers.

Its decisions are deliberately plain (one more container for each call that no fetch or
creation is about to take, up to ``max_containers`` a queue, on the invoker with the most
free memory; for ``warm_grace_s`` after calls start to wait, each alive container counts as
about to fetch one, as it is between fetches while it reports its last call); upstream's
scheduling decision maker weighs durations and throttles, which no test here depends on. A
creation that fails leaves the queue's calls waiting for the next try (each tick), as
upstream retries; it does not fail them. When etcd, CouchDB or Kafka fails it logs the error
and goes on (an arrival it was handling then is dropped).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiokafka.errors import KafkaError

from front.fpc import read_invokers
from harness.controller import follow_topic
from harness.fpc_scheduler import (
    QueueKey,
    StandInScheduler,
    action_metadata,
    queue_key,
    stand_in_scheduler,
)
from invoker.fpc.messages import CreationAck
from whisk.bus.kafka import KafkaBus
from whisk.etcd import EtcdClient, EtcdError
from whisk.protocol import ProtocolError, QualifiedName, loads, parse_activation
from whisk.protocol.etcd_keys import (
    ResourceRecord,
    SchedulerState,
    queue_leader_key,
    scheduler_key,
)
from whisk.store import Store, StoreError
from whisk.supervisor import spawn

log = logging.getLogger(__name__)


@dataclass
class _Queue:
    invocation_namespace: str
    action: QualifiedName
    revision: str | None
    metadata: dict[str, Any]
    creating: dict[str, int] = field(default_factory=dict)  # creation id -> invoker
    invokers: set[int] = field(default_factory=set)  # asked for a container of it, ever
    waiting_since: float | None = None  # when its calls last started to wait
    made: list[float] = field(default_factory=list)  # when each creation was acked as up

    @property
    def memory_mb(self) -> int:
        return int(self.metadata.get("limits", {}).get("memory", 256))


@dataclass
class QueueProvisioner:
    """Drives ``scheduler`` (started, with a broker) from ``<prefix>scheduler<S>``."""

    scheduler: StandInScheduler
    bootstrap: str
    store: Store
    whisks_db: str
    etcd: EtcdClient
    cluster: str = "whisk"
    max_containers: int = 16  # a queue's containers, alive and being made
    tick_s: float = 0.1
    warm_grace_s: float = 1.0  # how long a backlog waits for the alive containers' fetches
    start_grace_s: float = 5.0  # how long a container acked as up counts until its first fetch
    creations: int = 0  # asked for in all: what a test checks
    deletions: list[tuple[str, str | None]] = field(default_factory=list)  # (docid, revision)
    _queues: dict[QueueKey, _Queue] = field(default_factory=dict)
    _current: dict[tuple[str, str], QueueKey] = field(default_factory=dict)  # (ns, docid)
    _records: dict[int, ResourceRecord] = field(default_factory=dict)
    _arrivals: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def topic(self) -> str:
        return f"{self.scheduler.topic_prefix}scheduler{self.scheduler.index}"

    def state(self) -> SchedulerState:
        s = self.scheduler
        return SchedulerState(s.index, len(self._current), s.host, s.port)

    async def start(self) -> None:
        """Register in etcd and follow the topic (created here: the scheduler owns it)."""
        self.scheduler.on_ack = self._on_ack
        await KafkaBus(self.bootstrap).ensure_topic(self.topic, {})
        await self.etcd.put(
            scheduler_key(self.cluster, self.scheduler.index), self.state().to_json()
        )
        self._tasks = [
            spawn(follow_topic(self.bootstrap, self.topic, self._arrivals.put_nowait), name="in"),
            spawn(self._serve(), name="queues"),
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            await self.etcd.delete(scheduler_key(self.cluster, self.scheduler.index))
            for ns, docid in self._current:
                await self.etcd.delete(queue_leader_key(self.cluster, ns, docid))
        except EtcdError as e:
            log.warning("leaving etcd: %s", e)

    async def _serve(self) -> None:
        """Take arrivals in order; every tick, read the invokers' records and provision
        every queue. Only the wait for an arrival is timed: an arrival is never cut off."""
        loop = asyncio.get_running_loop()
        tick_at = loop.time()
        while True:
            raw = None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, tick_at - loop.time())):
                    raw = await self._arrivals.get()
            try:
                if raw is not None:
                    await self._arrive(raw)
                if loop.time() >= tick_at:
                    await self._read_records()
                    for key in list(self._queues):
                        await self._provision(key)
                    tick_at = loop.time() + self.tick_s
            except (EtcdError, StoreError, KafkaError) as e:  # the services' trouble: go on
                log.error("the stand-in scheduler could not act: %s", e)

    async def _arrive(self, raw: bytes) -> None:
        try:
            msg = parse_activation(raw)
        except ProtocolError as e:
            log.error("not an ActivationMessage on %s: %s", self.topic, e)
            return
        ns, action = msg.user.namespace, msg.action
        key = await self._queue_for(ns, action, msg.revision)
        if key is None:
            return
        message = loads(raw)  # as the controller wrote it: it parsed above
        message["revision"] = key[2]  # an older revision's call runs the current code
        self.scheduler.enqueue(ns, action, key[2], message)
        await self._provision(key)

    async def _queue_for(
        self, ns: str, action: QualifiedName, revision: str | None
    ) -> QueueKey | None:
        """The current queue of the action: made on its first call, replaced when a call
        names a newer revision (the old one's containers deleted)."""
        current = self._current.get((ns, action.docid))
        if current is not None and _generation(revision) <= _generation(current[2]):
            return current
        doc = await self.store.get(self.whisks_db, action.docid)
        if doc is None:
            log.error("activation for %s, which has no document: dropped", action.docid)
            return None
        key = queue_key(ns, action, revision)
        self._queues[key] = _Queue(ns, action, revision, action_metadata(doc))
        self._current[(ns, action.docid)] = key
        if current is not None:
            await self._retire(current)
        else:
            leader = queue_leader_key(self.cluster, ns, action.docid)
            await self.etcd.put(leader, self.state().endpoints_json())
            await self.etcd.put(
                scheduler_key(self.cluster, self.scheduler.index), self.state().to_json()
            )
        return key

    async def _retire(self, key: QueueKey) -> None:
        old = self._queues.pop(key)
        self.scheduler.remove_queue(old.invocation_namespace, old.action, old.revision)
        for invoker in sorted(old.invokers):
            await self.scheduler.delete_containers(
                invoker, old.invocation_namespace, old.action, old.revision, old.metadata
            )
        self.deletions.append((old.action.docid, old.revision))

    async def _provision(self, key: QueueKey) -> None:
        q = self._queues[key]
        s = self.scheduler
        backlog = len(s.queued(q.invocation_namespace, q.action, q.revision))
        seen = [
            c
            for c in s.seen.values()
            if (c.invocation_namespace, f"{c.fqn['path']}/{c.fqn['name']}", c.revision) == key
        ]
        alive = sum(c.alive for c in seen)
        now = asyncio.get_running_loop().time()
        # A container is acked as up just before its first fetch: until that fetch it is
        # neither being made nor seen, and a call waiting then asked for one more, which
        # took the next call cold (the full runs at 90ee9bf and 3b19fd7).
        recent = sum(now - t < self.start_grace_s for t in q.made)
        starting = max(0, min(recent, len(q.made) - len(seen)))
        if not backlog:
            q.waiting_since = None
        elif q.waiting_since is None:
            q.waiting_since = now
        # A container that just ran a call fetches the next once it has reported that one: a
        # call arriving meanwhile waited for it, not for a new container (a cold second call).
        in_grace = q.waiting_since is not None and now - q.waiting_since < self.warm_grace_s
        wanted = backlog - len(q.creating) - starting - (alive if in_grace else 0)
        while wanted > 0 and alive + starting + len(q.creating) < self.max_containers:
            invoker = self._choose(q.memory_mb)
            if invoker is None:
                return
            creation = await s.create_container(
                invoker, q.invocation_namespace, q.action, q.revision, q.metadata
            )
            q.creating[creation.creation_id] = invoker
            q.invokers.add(invoker)
            self.creations += 1
            wanted -= 1

    def _choose(self, memory_mb: int) -> int | None:
        """The up invoker with the most memory free, less the creations asked of it."""
        asked: dict[int, int] = {}
        for q in self._queues.values():
            for invoker in q.creating.values():
                asked[invoker] = asked.get(invoker, 0) + q.memory_mb
        free = {
            n: r.free_memory_mb - asked.get(n, 0)
            for n, r in self._records.items()
            if r.status == "up"
        }
        best = max(free, key=lambda n: (free[n], -n), default=None)
        return best if best is not None and free[best] >= memory_mb else None

    async def _read_records(self) -> None:
        try:
            records = await read_invokers(self.etcd, self.cluster)
        except EtcdError as e:
            log.warning("reading the invokers: %s", e)
            return
        self._records = {invoker.instance: record for invoker, record in records.items()}

    def _on_ack(self, ack: CreationAck) -> None:
        for q in self._queues.values():
            if q.creating.pop(ack.creation_id, None) is not None:
                if ack.error is not None:
                    log.warning("creation for %s failed: %s %s", q.action, ack.error, ack.reason)
                else:
                    q.made.append(asyncio.get_running_loop().time())
                return


def _generation(revision: str | None) -> int:
    """A CouchDB revision's generation (``3-abc`` -> 3): a later update has a higher one."""
    try:
        return int((revision or "0").split("-", 1)[0])
    except ValueError:
        return 0


@asynccontextmanager
async def provisioned_scheduler(
    bootstrap: str,
    store: Store,
    whisks_db: str,
    etcd_hosts: str,
    cluster: str = "whisk",
    **settings: Any,
) -> AsyncIterator[QueueProvisioner]:
    """A started stand-in scheduler (``settings``: :class:`StandInScheduler`'s) that makes
    its own queues and containers, registered in etcd under ``cluster``."""
    async with (
        stand_in_scheduler(bootstrap, **settings) as scheduler,
        EtcdClient(etcd_hosts) as etcd,
    ):
        provisioner = QueueProvisioner(scheduler, bootstrap, store, whisks_db, etcd, cluster)
        await provisioner.start()
        try:
            yield provisioner
        finally:
            await provisioner.stop()
