"""The controller side of the bus: publishing ActivationMessages, consuming acks on
``completed<C>``, and waiting for blocking results.

Two ways to reach invokers, as the stock controller's two load balancers:
- sharding (``ShardingContainerPoolBalancer``): activations go to ``invoker<N>``, chosen by
  :class:`~front.balancer.Balancer` from the pings on ``health``; the front keeps
  ``whisk.system/invokerHealthTestAction<C>`` in the whisks database and sends it to every
  invoker that is not yet (or no longer) healthy;
- the scheduler mode (``FPCPoolBalancer``): activations go to ``scheduler<S>``, chosen by
  :class:`~front.fpc.SchedulerDirectory` from etcd; the invokers test themselves and say
  their health in etcd, and no pings are read.
Either way the acks come back on ``completed<C>``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from front.balancer import Balancer, Result
from front.fpc import NoScheduler, SchedulerDirectory
from front.metrics import FrontMetrics
from whisk.bus import Bus, Consumer, Record
from whisk.clock import Clock
from whisk.protocol import ActivationRecord, ProtocolError, QualifiedName, dumps
from whisk.protocol.controller import action_document, activation_message
from whisk.protocol.errors import INTERNAL
from whisk.protocol.messages import Identity, parse_ack, parse_ping
from whisk.store import Store, StoreError
from whisk.supervisor import Supervisor

log = logging.getLogger(__name__)

HEALTH_ACTION_CODE = b"function main(params) { return params; }"


class NoInvokers(Exception):
    """No healthy invoker can take the activation (HTTP 503)."""


@dataclass
class _InFlight:
    instance: int | None  # None: sent to a scheduler, which chooses the invoker
    memory_mb: int
    health: bool
    timer: asyncio.TimerHandle | None = None


class Controller:
    def __init__(
        self,
        bus: Bus,
        store: Store,
        clock: Clock,
        *,
        controller_id: str = "0",
        topic_prefix: str = "",
        whisks_db: str,
        activations_db: str,
        system_identity: Identity,
        schedulers: SchedulerDirectory | None = None,
    ) -> None:
        """``schedulers``: the scheduler mode's view of etcd; None for the sharding mode."""
        self.bus = bus
        self.store = store
        self.clock = clock
        self.controller_id = controller_id
        self.topic_prefix = topic_prefix
        self.whisks_db = whisks_db
        self.activations_db = activations_db
        self.system = system_identity
        self.balancer = Balancer()
        self.schedulers = schedulers
        self.producer = bus.producer()
        self.acks = bus.consumer(
            f"{topic_prefix}completed{controller_id}", f"{topic_prefix}completed{controller_id}"
        )
        self.health = (
            None
            if schedulers is not None
            else bus.consumer(f"{topic_prefix}health", f"{topic_prefix}health{controller_id}")
        )
        self.health_action = QualifiedName(
            "whisk.system", f"invokerHealthTestAction{controller_id}"
        )
        self.health_transid = ["sid_invokerHealth", clock.epoch_ms()]
        self.metrics = FrontMetrics()
        self._waiters: dict[str, asyncio.Future[dict[str, Any] | None]] = {}
        self._inflight: dict[str, _InFlight] = {}
        # Owns the consumers and the short tasks; consumers that keep failing fail the front.
        self.supervisor = Supervisor(clock)
        self._committing: asyncio.Task[None] | None = None

    async def start(self) -> None:
        topics = [f"{self.topic_prefix}completed{self.controller_id}"]
        if self.health is not None:
            topics.append(f"{self.topic_prefix}health")
        for topic in topics:
            await self.bus.ensure_topic(
                topic, {"retention.ms": "3600000", "max.message.bytes": "1054644"}
            )
        for db in (self.whisks_db, self.activations_db):
            await self.store.ensure_db(db)
        await self.producer.start()
        await self.acks.start()
        self.supervisor.start("acks", lambda: self._consume(self.acks, "acks", self._on_acks))
        if self.health is not None:
            await self._ensure_health_action()
            await self.health.start()
            health = self.health
            self.supervisor.start("health", lambda: self._consume(health, "health", self._on_pings))
        if self.schedulers is not None:
            self.supervisor.start("schedulers", self.schedulers.keep_fresh)

    async def stop(self) -> None:
        await self.supervisor.close()
        for w in self._waiters.values():
            w.cancel()
        await self.acks.stop()
        if self.health is not None:
            await self.health.stop()
        await self.producer.stop()

    async def _ensure_health_action(self) -> None:
        doc = action_document(
            "whisk.system",
            self.health_action.name,
            kind="nodejs:default",
            code=HEALTH_ACTION_CODE,
            memory_mb=128,
            updated_ms=self.clock.epoch_ms(),
        )
        old = await self.store.get(self.whisks_db, doc["_id"])
        if old is not None:
            doc["_rev"] = old["_rev"]
        await self.store.put(self.whisks_db, doc)

    # -- invoking --

    async def invoke(
        self,
        user: Identity,
        action: QualifiedName,
        revision: str | None,
        memory_mb: int,
        timeout_ms: int,
        content: Any,
        *,
        blocking: bool,
        wait_s: float,
        init_args: tuple[str, ...] = (),
        cause: str | None = None,
        transid: list[Any] | None = None,
    ) -> tuple[str, ActivationRecord | None]:
        """Publish an activation; for a blocking call wait up to ``wait_s`` for its record.
        Returns (activation id, record or None if not finished in time). ``cause`` is the
        enclosing sequence's activation id, for a sequence's component. A record that is
        not one (from the ack or the database) raises ProtocolError."""
        instance, topic = await self._destination(user, action, memory_mb)
        msg = activation_message(
            action,
            revision,
            start_ms=self.clock.epoch_ms(),
            user=user,
            blocking=blocking,
            content=content,
            controller=self.controller_id,
            init_args=init_args,
            cause=cause,
            transid=transid,
        )
        aid = msg.activation_id
        waiter = None
        if blocking:
            waiter = self._waiters[aid] = asyncio.get_running_loop().create_future()
        self._track(aid, instance, memory_mb, timeout_ms, health=False)
        try:
            await self.producer.send(topic, dumps(msg.to_json()))
        except Exception:
            self._waiters.pop(aid, None)
            self._untrack(aid)
            raise
        if waiter is None:
            return aid, None
        try:
            async with asyncio.timeout(wait_s):
                record = await waiter
                if record is None:  # shrunk result: the record is in the database
                    record = await self._poll_record(user.namespace, aid)
                return aid, ActivationRecord.from_json(record)
        except TimeoutError:
            return aid, None
        finally:
            self._waiters.pop(aid, None)

    async def _destination(
        self, user: Identity, action: QualifiedName, memory_mb: int
    ) -> tuple[int | None, str]:
        """(the invoker chosen, or None for a scheduler; the topic to publish on).
        NoInvokers when nothing can take the activation."""
        if self.schedulers is not None:
            try:
                sid = await self.schedulers.scheduler_for(user.namespace, action.docid)
            except NoScheduler as e:
                raise NoInvokers(str(e)) from e
            return None, f"{self.topic_prefix}scheduler{sid}"
        instance = self.balancer.choose(user.namespace, action.docid, memory_mb)
        if instance is None:
            raise NoInvokers("No invokers available.")
        return instance, f"{self.topic_prefix}invoker{instance}"

    async def _poll_record(self, namespace: str, aid: str) -> dict[str, Any]:
        delay = 0.05
        while True:
            try:
                doc = await self.store.get(self.activations_db, f"{namespace}/{aid}")
                if doc is not None:
                    return doc
            except StoreError as e:
                log.warning("polling activation %s: %s", aid, e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _track(
        self, aid: str, instance: int | None, memory_mb: int, timeout_ms: int, health: bool
    ) -> None:
        # The stock ack timeout: max(action timeout, 60 s) * 2 + 1 min.
        timeout_s = max(timeout_ms / 1000, 60.0) * 2 + 60.0
        entry = _InFlight(instance, memory_mb, health)
        entry.timer = asyncio.get_running_loop().call_later(timeout_s, self._forced, aid)
        self._inflight[aid] = entry

    def _untrack(self, aid: str) -> _InFlight | None:
        entry = self._inflight.pop(aid, None)
        if entry is not None:
            if entry.timer is not None:
                entry.timer.cancel()
            if entry.instance is not None:
                self.balancer.release(entry.instance, entry.memory_mb)
        return entry

    def _forced(self, aid: str) -> None:
        entry = self._untrack(aid)
        if entry is None:
            return
        if entry.instance is None:
            log.warning("no completion for %s from the scheduler's invokers", aid)
            return
        log.warning("no completion for %s from invoker%d: slot released", aid, entry.instance)
        self.balancer.completed(entry.instance, Result.TIMEOUT, self.clock.now())

    async def _send_health_test(self, instance: int) -> None:
        msg = activation_message(
            self.health_action,
            None,
            start_ms=self.clock.epoch_ms(),
            user=self.system,
            blocking=False,
            controller=self.controller_id,
            transid=self.health_transid,
        )
        self._track(msg.activation_id, instance, 128, 60_000, health=True)
        try:
            await self.producer.send(f"{self.topic_prefix}invoker{instance}", dumps(msg.to_json()))
        except Exception as e:
            self._untrack(msg.activation_id)
            log.warning("health test to invoker%d failed: %s", instance, e)

    # -- consuming --

    def _on_ack(self, record: Record) -> None:
        """Settle one ack: the waiting caller's result, the invoker's slot and health."""
        try:
            ack = parse_ack(record.value)
        except ProtocolError as e:
            self.metrics.bad_acks.labels(e.kind).inc()
            log.warning(
                "unreadable ack at offset %d skipped (%s): %s", record.offset, e.kind, e.reason
            )
            return
        aid = ack.activation_id
        if ack.has_response:
            waiter = self._waiters.get(aid)
            if waiter is not None and not waiter.done():
                waiter.set_result(ack.record)  # None when shrunk: the record is stored
        if ack.instance is None:
            return
        entry = self._untrack(aid)
        if self.schedulers is not None:
            return  # the invokers' health is theirs to say, in etcd
        result = Result.SYSTEM_ERROR if ack.system_error else Result.SUCCESS
        instance = ack.instance
        if entry is not None and entry.instance is not None:
            instance = entry.instance
        elif ack.transid != self.health_transid:  # flat: never a deep comparison
            return
        if self.balancer.completed(instance, result, self.clock.now()):
            self.supervisor.spawn(self._send_health_test(instance))

    async def _consume(
        self, consumer: Consumer, what: str, handle: Callable[[list[Record]], Awaitable[None]]
    ) -> None:
        """Poll ``consumer`` forever; a failing poll (the bus away) is retried each second."""
        while True:
            try:
                records = await consumer.poll(500, 1.0)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("polling %s failed: %s", what, e)
                await asyncio.sleep(1.0)
                continue
            await handle(records)

    async def _on_acks(self, records: list[Record]) -> None:
        for r in records:
            try:
                self._on_ack(r)
            except Exception:  # one ack must never stop the consumer
                self.metrics.bad_acks.labels(INTERNAL).inc()
                log.exception("handling the ack at offset %d failed; skipped", r.offset)
        if records:
            # Not awaited: a commit round trip must not delay the next acks.
            self._commit_acks({records[-1].partition: records[-1].offset + 1})

    def _commit_acks(self, offsets: dict[int, int]) -> None:
        if self._committing is not None and not self._committing.done():
            return  # the next batch commits further anyway

        async def commit() -> None:
            try:
                await self.acks.commit(offsets)
            except Exception as e:
                log.debug("ack offset commit failed: %s", e)

        self._committing = self.supervisor.spawn(commit())

    async def _on_pings(self, records: list[Record]) -> None:
        now = self.clock.now()
        due: set[int] = set()
        for r in records:
            try:
                ping = parse_ping(r.value)
                if self.balancer.ping(ping.name, ping.enabled, now):
                    due.add(ping.instance)
            except ProtocolError as e:
                self.metrics.bad_pings.labels(e.kind).inc()
                log.warning("unreadable ping at offset %d skipped (%s): %s", r.offset, e.kind, e)
            except Exception:  # one ping must never stop the consumer
                self.metrics.bad_pings.labels(INTERNAL).inc()
                log.exception("handling the ping at offset %d failed; skipped", r.offset)
        due.update(self.balancer.tick(now))
        for instance in due:
            await self._send_health_test(instance)

    def invoker_states(self) -> dict[str, str]:
        """Each known invoker's health, as the stock ``GET /invokers`` names them."""
        if self.schedulers is not None:
            return self.schedulers.invoker_states()
        names = ("uniqueName", "displayedName")
        return {
            "/".join([f"invoker{n}", *filter(None, (r.instance_json.get(k) for k in names))]): (
                r.state.value
            )
            for n, r in sorted(self.balancer.invokers.items())
        }

    def healthy_count(self) -> int:
        return sum(state == "up" for state in self.invoker_states().values())

    async def wait_for_invokers(self, count: int = 1, timeout_s: float = 60.0) -> None:
        """Wait until ``count`` invokers are healthy."""
        async with asyncio.timeout(timeout_s):
            while self.healthy_count() < count:  # noqa: ASYNC110 (pure state, polled)
                await asyncio.sleep(0.05)
