"""The invoker: the composition root that wires the bus, the store, the node scheduler and
the container pool, and owns every background task.

Path of one activation: feed (Kafka ``invoker<N>``) -> parse -> fetch the action (cached)
-> ``NodeScheduler.admit`` (priority fixed now) -> dispatcher (``NodeScheduler.plan``: a core,
maybe freed by a pause or move; the pool's memory; then ``commit``) ->
:class:`ActivationRunner` -> acks on ``completed<C>`` + record in the database -> offset may
be committed. Nothing here does I/O in ``__init__``; ``start`` and ``stop`` do.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Coroutine, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from containers import cpu
from containers.backend import ContainerBackend, ContainerError
from containers.cgroups import cpu_shares_of
from containers.placement import AHEAD_STATES, IDLE_STATES, WarmKey
from containers.pool import ContainerPool, Lease, StemCell
from invoker import nodeview
from invoker.acks import AckSender
from invoker.actions import ActionFetcher, FetchError
from invoker.activation import ActivationRunner, Binding, Job, Ran
from invoker.activation import Outcome as ActivationOutcome
from invoker.calltimes import CallTimes
from invoker.config import InvokerConfig
from invoker.cpu_order import CpuOrder
from invoker.gpu import GpuPoolHandle, is_gpu_action, is_kaas_action, run_ktask
from invoker.health import EXPIRY_GRACE_S, NodeHealth
from invoker.metrics import InvokerMetrics
from invoker.offsets import OffsetTracker
from invoker.scheduler import (
    Call,
    LateStart,
    MoveThenStart,
    NodeScheduler,
    PauseThenStart,
    Preemption,
    Start,
)
from invoker.warm_wait import WarmWaits, worth_waiting
from policies import FIFO, OPENWHISK, FunctionStats, get_policy
from policies.attained import HIGH
from whisk.bus import Bus, Consumer, Producer, Record
from whisk.clock import Clock
from whisk.manifest import BLACKBOX, Manifest
from whisk.protocol import (
    Action,
    ActivationMessage,
    ActivationResponse,
    InvokerInstance,
    ProtocolError,
    StatusCode,
    dumps,
    kaas_record,
    parse_activation,
    ping_message,
)
from whisk.protocol.errors import INTERNAL
from whisk.protocol.limits import check_user_limits, payload_limit
from whisk.protocol.runtime import split_content, unsupported_encryption
from whisk.store import Store, StoreError
from whisk.store.records import RecordWriter
from whisk.supervisor import Supervisor

if TYPE_CHECKING:
    from invoker.fpc.node import FpcNode
    from invoker.fpc.presence import Presence

log = logging.getLogger(__name__)


def _in_run(call: Call[Job]) -> bool:
    """Whether a running call may be paused now: its /run is under way (not /init)."""
    return call.payload.pausable is not None


# Runtime families whose containers serve overlapping /run calls (__OW_ALLOW_CONCURRENT).
CONCURRENT_FAMILIES = frozenset({"nodejs", BLACKBOX})
# Containers created ahead on Docker (--create-ahead): the reference runs 10 creations at once.
DOCKER_CREATE_AHEAD = 8
COMPACT_AFTER = 10_000  # queued jobs beyond this keep only their raw message (memory)
NO_OFFSET = -1  # a pulled call's partition and offset: it came from no Kafka record
PING_TIMEOUT_S = 1.5  # a ping Kafka has not acknowledged by then: it cannot take acks either


@dataclass(frozen=True)
class Cadence:
    """How often health is gathered and pings are sent (the controller expects one a
    second), and how long records linger to make a batch. No call's scheduling depends on
    them, so the simulator, with no controller to ping, nothing to fail and records it
    drops, pings rarely and does not linger: they were an eighth of a simulated day's loop
    steps."""

    health_s: float = 0.5
    ping_s: float = 1.0
    record_linger_s: float = 0.02


async def _bounded(step: Coroutine[Any, Any, Any], what: str, seconds: float = 5.0) -> None:
    """A shutdown step that must not hold the exit when a service is away."""
    try:
        async with asyncio.timeout(seconds):
            await step
    except Exception as e:
        log.warning("%s failed during shutdown: %s", what, e.__class__.__name__ or e)


class Invoker:
    def __init__(
        self,
        config: InvokerConfig,
        *,
        bus: Bus,
        store: Store,
        backend: ContainerBackend,
        clock: Clock,
        manifest: Manifest | None = None,
        metrics: InvokerMetrics | None = None,
        gpu_pool: GpuPoolHandle | None = None,
        cadence: Cadence = Cadence(),
        presence: Presence | None = None,
    ) -> None:
        """``presence``: the scheduler mode's (etcd); none publishes nothing."""
        self.config = config
        self.cadence = cadence
        self.bus = bus
        self.store = store
        self.backend = backend
        self.clock = clock
        self.manifest = manifest or Manifest()
        self.metrics = metrics or InvokerMetrics()
        self.gpu_pool = gpu_pool
        # Owns every background task; a task that keeps failing fails the node (no pings).
        self.supervisor = Supervisor(
            clock, max_failures=config.task_failures, window_s=config.task_failure_window_s
        )
        self.health = NodeHealth(clock)
        self.instance = InvokerInstance(
            config.instance,
            config.user_memory_mb * 1024 * 1024,
            unique_name=config.unique_name or str(config.instance),
            displayed_name=config.displayed_name,
            tags=config.resource_tags,
            dedicated_namespaces=config.dedicated_namespaces,
        )
        self.policy = get_policy(config.policy)
        # An attained-service policy orders the running calls' CPU (invoker.cpu_order).
        self.cpu_order = (
            CpuOrder(
                self.policy.attained,
                len(config.action_cores),
                clock,
                lambda: self._running,
                on_ranked=self._wake_if_queued,
            )
            if self.policy.attained is not None
            else None
        )
        self.scheduler: NodeScheduler[Job] = NodeScheduler(
            self.policy if self.cpu_order is None else self.cpu_order.queue_policy(self.policy),
            config.action_cores,
            FunctionStats(window_s=config.fc_window_s),
            preemption=self.policy.preemption or (Preemption() if config.preempt else None),
        )
        # GPU actions queue apart (in receipt order; the GPU pool orders their device work),
        # but their CPU side takes its place on the same action cores as every other call.
        self.gpu_calls: NodeScheduler[Job] = NodeScheduler(
            FIFO if self.policy.exclusive_cores else OPENWHISK,
            self.scheduler.cores_table,
            self.scheduler.stats,
        )
        self._receipts = itertools.count()  # receipt order, the tie-break between priorities
        self.call_times = CallTimes()  # response time and stretch per function (the console)
        state = Path(config.state_dir)
        ahead = config.create_ahead
        if ahead is None:  # only Docker's cold starts are slow engine work
            ahead = DOCKER_CREATE_AHEAD if backend.name == "docker" else 0
        self.create_ahead: int = ahead
        self.pool = ContainerPool(
            backend,
            user_memory_mb=config.user_memory_mb,
            clock=clock,
            name_prefix=config.container_prefix,
            container_env={
                **dict(item.split("=", 1) for item in config.container_env),
                "__OW_API_HOST": config.api_host,
            },
            image_for=self._image_for,
            cpu_shares=self._cpu_shares,
            stem_cells=self._stem_cells(),
            pause_grace_s=config.pause_grace_s,
            idle_timeout_s=config.idle_timeout_s,
            keep_alive=config.keep_alive,
            on_change=self._wake,
            supervisor=self.supervisor,
        )
        self.fetcher = ActionFetcher(store, config.whisks_db, self.manifest.defaults)
        self.records = RecordWriter(
            store,
            config.activations_db,
            state / "spool",
            clock,
            spool_limit_bytes=config.record_spool_mb * 1024 * 1024,
            linger_s=cadence.record_linger_s,
            supervisor=self.supervisor,
        )
        self.offsets = OffsetTracker()
        self.producer: Producer = bus.producer()
        self.bulk_producer: Producer = bus.producer(batching=True)
        self.consumer: Consumer = bus.consumer(config.invoker_topic, config.invoker_topic)
        self.acks = AckSender(
            self.producer, self.instance.to_json(), config.topic_prefix, self.bulk_producer
        )
        self.runner = ActivationRunner(
            self.pool,
            self.acks,
            self.records,
            clock,
            self.metrics,
            sentinelled=self._sentinelled,
            preemptive=self.scheduler.preemption is not None,
            rank_call=self.cpu_order.admit if self.cpu_order is not None else None,
        )
        self.enabled = True
        self.pending = 0
        self._recovery_end: dict[int, int] | None = None
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running: dict[Call[Job], NodeScheduler[Job]] = {}  # started calls, their queue
        # The wake-ups set (_wake_at), by what they are for (a queue's next overdue call,
        # the first parked call's end of wait): when, and the timer, until it fires.
        self._timers: dict[object, tuple[float, asyncio.TimerHandle]] = {}
        # An attained-service order's calls that wait for a busy container of their action
        # (invoker.warm_wait).
        self.warm_waits: WarmWaits[WarmKey, tuple[NodeScheduler[Job], Call[Job]]] | None = (
            WarmWaits() if self.cpu_order is not None and not config.no_warm_wait else None
        )
        self.fpc: FpcNode | None = None  # the scheduler mode's creations and pullers
        if config.mode == "fpc":
            from invoker.fpc.node import FpcNode  # grpc only where the mode is used

            self.fpc = FpcNode(self, presence)
        self._install_gauges()

    # -- configuration helpers --

    def _image_for(self, kind: str) -> str | None:
        runtime = self.manifest.runtime(kind)
        return runtime.image if runtime else None

    def _concurrency(self, action: Action) -> int:
        """Calls of the action one container may run at once: its ``limits.concurrency``
        for runtimes that serve overlapping ``/run``s (nodejs, a blackbox image: the
        user's choice), else 1 (the stock python ActionLoop proxy serves one at a time)."""
        limit = action.limits.concurrency
        if limit > 1 and self.manifest.family(action.kind) not in CONCURRENT_FAMILIES:
            return 1
        return limit

    def _sentinelled(self, action: Action) -> bool:
        """Whether the action's runtime ends its logs with sentinels: the kind's manifest
        entry; for a blackbox action, whether its image is a native one (as stock)."""
        if action.is_blackbox:
            return action.image is not None and self.manifest.native(action.image)
        runtime = self.manifest.runtime(action.kind)
        return runtime.sentinelled_logs if runtime else False

    def _cpu_shares(self, memory_mb: int) -> int:
        """A new container's: the stock invoker's, by memory; under an attained-service
        order the top weight, so that its boot (the runtime's start in its cgroup, the
        engine's creation waiting for it) is not ranked with the calls: at the stock 32
        shares beside calls at 102 400, a creation on Docker took 5-15 s where it took
        0.3 s under ``fc``. The call's rank sets its weight before ``/init``."""
        if self.cpu_order is not None:
            return cpu_shares_of(HIGH)
        return max(1024 // max(1, self.config.user_memory_mb // max(1, memory_mb)), 2)

    def _stem_cells(self) -> tuple[StemCell, ...]:
        cells = [
            StemCell(r.kind, memory, count)
            for r in self.manifest.runtimes.values()
            for count, memory in r.stem_cells
            if self.backend.supports(r.kind)
        ]
        for spec in self.config.prewarm:
            kind, count, memory = spec.rsplit(":", 2)
            cells.append(StemCell(kind, int(memory), int(count)))
        return tuple(cells)

    def _install_gauges(self) -> None:
        m = self.metrics
        m.queue_length.set_function(lambda: self.scheduler.queued)
        m.running.set_function(lambda: self.scheduler.running)
        m.paused.set_function(lambda: self.scheduler.paused)
        m.pending.set_function(lambda: self.pending)
        m.spooled.set_function(lambda: self.records.spooled_now)
        m.enabled.set_function(lambda: 1 if self.enabled else 0)
        m.healthy.set_function(lambda: 1 if self.health.healthy else 0)
        nodeview.install(self)  # pool and queue gauges read at scrape time

    # -- lifecycle --

    async def start(self) -> None:
        """Join the deployment: topic, producer, containers, consumer, pings."""
        await self.bus.ensure_topic(self.config.invoker_topic, self.config.invoker_topic_config)
        await self.producer.start()
        await self.bulk_producer.start()
        await self.records.start()
        if self.gpu_pool is not None:  # first: its socket goes into every container
            await self.gpu_pool.start()
            log.info("GPU pool at %s: %s", self.gpu_pool.address, self.gpu_pool.note)
            if (path := self.gpu_pool.socket_path()) is not None:
                self.backend.share_socket(path)
        await self.backend.start()
        await self.pool.start()
        await self.consumer.start()
        if self.fpc is not None:
            await self.fpc.start()
        loops = [
            ("feed", self._feed_loop),
            ("dispatch", self._dispatch_after_restart),
            ("commit", self._commit_loop),
            ("health", self._health_loop),
        ]
        if self.fpc is None:  # in the scheduler mode controllers read presence, not pings
            loops.append(("ping", self._ping_loop))
        for name, loop in loops:
            self.supervisor.start(name, loop)
        if self.cpu_order is not None:  # without it the calls share the CPU as stock
            self.supervisor.start("cpu-order", self.cpu_order.run, critical=False)
        if self.policy.exclusive_cores and self.config.cpu_sample_s > 0:
            # The node works without it (estimates then correct when calls finish).
            self.supervisor.start("cpu-sampler", self._cpu_sample_loop, critical=False)
        log.info(
            "%s started (%s mode): policy %s, cores %s, %d MB for actions, backend %s",
            self.instance.label,
            self.config.mode,
            self.policy.name,
            list(self.config.action_cores),
            self.config.user_memory_mb,
            self.backend.name,
        )

    async def stop(self, deadline_s: float = 30.0) -> None:
        """Graceful shutdown: stop taking work, let running calls finish within the deadline,
        hand queued calls back (their offsets stay uncommitted, so Kafka re-delivers them),
        commit what finished, remove containers, send a final disabled ping."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.consumer.pause()
        await self.supervisor.stop("feed")
        if self.fpc is not None:  # no more creations or fetches
            self.fpc.stop_pulling()
        handed_back = self.scheduler.drain() + self.gpu_calls.drain()
        if self.warm_waits is not None:
            handed_back += [call for _, call in self.warm_waits.drain()]
        if handed_back:
            log.info("handing back %d queued activations for re-delivery", len(handed_back))
        for call in handed_back:
            if call.payload.binding is not None:  # pulled: its puller reschedules it
                call.payload.binding.end(None)
        self.pending -= len(handed_back)
        running = [t for t in self._tasks if not t.done()]
        if running:
            log.info("waiting up to %.0fs for %d running activations", deadline_s, len(running))
            _, late = await asyncio.wait(running, timeout=deadline_s)
            for t in late:
                t.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self.fpc is not None:  # the pullers' clients closed, presence left
            await self.fpc.close(deadline_s)
        await self.supervisor.stop("dispatch", "commit", "health", "cpu-sampler", "cpu-order")
        await self.records.close()
        await _bounded(self._commit(), "committing offsets")
        await self.pool.close()
        if self.gpu_pool is not None:
            await self.gpu_pool.stop()
        await self.backend.close()
        await self.supervisor.stop("ping")
        await self.supervisor.close()
        if self.fpc is None:
            await _bounded(self._ping(enabled=False), "the final disabled ping")
        # With the broker away these would wait for their request timeouts.
        await _bounded(self.consumer.stop(), "leaving the consumer group")
        await _bounded(self.producer.stop(), "closing the producer")
        await _bounded(self.bulk_producer.stop(), "closing the batching producer")
        log.info("%s stopped", self.instance.label)

    # -- admin --

    async def set_enabled(self, enabled: bool) -> bool:
        """Enable or disable (stock semantics: disabled sends one disabled ping and stops
        pinging, so the controller takes the invoker offline). Returns whether it changed."""
        if enabled == self.enabled:
            return False
        self.enabled = enabled
        if self.fpc is not None:  # no pings: creations are refused, the pullers end
            if enabled:
                self.fpc.accepting = True
            else:
                self.fpc.stop_pulling()
        elif enabled:
            self.supervisor.start("ping", self._ping_loop)
        else:
            await self.supervisor.stop("ping")
            await self._ping(enabled=False)
        return True

    def running_calls(self) -> list[Call[Job]]:
        """The started calls (holding a core and a container), for the admin API."""
        return list(self._running)

    def status(self) -> dict[str, Any]:
        return {
            "invoker": self.instance.label,
            "mode": self.config.mode,
            "enabled": self.enabled,
            "healthy": self.health.healthy,
            "problems": self.health.problems,
            "supervisor": self.supervisor.status(),
            "policy": self.policy.name,
            "policyDescription": self.policy.description,
            "actionCores": list(self.config.action_cores),
            "queued": self.scheduler.queued,
            "running": self.scheduler.running,
            "paused": self.scheduler.paused,
            "gpuCalls": {"queued": self.gpu_calls.queued, "running": self.gpu_calls.running},
            "cores": {
                str(c): {
                    "calls": t.calls[c],
                    "expectedLoad": round(t.load[c], 3),
                    "measuredOverrun": round(t.overrun[c], 3),
                    "full": c in t.full,
                }
                for t in (self.scheduler.cores_table,)
                for c in t.ids
            },
            "pending": self.pending,
            **nodeview.memory(self),
            "containers": len(self.pool.slots),
            "coldStarts": self.pool.cold_starts,
            "warmStarts": self.pool.warm_starts,
            "spooledRecords": self.records.spooled_now,
            "recordsWritten": self.records.written,
            "acksSent": self.acks.sent,
            "acksShrunk": self.acks.shrunk,
            "actionCache": {"hits": self.fetcher.hits, "misses": self.fetcher.misses},
            "evictions": self.pool.evictions,
            "functions": len(self.scheduler.stats),
            "addedLatency": self.metrics.added_latency_percentiles(),
            **({"cpuOrder": self.cpu_order.status()} if self.cpu_order is not None else {}),
            **({"warmWaits": self._warm_wait_status()} if self.warm_waits is not None else {}),
            **({"fpc": self.fpc.status()} if self.fpc is not None else {}),
        }

    def _warm_wait_status(self) -> dict[str, int]:
        assert self.warm_waits is not None
        return {"waiting": len(self.warm_waits), "parked": self.warm_waits.parked}

    # -- background loops --

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A task of an activation: logged if it fails, and kept in ``_tasks``, which
        shutdown waits for (one done callback for both)."""
        return self.supervisor.spawn(coro, track=self._tasks)

    def _wake(self) -> None:
        self._wakeup.set()

    async def _ping(self, enabled: bool = True) -> None:
        await self.producer.send(
            self.config.health_topic, dumps(ping_message(self.instance.to_json(), enabled))
        )

    async def _ping_loop(self) -> None:
        """Ping each second while the node can work. On becoming unable (a condition of
        :meth:`_health_loop`) send one disabled ping, so the controller takes the node out
        at once rather than after 10 s of silence; when Kafka is the only problem, the ping
        itself is the probe that tells when it takes messages again."""
        pinging = True
        while True:
            problems = self.health.problems
            if (tasks := self.supervisor.problem()) is not None:
                problems["tasks"] = tasks  # at once, not at the next health check
            if not problems or set(problems) == {"kafka"}:
                try:
                    async with asyncio.timeout(PING_TIMEOUT_S):
                        await self._ping()
                    self.health.report("kafka", None)
                    pinging = True
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    problem = f"Kafka did not take a health ping: {e.__class__.__name__} {e}"
                    self.health.report("kafka", problem)
            elif pinging:
                pinging = False
                log.warning("unhealthy, not pinging: %s", "; ".join(problems.values()))
                try:
                    async with asyncio.timeout(PING_TIMEOUT_S):
                        await self._ping(enabled=False)
                except Exception as e:
                    log.warning("disabled ping failed: %s", e)
            await asyncio.sleep(self.cadence.ping_s)

    async def _health_loop(self) -> None:
        """Gather what the node can do into :attr:`health` (twice a second): its tasks, its
        acks (none waiting for Kafka) and creating containers (probed while it fails)."""
        was: dict[str, str] = {}
        while True:
            self.health.report("tasks", self.supervisor.problem())
            retrying = self.acks.retrying
            self.health.report(
                "acks", f"{retrying} acks wait for Kafka to take them" if retrying else None
            )
            if self.pool.create_problem is not None:
                try:
                    async with asyncio.timeout(10):
                        await self.pool.probe()
                except TimeoutError:
                    pass
            self.health.report("containers", self.pool.create_problem)
            if self.fpc is not None:  # the scheduler finds the node only through it
                presence = self.fpc.presence
                self.health.report(
                    "presence", None if presence.healthy else f"presence: {presence.state}"
                )
            now = self.health.problems
            if now.keys() != was.keys():
                if now:
                    log.warning("unhealthy: %s", "; ".join(now.values()))
                else:
                    log.info("healthy again")
            was = now
            await asyncio.sleep(self.cadence.health_s)

    async def _feed_loop(self) -> None:
        low_water = self.config.max_pending * 9 // 10
        paused = False
        while True:
            if not paused and self.pending >= self.config.max_pending:
                self.consumer.pause()
                paused = True
                log.warning("%d activations pending: pausing consumption", self.pending)
            elif paused and self.pending <= low_water:
                self.consumer.resume()
                paused = False
            room = self.config.max_pending - self.pending
            try:
                records = await self.consumer.poll(
                    max_records=max(1, min(500, room)), timeout_s=0.5
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("polling %s failed: %s", self.config.invoker_topic, e)
                await asyncio.sleep(1.0)
                continue
            if records and self._recovery_end is None:
                try:
                    self._recovery_end = await self.consumer.end_offsets()
                except Exception:
                    self._recovery_end = {}
            again = sum(not self._receive(record) for record in records)
            if again:
                log.info(
                    "%d messages delivered again after the consumer rejoined its group were "
                    "taken before: skipped (running here or answered)",
                    again,
                )

    def _receive(self, record: Record) -> bool:
        """Take one message (:meth:`_take`); False if its offset was taken before."""
        if not self.offsets.received(record.partition, record.offset):
            return False
        self._take(record)
        return True

    def _take(self, record: Record) -> None:
        """Admit one message, or answer it as poison. Nothing escapes from here, so no
        message can end the feed; one that cannot be read is counted, answered when its
        activation id and controller can be read, and always committed past. In the
        scheduler mode the message is a container creation or deletion (:class:`FpcNode`)."""
        self.pending += 1
        if self.fpc is not None:
            self._spawn(self._answer(record, self.fpc.take(record.value)))
            return
        received = self.clock.now()
        try:
            msg = parse_activation(record.value)
        except ProtocolError as e:
            self._poison(record, e)
            return
        except Exception as e:  # parse_activation is total: a last line of defence
            log.exception("parsing the message at offset %d failed", record.offset)
            reason = f"message could not be read ({e.__class__.__name__})"
            self._poison(record, ProtocolError(reason, kind=INTERNAL))
            return
        try:
            redelivered = (self._recovery_end or {}).get(record.partition, 0) > record.offset
            self._spawn(self._admit(record, msg, received, redelivered))
        except Exception as e:
            log.exception("activation %s could not be admitted", msg.activation_id)
            reason = f"message could not be admitted ({e.__class__.__name__})"
            self._poison(record, ProtocolError(reason, msg.partial(), INTERNAL))

    def _poison(self, record: Record, error: ProtocolError) -> None:
        """Count, log and answer (when possible) a message that will not run; its offset
        is finished either way, so it is never delivered again."""
        p = error.partial
        try:
            self.metrics.bad_messages.inc()
            self.metrics.bad_message_kinds.labels(error.kind).inc()
            log.error(
                "bad message at offset %d (activation %s, %s): %s",
                record.offset,
                p.activation_id or "unknown",
                error.kind,
                error.reason[:500],
            )
            if p.answerable:
                fallback = self.runner.fallback(
                    p, StatusCode.WHISK_ERROR, f"The activation message is invalid: {error.reason}"
                )
                self._spawn(self._answer(record, self.runner.answer_fallback(p, fallback)))
                return
        except Exception:
            log.exception("answering the bad message at offset %d failed", record.offset)
        self._finished(record)

    async def _answer(self, record: Record, answer: Coroutine[Any, Any, None]) -> None:
        try:
            await answer
        finally:
            self._finished(record)

    def _finished(self, record: Record) -> None:
        self.offsets.finished(record.partition, record.offset)
        self.pending -= 1

    async def _admit(
        self, record: Record, msg: ActivationMessage, received: float, redelivered: bool
    ) -> None:
        """Queue the call, or answer it at once when it cannot (or need not) run."""
        try:
            answer = await self._decide(record, msg, received, redelivered)
        except Exception:
            log.exception("activation %s could not be admitted", msg.activation_id)
            fallback = self.runner.fallback(
                msg.partial(), StatusCode.WHISK_ERROR, "An internal error occurred in the invoker."
            )
            answer = self.runner.answer_fallback(msg.partial(), fallback, msg)
        if answer is not None:
            await self._answer(record, answer)

    async def _decide(
        self, record: Record, msg: ActivationMessage, received: float, redelivered: bool
    ) -> Coroutine[Any, Any, None] | None:
        """Resolve the action and queue the call (None), or return the answer to send."""
        # Taken before the first await, so in receipt order whatever the fetch takes.
        receipt = next(self._receipts)
        if redelivered and (reack := await self.reack_if_finished(msg)) is not None:
            return reack
        action = await self._resolve(msg)
        if not isinstance(action, Action):
            return action
        job = Job(
            record.value,
            action,
            record.partition,
            record.offset,
            received,
            max_payload=payload_limit(msg.user.limits),
            parsed=msg,
        )
        return self._queue(job, receipt)

    async def admit_pulled(
        self, raw: bytes, msg: ActivationMessage, binding: Binding
    ) -> Coroutine[Any, Any, None] | None:
        """Queue a call a container pulled from the scheduler (the scheduler mode) as a
        received one is (:meth:`_decide`), bound to that container: it waits for a core in
        the policy's order. None once queued (``binding.ended`` resolves when it ends), or
        the answer to send when it cannot run."""
        receipt = next(self._receipts)
        received = self.clock.now()
        action = await self._resolve(msg)
        if not isinstance(action, Action):
            return action
        job = Job(
            raw,
            action,
            NO_OFFSET,
            NO_OFFSET,
            received,
            max_payload=payload_limit(msg.user.limits),
            parsed=msg,
            binding=binding,
        )
        answer = self._queue(job, receipt)
        if answer is None:
            self.pending += 1  # as a received call's, until it ends (_execute)
        return answer

    async def _resolve(self, msg: ActivationMessage) -> Action | Coroutine[Any, Any, None]:
        """The call's action, or the answer to send when it cannot be fetched."""
        try:
            return await self.fetcher.fetch(msg.action.docid, msg.revision)
        except FetchError as e:
            log.warning("activation %s: %s", msg.activation_id, e)
            fallback = self.runner.fallback(msg.partial(), e.code, e.message)
            return self.runner.answer_fallback(msg.partial(), fallback, msg)

    def _queue(self, job: Job, receipt: int) -> Coroutine[Any, Any, None] | None:
        """Admit the job to its queue (None), or return the answer when it must not run."""
        msg, action, received = job.msg, job.action, job.received
        problem = unsupported_encryption(msg) or check_user_limits(
            action, msg.user.limits, self.config.user_memory_mb
        )
        if problem is not None:
            response = ActivationResponse.error(StatusCode.APPLICATION_ERROR, problem)
            return self.runner.answer_unrun(job, response)
        if is_kaas_action(action):  # a kTask: the GPU pool runs it, no container, no core
            return self._run_ktask(job)
        queue = self.scheduler
        if self.gpu_pool is not None and is_gpu_action(action):
            job.platform_env = self.gpu_pool.action_env()
            queue = self.gpu_calls
        job.admitted = self.clock.now()
        limit = self._concurrency(action)
        if limit > 1:  # its calls may share a warm container of the same key (a pulled
            # call: only its own container, on the core that container's calls share)
            group: Hashable = WarmKey(msg.user.namespace, action.docid, action.revision)
            if job.binding is not None and job.binding.lease is not None:
                group = ("container", job.binding.lease.slot.id)
            queue.admit(action.docid, job, received, order=receipt, group=group, limit=limit)
        else:
            queue.admit(action.docid, job, received, order=receipt)
        if queue.queued > COMPACT_AFTER:
            job.compact()
        self._wake()
        return None

    async def _run_ktask(self, job: Job) -> None:
        """Run a ``kaas`` action's call on the GPU pool and answer it as a ran activation."""
        msg, action = job.msg, job.action
        start_ms = self.clock.epoch_ms()
        params, _ = split_content(msg)
        response, timed_out = await run_ktask(
            self.gpu_pool,
            action,
            params,
            namespace=msg.user.namespace,
            max_payload=job.max_payload,
        )
        record = kaas_record(
            msg,
            action,
            start_ms=start_ms,
            end_ms=self.clock.epoch_ms(),
            response=response,
            timed_out=timed_out,
        )
        await self.runner.answer_fallback(msg.partial(), record, msg)

    async def reack_if_finished(self, msg: ActivationMessage) -> Coroutine[Any, Any, None] | None:
        """For a call a crash may have cut off (re-delivered, or journaled in the scheduler
        mode): its completion ack to send again if it finished before, else None (run it)."""
        done = await self._finished_before(msg)
        if done is None:
            return None
        log.info("activation %s finished before a restart; re-acknowledging", msg.activation_id)
        return self.acks.completion(msg.controller, msg.transid, msg.activation_id, done)

    async def _finished_before(self, msg: ActivationMessage) -> bool | None:
        """For a re-delivered message: was it finished before a crash (its record stored or
        spooled)? Returns whether it was a system error, or None if it must run. The
        controller ignores a duplicate completion, so re-sending one is safe."""
        docid = f"{msg.user.namespace}/{msg.activation_id}"
        if self.records.is_spooled(docid):
            return False
        try:
            doc = await self.store.get(self.config.activations_db, docid)
        except StoreError:
            return None  # cannot tell: run it; the record's fixed _id prevents a duplicate
        if doc is None:
            return None
        return doc.get("response", {}).get("statusCode") == StatusCode.WHISK_ERROR

    async def _dispatch_after_restart(self) -> None:
        """The dispatch loop, looking at the queues at once: a restarted loop must not wait
        for the next arrival or release to start what already waits."""
        self._wake()
        await self._dispatch_loop()

    async def _dispatch_loop(self) -> None:
        """Per queue: resume paused calls, spread shared cores, then start what the queue
        plans until it plans nothing or the pool has no memory for its call."""
        queues = (self.gpu_calls, self.scheduler)
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            self._start_parked()
            for queue in queues:
                self._resume_paused(queue)
                self._spread(queue)  # long calls sharing a core get back one that freed
                while (decision := queue.plan(self.clock.now(), _in_run)) is not None:
                    if not self._start(queue, decision):
                        break
                self._spread(queue)
                # An overdue call found no core to share waits for the next start or end,
                # the only events that make one; the next to become overdue, for a wake-up.
                self._wake_at(queue, queue.next_overdue())
            self._create_ahead()

    def _create_ahead(self) -> None:
        """Have containers created for the calls next in line whose action has none idle
        or coming, at most ``create_ahead`` untaken at once (``--create-ahead``):
        a Docker cold start is hundreds of ms of engine work that need not hold the action
        core its call gets (docs/operations.md, containers created ahead)."""
        if self.create_ahead <= 0 or not self.scheduler.queued:
            return  # off (the process backend's default), or none waits: nothing to count
        room = self.create_ahead - self.pool.ahead
        if room <= 0:
            return
        ready = Counter(
            s.key
            for s in self.pool.slots.values()
            if s.key is not None and (s.state in IDLE_STATES or s.state in AHEAD_STATES)
        )
        for call in self.scheduler.upcoming(self.create_ahead):
            job = call.payload
            key = WarmKey(job.msg.user.namespace, job.action.docid, job.action.revision)
            if call.limit > 1 or job.binding is not None:  # it has a container, or may join one
                continue
            if ready[key] > 0:
                ready[key] -= 1
                continue
            action = job.action
            if not self.pool.create_ahead(key, action.kind, action.limits.memory_mb, action.image):
                return
            room -= 1
            if room == 0:
                return

    def _wake_at(self, what: object, due: float | None) -> None:
        """Look again at ``due`` (nothing else may wake the loop then) unless a wake-up for
        ``what`` is set for then or sooner; none for a time already past. A wake-up is
        forgotten once it fires: a timer may fire a moment before its time (the loop runs
        what is due within its clock's resolution), and one taken for pending then would
        leave the call waiting for another event."""
        now = self.clock.now()
        if due is None or due <= now:
            return
        pending = self._timers.get(what)
        if pending is not None:
            if pending[0] <= due:
                return
            pending[1].cancel()

        def fire() -> None:
            del self._timers[what]
            self._wake()

        self._timers[what] = (due, asyncio.get_running_loop().call_later(due - now, fire))

    def _spread(self, queue: NodeScheduler[Job]) -> None:
        while (moved := queue.spread_move(self.clock.now(), _in_run)) is not None:
            queue.move(*moved)
            self._spawn(self._repin(moved[0]))

    def _start(self, queue: NodeScheduler[Job], decision: Start) -> bool:
        """Reserve the memory of the call the queue plans to start (none when it joins a
        running container of its action), commit the plan and run the call; False if it
        must wait for memory (a release wakes the loop: the plan is dropped, nothing was
        changed). A pause or move the plan makes first is carried out here too."""
        job = decision.call.payload
        joins = decision.joins
        if job.binding is not None:  # pulled for a container its puller holds
            lease = job.binding.lease
        elif joins is not None:  # a running container of its action has room
            lease = self.pool.join(joins.handle)
            if lease is None:  # it takes no more (a call in it failed): look again
                queue.close(joins)
                return True
        else:
            key = WarmKey(job.msg.user.namespace, job.action.docid, job.action.revision)
            deferred = self._defer_creation(key, queue, decision)
            if deferred is not None:
                return deferred
            lease = self.pool.reserve(
                key,
                job.action.kind,
                job.action.limits.memory_mb,
                job.action.image,
                decision.call.limit,
            )
            if lease is None:
                return False
        call = queue.commit(decision, self.clock.now())
        if call.shared is not None and call.shared.handle is None:
            call.shared.handle = lease.slot  # what later calls join
        self._run(queue, call, lease)
        if isinstance(decision, PauseThenStart):
            self.metrics.preemptions.inc()
            self._spawn(self._pause(decision.victim))
        elif isinstance(decision, MoveThenStart):
            self._spawn(self._repin(decision.moved))
        return True

    def _run(self, queue: NodeScheduler[Job], call: Call[Job], lease: Lease) -> None:
        self._running[call] = queue
        self._spawn(self._execute(queue, call, lease))

    def _defer_creation(
        self, key: WarmKey, queue: NodeScheduler[Job], decision: Start
    ) -> bool | None:
        """Under an attained-service order, a call whose action has no container ready
        starts one only if it would run now and has none to wait for (invoker.warm_wait):

        - if it would get no CPU now (:meth:`CpuOrder.would_run`: ranked below the calls
          that fill the cores), it stays first in the queue, costing no creation, and
          False is returned (the next pass, release or arrival looks again); the queue is
          in the order of the index at age 0, so the calls behind it would not either
          (``gittins-aged``'s late calls are not held);
        - if a busy container of its action is expected to free sooner than a creation
          takes, it waits for that one, for at most that long (parked), and True is
          returned: the queue plans on.

        None: it starts now. Only where a creation costs (its measured mean, 0 in a
        simulation without cold starts, so figures without one are unchanged)."""
        waits, order, call = self.warm_waits, self.cpu_order, decision.call
        if waits is None or order is None or call.limit > 1:
            return None
        action, now = call.payload.action, self.clock.now()
        cost = self.pool.start_cost_s(key, action.kind, action.limits.memory_mb)
        if cost <= 0:
            return None
        if not isinstance(decision, LateStart) and not order.would_run(call.function):
            return False
        busy_for = [now - since for since in self.pool.busy_since(key)]
        expected = self.scheduler.stats.expected(call.function)
        if not worth_waiting(busy_for, expected, waits.ahead(key), cost):
            return None
        self._park(key, queue, queue.commit(decision, now), now + cost)
        return True

    def _wake_if_queued(self) -> None:
        if self.scheduler.queued:
            self._wake()

    def _park(self, key: WarmKey, queue: NodeScheduler[Job], call: Call[Job], until: float) -> None:
        assert self.warm_waits is not None
        self.warm_waits.park(key, (queue, call), until)
        self.metrics.warm_waits.inc()
        self._wake_at(self.warm_waits, self.warm_waits.next_until(self.clock.now()))

    def _start_parked(self) -> None:
        """Start the parked calls whose action has a container idle or whose wait is up,
        before the queues plan (a container freed for them is theirs)."""
        waits = self.warm_waits
        if not waits:
            return

        def start(key: WarmKey, parked: tuple[NodeScheduler[Job], Call[Job]]) -> bool:
            queue, call = parked
            action = call.payload.action
            lease = self.pool.reserve(key, action.kind, action.limits.memory_mb, action.image)
            if lease is None:  # no memory: a release wakes the loop
                return False
            self._run(queue, call, lease)
            return True

        now = self.clock.now()
        waits.serve(now, self.pool.has_idle, start)
        # One whose wait is up that found no memory waits for a release, which wakes the loop.
        self._wake_at(waits, waits.next_until(now))

    def _resume_paused(self, queue: NodeScheduler[Job]) -> None:
        while (call := queue.resume(self.clock.now())) is not None:
            self._spawn(self._resume(queue, call))

    async def _pause(self, call: Call[Job]) -> None:
        pausable = call.payload.pausable
        if pausable is not None:  # else its /run has just ended: nothing to freeze
            call.payload.pause_cost_s = await pausable.pause()

    async def _repin(self, call: Call[Job]) -> None:
        """Give a running call's container the core the scheduler moved it to."""
        pausable, core = call.payload.pausable, call.core
        if pausable is not None and core is not None:
            await pausable.repin(frozenset({core}))

    async def _resume(self, queue: NodeScheduler[Job], call: Call[Job]) -> None:
        pausable, core = call.payload.pausable, call.core
        if pausable is not None:
            cores = frozenset({core}) if core is not None else None
            took = await pausable.resume(cores)
            queue.observe_pause(call.payload.pause_cost_s + took)

    async def _execute(self, queue: NodeScheduler[Job], call: Call[Job], lease: Lease) -> None:
        job = call.payload
        cores = (
            frozenset({call.core}) if call.core is not None else frozenset(self.config.action_cores)
        )
        outcome = None
        answered = False
        try:
            try:
                outcome = await self._run_unless_expired(job, lease, cores)
            finally:
                self._running.pop(call, None)
                if outcome is not None:
                    queue.finish(call, outcome.run_s, outcome.cpu_s, outcome.cpu_wait_s)
                    if self.cpu_order is not None and outcome.run_s is not None:
                        self.cpu_order.finished(call.function, outcome.run_s - outcome.cpu_wait_s)
                    if outcome.run_s is not None:
                        response_s = self.clock.now() - job.received
                        self.call_times.observe(call.function, response_s, outcome.run_s)
                else:
                    queue.finish(call, None)
                healthy = bool(outcome and outcome.healthy)
                if job.binding is None:
                    self.pool.release(lease, healthy=healthy)
                else:  # the container stays its puller's, which fetches the next call now
                    job.binding.end(
                        Ran(
                            healthy,
                            outcome.run_s if outcome else None,
                            whisk_error=outcome is None or outcome.response.is_system_error,
                        )
                    )
                self._wake()
            if outcome.answer is not None:
                await outcome.answer
            answered = True
        except asyncio.CancelledError:
            # Shutdown deadline: hand the call back. Its offset stays uncommitted, so the
            # activation is re-delivered (and de-duplicated if it did finish).
            log.warning("activation %s handed back at shutdown", job.msg.activation_id)
            raise
        except Exception:
            log.exception("activation %s failed inside the invoker", job.msg.activation_id)
            response = ActivationResponse.error(
                StatusCode.WHISK_ERROR, "An internal error occurred in the invoker."
            )
            await self.runner.answer_unrun(job, response)
            answered = True
        finally:
            if outcome is not None and outcome.answer is not None and not answered:
                outcome.answer.close()  # never started (cancelled before): nothing to await
            if answered:  # what lets it go: its offset, or its line in the journal
                if job.binding is None:
                    self.offsets.finished(job.partition, job.offset)
                elif job.binding.answered is not None:
                    job.binding.answered()
            self.pending -= 1

    async def _run_unless_expired(
        self, job: Job, lease: Lease, cores: frozenset[int]
    ) -> ActivationOutcome:
        """Run the call, or answer it with an error if it waited through an outage for
        longer than its time limit allows (:mod:`invoker.health`): no container storm when
        the node recovers with a backlog nobody waits for any more."""
        msg = job.msg
        timeout_ms = job.action.limits.timeout_ms
        if not self.health.expired(msg.transid, msg.transaction_start_ms, timeout_ms):
            return await self.runner.run(job, lease, cores)
        waited_s = (self.clock.epoch_ms() - msg.transaction_start_ms) / 1000
        log.warning("activation %s expired after %.0f s: not started", msg.activation_id, waited_s)
        self.metrics.expired.inc()
        response = ActivationResponse.error(
            StatusCode.WHISK_ERROR,
            f"The activation was not started: it waited {waited_s:.0f} s while the invoker "
            f"was unavailable, longer than its time limit ({timeout_ms / 1000:g} s) "
            f"plus {EXPIRY_GRACE_S:.0f} s.",
        )
        answer = self.runner.answer_unrun(job, response)
        return ActivationOutcome(response, run_s=None, healthy=True, answer=answer)

    async def _cpu_sample_loop(self) -> None:
        """Every ``cpu_sample_s``, measure what each running call that could use more CPU
        than expected (not a CPU-bound one) used since the previous sample, and tell its
        queue (:meth:`NodeScheduler.observe`): a function that changed behaviour closes its
        core to what no longer fits beside it while the call runs, not when it ends. A few
        procfs or cgroupfs reads per sampled call."""
        while True:
            await asyncio.sleep(self.config.cpu_sample_s)
            for call, queue in list(self._running.items()):
                mark = call.payload.in_run
                if mark is None or not queue.cores_table.may_overrun(call.share):
                    continue
                try:
                    times = await mark.container.cpu_times()
                except (ContainerError, OSError) as e:  # removed meanwhile: its run ends
                    log.debug("sampling the CPU of %s failed: %s", mark.container.name, e)
                    continue
                if times is None or call.payload.in_run is not mark:
                    continue  # /run ended meanwhile: its finish has the whole measurement
                now = self.clock.now()
                recent = cpu.share_between(mark.times, times, now - mark.at)
                overall = cpu.share_between(mark.first, times, now - mark.since)
                mark.at, mark.times = now, times
                if recent is not None and overall is not None:
                    queue.observe(call, recent, overall)

    async def _commit(self) -> None:
        positions = self.offsets.committable()
        if not positions:
            return
        try:
            await self.consumer.commit(positions)
            self.offsets.committed(positions)
        except Exception as e:
            log.warning("offset commit failed (will retry): %s", e)

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            await self._commit()
