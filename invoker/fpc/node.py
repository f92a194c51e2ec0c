"""The scheduler ("FPC") mode of the node: container creations and deletions from
``<prefix>invoker<N>``, a :class:`~invoker.fpc.puller.Puller` per container made, creation
acks on ``<prefix>creationAck<S>`` (openwhisk-protocol.md 1.8).

Everything else is the node's own: the action comes from the same fetcher, the container
from the same pool (a paused or idle one of the same key is reused, as upstream's
Paused -> Initialize), and every pulled call runs through the same queue, dispatcher and
runner as a call received in the sharding mode (:meth:`Invoker.admit_pulled`).

Presence (:mod:`invoker.fpc.presence`): in etcd with ``--etcd-hosts`` (the stock
``CONFIG_whisk_etcd_hosts``), else none, for a scheduler told of the node otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from containers.backend import Container, ContainerError, ImagePullError
from containers.placement import IDLE_STATES, SlotState, WarmKey
from containers.pool import Lease
from invoker.actions import FetchError
from invoker.fpc.activation_client import Activation, ActivationClient, SchedulerError
from invoker.fpc.health import HealthTest
from invoker.fpc.journal import Journal, Pulled
from invoker.fpc.messages import (
    ContainerCreation,
    ContainerDeletion,
    CreationAck,
    MalformedMessage,
    encode,
    error_ack_for,
    parse_container_message,
)
from invoker.fpc.presence import EtcdPresence, NoPresence, Presence
from invoker.fpc.puller import Puller, Target
from invoker.gpu import KAAS, is_kaas_action
from whisk.protocol import (
    Action,
    ProtocolError,
    QualifiedName,
    StatusCode,
    dumps,
    parse_activation,
)
from whisk.protocol.etcd_keys import ContainerRef, InvokerId, ResourceRecord

if TYPE_CHECKING:
    from invoker.service import Invoker

log = logging.getLogger(__name__)

CONNECT_S = 5.0  # for a creation's ActivationService to accept a connection
RECOVERY_TRIES = 7  # reschedules of a call cut off by a crash, 0.5 s apart doubling: ~30 s


def resource_record(
    *,
    status: str,
    user_memory_mb: int,
    busy_mb: int,
    in_progress_mb: int,
    tags: tuple[str, ...],
    dedicated_namespaces: tuple[str, ...],
) -> ResourceRecord:
    """``whisk/invokers/<N>``'s value (upstream's InvokerResourceMessage, MB): idle kept
    containers count as free, since a creation may evict them."""
    return ResourceRecord(
        status=status,
        free_memory_mb=max(0, user_memory_mb - busy_mb - in_progress_mb),
        busy_memory_mb=busy_mb,
        in_progress_memory_mb=in_progress_mb,
        tags=tags,
        dedicated_namespaces=dedicated_namespaces,
    )


def _creation_error(e: Exception, blackbox: bool) -> tuple[str, str]:
    """The ContainerCreationError (and reason) of a container that could not be made."""
    if isinstance(e, ImagePullError | ValueError):  # the action's image or kind
        return ("BlackBoxError" if blackbox else "WhiskError"), str(e)
    if isinstance(e, ContainerError):
        return "WhiskError", f"the container could not be created: {e}"
    return "UnknownError", f"{e.__class__.__name__}: {e}"


class FpcNode:
    """The mode's state: the pullers by container id, whether creations are taken."""

    def __init__(self, invoker: Invoker, presence: Presence | None = None) -> None:
        self.invoker = invoker
        self.presence: Presence = presence or presence_for(invoker)
        self.health = HealthTest(invoker)
        cfg = invoker.config
        self.journal = Journal(Path(cfg.state_dir) / f"{cfg.container_prefix}.fpc-pulled")
        self.kept: dict[str, ContainerRef] = {}  # containers kept warm, by container name
        invoker.pool.on_removed = self._removed
        self.pullers: dict[str, Puller] = {}
        self.accepting = True  # False while disabled or stopping
        self.in_progress = 0  # containers being made
        self.in_progress_mb = 0  # and their memory
        self.creations = 0  # creation messages handled, answered with an ack
        self._tasks: set[asyncio.Task[Any]] = set()
        # Creations made at once (upstream's maxPeek: creation messages taken while in progress).
        self._peek = asyncio.Semaphore(invoker.config.max_peek)

    # -- life cycle --

    async def start(self) -> None:
        if isinstance(self.presence, NoPresence):
            log.warning(
                "scheduler mode without presence: nothing is published in etcd, so only a "
                "scheduler that is told of this node sends it creations"
            )
        await self.presence.start(self.resource_record)
        self.invoker.supervisor.start("health-test", self.health.run, critical=False)
        if left := self.journal.entries():
            log.warning("%d pulled calls were cut off by the last run's end: recovering", len(left))
            task = self.invoker.supervisor.spawn(self.recover(left), track=self.invoker._tasks)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def stop_pulling(self, destroy: bool = False) -> None:
        """No more creations or fetches; calls already pulled finish (or are handed back)."""
        self.accepting = False
        for puller in list(self.pullers.values()):
            puller.stop(destroy)

    async def close(self, deadline_s: float) -> None:
        """Wait for the pullers to end (their clients closed), then leave presence."""
        self.stop_pulling()
        await self.invoker.supervisor.stop("health-test")
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=deadline_s)
            for t in late:
                t.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self.presence.close()

    # -- what the admin API and presence read --

    def resource_record(self) -> ResourceRecord:
        inv = self.invoker
        busy = sum(p.lease.slot.memory_mb for p in self.pullers.values() if p.lease is not None)
        if not inv.enabled or self.invoker._stopping.is_set():
            status = "down"
        elif set(inv.health.problems) - {"presence"}:  # presence: what this record is
            status = "unhealthy"
        else:
            status = "up"
        return resource_record(
            status=status,
            user_memory_mb=inv.config.user_memory_mb,
            busy_mb=busy,
            in_progress_mb=self.in_progress_mb,
            tags=inv.config.resource_tags,
            dedicated_namespaces=inv.config.dedicated_namespaces,
        )

    def status(self) -> dict[str, Any]:
        """The mode's part of ``GET /status``."""
        return {
            "accepting": self.accepting,
            "presence": self.presence.state,
            "containersWithClients": len(self.pullers),
            "creationsInProgress": self.in_progress,
            "creationsAnswered": self.creations,
            "health": self.health.state,
            "healthTests": self.health.tests,
            "resources": json.loads(self.resource_record().to_json()),
        }

    def pool_state(self) -> dict[str, Any]:
        """Upstream's ``TotalContainerPoolState``: containers in progress, prewarmed (stem
        cells by kind), busy (with a client) and kept warm."""
        slots = [  # the health test's container is not the scheduler's (as upstream's)
            s
            for s in self.invoker.pool.slots.values()
            if s.key is None or s.key.docid != self.health.docid
        ]
        prewarm: dict[str, int] = {}
        for s in slots:
            if s.key is None and s.state in (SlotState.PREWARM, SlotState.STARTING):
                prewarm[s.kind] = prewarm.get(s.kind, 0) + 1
        busy = [self._info(p) for p in self.pullers.values()]
        warm = [
            {"containerId": s.container.name, "action": s.key.docid, "kind": s.kind}
            for s in slots
            if s.key is not None and s.state in IDLE_STATES and s.container is not None
        ]
        in_progress = self.in_progress
        return {
            "totalContainers": len(slots),
            "inProgressCount": in_progress,
            "prewarmedPool": {"total": sum(prewarm.values()), "countsByKind": prewarm},
            "busyPool": {"total": len(busy), "containers": busy},
            "pausedPool": {"total": len(warm), "containers": warm},
        }

    def pool_count(self) -> int:
        """``GET /pool/count``: busy + paused + in progress, as upstream counts."""
        state = self.pool_state()
        return state["busyPool"]["total"] + state["pausedPool"]["total"] + state["inProgressCount"]

    @staticmethod
    def _info(p: Puller) -> dict[str, Any]:
        return {
            "containerId": p.container_id,
            "action": p.target.docid,
            "invocationNamespace": p.target.invocation_namespace,
            "revision": p.target.revision,
            "kind": p.lease.slot.kind if p.lease is not None else KAAS,
            "calls": p.calls,
            "running": p.running,
        }

    # -- the feed --

    async def take(self, raw: bytes) -> None:
        """Handle one message from ``invoker<N>``; never raises (nothing ends the feed)."""
        try:
            message = parse_container_message(raw)
        except MalformedMessage as e:
            await self._malformed(e)
            return
        except Exception:
            log.exception("reading a container message failed")
            return
        try:
            if isinstance(message, ContainerDeletion):
                self.delete(message)
            elif message.is_warm_up:
                log.debug("the scheduler's warm-up creation: dropped")
            else:
                async with self._peek:
                    await self.create(message)
        except Exception:
            log.exception("handling a container message failed")

    async def _malformed(self, e: MalformedMessage) -> None:
        self.invoker.metrics.bad_messages.inc()
        log.error("bad container message: %s", e.reason[:500])
        ack = error_ack_for(e, self.invoker.instance.to_json())
        index = e.fields.get("rootSchedulerIndex")
        scheduler = index.get("asString") if isinstance(index, dict) else None
        if ack is None or not isinstance(scheduler, str):
            log.error("bad container message: no creation id or scheduler to answer")
            return
        await self._send(scheduler, dumps(ack))

    async def _send(self, scheduler: str, value: bytes) -> None:
        topic = f"{self.invoker.config.topic_prefix}creationAck{scheduler}"
        try:
            await self.invoker.producer.send(topic, value)
        except Exception as e:
            log.error("a creation ack to %s could not be sent: %s", topic, e)

    async def _ack(
        self, c: ContainerCreation, error: str | None = None, reason: str | None = None
    ) -> None:
        self.creations += 1
        if error is not None:
            log.warning("creation %s for %s failed: %s: %s", c.creation_id, c.action, error, reason)
        ack = CreationAck.for_creation(c, self.invoker.instance.to_json(), error, reason)
        await self._send(c.scheduler_index["asString"], encode(ack))

    async def create(self, c: ContainerCreation) -> None:
        """Make (or take warm) a container for the creation, ack it, start its puller."""
        inv = self.invoker
        if not self.accepting:
            await self._ack(c, "ResourceNotEnoughError", f"{inv.instance.label} is disabled")
            return
        try:
            action = await inv.fetcher.fetch(c.action.docid, c.revision)
        except FetchError as e:
            await self._ack(c, "DBFetchError", e.message)
            return
        concurrency = inv._concurrency(action)  # calls its container runs at once
        if is_kaas_action(action):
            await self._ktask_puller(c, action, concurrency)
            return
        key = WarmKey(c.invocation_namespace, action.docid, action.revision)
        memory = action.limits.memory_mb
        lease = inv.pool.reserve(key, action.kind, memory, action.image, concurrency)
        if lease is None:
            free = inv.config.user_memory_mb - inv.pool.used_memory_mb
            await self._ack(c, "ResourceNotEnoughError", f"{memory} MB asked, {free} MB free")
            return
        self.in_progress += 1
        self.in_progress_mb += memory
        try:
            container = await inv.pool.prepare(lease, c.invocation_namespace, action.name)
        except Exception as e:
            inv.pool.release(lease, healthy=False)
            await self._ack(c, *_creation_error(e, action.is_blackbox))
            return
        finally:
            self.in_progress -= 1
            self.in_progress_mb -= memory
        if not self.accepting:  # disabled or stopping while it was being made
            inv.pool.release(lease, healthy=True)
            await self._ack(c, "ResourceNotEnoughError", f"{inv.instance.label} is disabled")
            return
        await self._start_puller(c, action, container.name, lease, concurrency)

    async def _ktask_puller(self, c: ContainerCreation, action: Action, concurrency: int) -> None:
        """A ``kaas`` action's calls are kTasks, which the GPU pool runs with no container
        and no core (as in the sharding mode): its "container" is a puller alone, named as
        a container is, that takes no memory. Without a GPU pool the creation fails with a
        WhiskError, which upstream's scheduler retries on another invoker."""
        inv = self.invoker
        if inv.gpu_pool is None:
            reason = f"{inv.instance.label} has no GPU pool to run kTasks"
            await self._ack(c, "WhiskError", reason)
            return
        name = f"{inv.config.container_prefix}_kaas_{uuid.uuid4().hex[:12]}"
        await self._start_puller(c, action, name, None, concurrency)

    async def _start_puller(
        self,
        c: ContainerCreation,
        action: Action,
        container_id: str,
        lease: Lease | None,
        concurrency: int,
    ) -> None:
        """Connect the container's activation client, ack the creation and start pulling;
        a scheduler that cannot be reached gets an error ack, the container kept warm."""
        inv = self.invoker
        client = ActivationClient(
            c.scheduler_host,
            c.rpc_port,
            invocation_namespace=c.invocation_namespace,
            action=c.action,
            revision=c.revision,
            container_id=container_id,
            clock=inv.clock,
        )
        try:
            await client.connect(CONNECT_S)
        except SchedulerError as e:  # WhiskError: upstream's scheduler retries elsewhere
            if lease is not None:
                inv.pool.release(lease, healthy=True)  # kept warm for a later creation
            await client.close(goodbye=False)
            await self._ack(c, "WhiskError", f"its ActivationService cannot be reached: {e}")
            return
        puller = Puller(
            client,
            lease,
            Target(c.invocation_namespace, action.docid, c.revision),
            admit=inv.admit_pulled,
            answer_bad=self._answer_bad,
            on_ran=self.health.add,
            journal=self.journal,
            clock=inv.clock,
            unused_s=inv.config.pause_grace_s,
            concurrency=concurrency,
        )
        entry = ContainerRef(
            c.invocation_namespace, c.action.path, c.action.name, c.revision or "", container_id
        )
        self.pullers[container_id] = puller
        self.kept.pop(container_id, None)
        self.presence.add_container(entry)
        await self._ack(c)
        task = inv.supervisor.spawn(self._run(puller, entry), track=inv._tasks)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer_bad(self, error: ProtocolError) -> None:
        """A pulled activation that fails validation but names its controller: answered
        with a whisk error, as a bad message on ``invoker<N>`` is in the sharding mode."""
        runner, p = self.invoker.runner, error.partial
        self.invoker.metrics.bad_messages.inc()
        self.invoker.metrics.bad_message_kinds.labels(error.kind).inc()
        log.error("bad pulled activation %s: %s", p.activation_id, error.reason[:500])
        reason = f"The activation message is invalid: {error.reason}"
        await runner.answer_fallback(p, runner.fallback(p, StatusCode.WHISK_ERROR, reason))

    async def _run(self, puller: Puller, entry: ContainerRef) -> None:
        """A puller's life, then its container's release and its client's goodbye."""
        keep = False
        try:
            keep = await puller.pull()
        finally:
            self.pullers.pop(puller.container_id, None)
            if keep and puller.lease is not None:  # a kTask puller has no container to keep
                self.kept[entry.container_id] = entry
                self.presence.warm(entry)
            else:
                self.presence.remove(entry)
            if puller.lease is not None:
                self.invoker.pool.release(puller.lease, healthy=keep)
            await puller.client.close()

    # -- calls a crash cut off --

    async def recover(self, left: list[Pulled]) -> None:
        """Answer for the calls the last run pulled and never answered (it was killed):
        acknowledged again if the record was stored, else given back to their scheduler,
        else answered with a whisk error. Each leaves the journal once handled."""
        await asyncio.gather(*(self._recover(entry) for entry in left))

    async def _recover(self, entry: Pulled) -> None:
        inv, aid = self.invoker, entry.activation_id
        try:
            msg = parse_activation(dumps(entry.activation))
            action = QualifiedName(**entry.action)
        except (ProtocolError, TypeError) as e:
            log.error("pulled call %s cannot be recovered: %s", aid, e)
            self.journal.remove(aid)
            return
        if (reack := await inv.reack_if_finished(msg)) is not None:
            await reack
        elif await self._reschedule(entry, action, Activation(msg, entry.activation)):
            log.info("activation %s, cut off by a restart, rescheduled", aid)
        else:
            reason = (
                "The invoker restarted while it held the activation, and the scheduler "
                "did not take it back."
            )
            p = msg.partial()
            await inv.runner.answer_fallback(
                p, inv.runner.fallback(p, StatusCode.WHISK_ERROR, reason), msg
            )
        self.journal.remove(aid)

    async def _reschedule(self, entry: Pulled, action: QualifiedName, a: Activation) -> bool:
        """Give a call back to the scheduler it came from, retried while it is away."""
        client = ActivationClient(
            entry.host,
            entry.port,
            invocation_namespace=entry.invocation_namespace,
            action=action,
            revision=entry.revision,
            container_id=f"{self.invoker.instance.label}-recovery",
            clock=self.invoker.clock,
        )
        try:
            for attempt in range(RECOVERY_TRIES):
                try:
                    return await client.reschedule(a)
                except SchedulerError as e:
                    log.warning(
                        "rescheduling %s (try %d): %s", a.message.activation_id, attempt + 1, e
                    )
                    if attempt + 1 < RECOVERY_TRIES:
                        await asyncio.sleep(0.5 * 2**attempt)
            return False
        finally:
            await client.close(goodbye=False)

    def _removed(self, container: Container) -> None:
        """A kept container the pool removed (evicted, idle too long): its warmed key goes."""
        if (ref := self.kept.pop(container.name, None)) is not None:
            self.presence.remove(ref)

    def delete(self, d: ContainerDeletion) -> None:
        """End the pullers of that revision (their containers go) and remove its kept ones."""
        doomed = [
            p
            for p in self.pullers.values()
            if p.target.invocation_namespace == d.invocation_namespace
            and p.target.docid == d.action.docid
            and p.target.revision == d.revision
        ]
        for p in doomed:
            p.stop(destroy=True)
        pool = self.invoker.pool
        key = WarmKey(d.invocation_namespace, d.action.docid, d.revision)
        kept = [s for s in pool.slots.values() if s.key == key and s.state in IDLE_STATES]
        for slot in kept:
            pool.condemn(slot)
        log.info(
            "deletion of %s@%s: %d pullers stopped, %d kept containers removed",
            d.action.docid,
            d.revision,
            len(doomed),
            len(kept),
        )


def presence_for(invoker: Invoker) -> Presence:
    """In etcd when the node has its hosts, as the stock FPC invoker; else none."""
    cfg = invoker.config
    if not cfg.etcd_hosts:
        return NoPresence()
    inst = invoker.instance
    return EtcdPresence(
        cfg.etcd_hosts,
        InvokerId(inst.instance, inst.unique_name, inst.displayed_name),
        clock=invoker.clock,
        supervisor=invoker.supervisor,
        cluster=cfg.cluster_name,
        lease_ttl_s=cfg.etcd_lease_timeout_s,
    )
