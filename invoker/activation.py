"""Running one activation in a leased container and answering for it.

Order (spec 4.7): ``/init`` if the container is new, ``/run``, the result ack for a blocking
caller at once, logs up to the sentinels, then the completion ack and the stored record.
Each failure maps to the spec's status code; a developer or whisk error destroys the
container. Every path ends with an ack, so the controller never waits for the timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from containers.backend import (
    Container,
    ContainerError,
    ContainerGone,
    HttpResult,
    ImagePullError,
)
from containers.cpu import CpuTimes
from containers.pool import ContainerPool, Lease
from invoker.acks import AckSender
from invoker.metrics import InvokerMetrics
from whisk.clock import Clock
from whisk.protocol import (
    Action,
    ActivationMessage,
    ActivationRecord,
    ActivationResponse,
    Partial,
    StatusCode,
    action_record,
    activation_document,
    dumps,
    fallback_record,
    parse_activation,
)
from whisk.protocol.logs import LogCollector, iso_time
from whisk.protocol.runtime import (
    INIT_EXITED,
    MEMORY_EXHAUSTED,
    PROVISION_FAILED,
    RUN_EXITED,
    init_body,
    interpret_init,
    interpret_run,
    run_body,
    timeout_message,
)
from whisk.store.records import RecordWriter
from whisk.supervisor import spawn

log = logging.getLogger(__name__)
MIB = 1024 * 1024


def _retrieved(fut: asyncio.Future[None]) -> None:
    """Mark a record's failure as seen when its ack failed first (the ack's error is raised)."""
    if not fut.cancelled():
        fut.exception()


@dataclass(slots=True, eq=False)
class CpuMark:
    """A call in ``/run``: its container and that container's CPU counters before
    ``/run`` and at the last reading, so that a sample taken while the call runs measures
    both the time since the previous one and the whole run so far. One per ``/run``, known
    by identity (a key of :class:`invoker.cpu_order.CpuOrder`'s measures)."""

    container: Container
    since: float  # clock.now() when /run began
    first: CpuTimes  # the counters then
    at: float  # clock.now() of the last reading
    times: CpuTimes


UNBOUNDED_S = 365 * 24 * 3600.0  # a pausable /run's own timeout: its time limit rules


class Pausable:
    """A call in ``/run`` that the node may pause (preemption): pausing freezes its
    container and stops the time limit's timer, so paused time does not count against the
    action's limit; resuming does the opposite. Once the run has ended nothing is paused
    any more (:meth:`end` resumes a container frozen in that race)."""

    def __init__(self, container: Container, limit: asyncio.Timeout, clock: Clock) -> None:
        self.container = container
        self.limit = limit
        self.clock = clock
        self.paused_s = 0.0  # time spent paused, over the whole run
        self._paused_at: float | None = None
        self._left_s = 0.0  # of the time limit, when paused
        self._ended = False
        self._lock = asyncio.Lock()

    async def pause(self) -> float:
        """Freeze the call; returns what the pause took (0 if the run had ended).

        The call runs on until its container is frozen (``docker pause`` takes tens of ms),
        so its paused time starts then, not when the pause was asked for: counted from the
        request, each pause would take that latency off the run time that feeds E[p], and
        under SEPT the function's later calls, admitted with the lowered estimate, would go
        before its earlier ones."""
        async with self._lock:
            if self._ended or self._paused_at is not None:
                return 0.0
            loop = asyncio.get_running_loop()
            when = self.limit.when()
            left = max(0.0, when - loop.time()) if when is not None else 0.0
            self.limit.reschedule(None)  # no timeout while it is being frozen
            t0 = self.clock.now()
            await self.container.pause()
            frozen = self.clock.now()
            self._left_s = max(0.0, left - (frozen - t0))  # it ran until frozen
            self._paused_at = frozen
            return frozen - t0

    async def resume(self, cores: frozenset[int] | None = None) -> float:
        """Let the call go on (on ``cores``, if given); returns what the resume took."""
        async with self._lock:
            if self._paused_at is None:
                return 0.0
            t0 = self.clock.now()
            if cores is not None:
                await self.container.assign_cores(cores)
            await self.container.resume()
            self._unpaused()
            return self.clock.now() - t0

    async def repin(self, cores: frozenset[int]) -> None:
        """Move the running call onto ``cores`` (it now shares a core, or has one again);
        a paused call gets its cores when it resumes, an ended one needs none."""
        async with self._lock:
            if not self._ended and self._paused_at is None:
                await self.container.assign_cores(cores)

    def _unpaused(self) -> None:
        assert self._paused_at is not None
        self.paused_s += self.clock.now() - self._paused_at
        self._paused_at = None
        if not self._ended:
            self.limit.reschedule(asyncio.get_running_loop().time() + self._left_s)

    async def end(self) -> None:
        async with self._lock:
            self._ended = True
            if self._paused_at is not None:  # paused just as it answered
                await self.container.resume()
                self._unpaused()


@dataclass(frozen=True, slots=True)
class Ran:
    """How a bound call ended, for its puller: whether its container may serve the next
    call, how long its /run took (the scheduler's ``lastDuration``), and whether it ended
    in a whisk error (which counts against the node's health: invoker.fpc.health)."""

    healthy: bool
    run_s: float | None
    whisk_error: bool = False


@dataclass(slots=True, eq=False)
class Binding:
    """A call pulled for one container (the scheduler mode): it runs in that container's
    lease, which its puller holds, so it reserves nothing and releases nothing; its end
    resolves ``ended`` instead (None: handed back unrun, at shutdown). ``answered`` is
    called once its answer (record and acks) is out, as a received call's offset is
    committed then (the journal of pulled calls: invoker.fpc.journal)."""

    lease: Lease | None  # None: a kTask's (the GPU pool runs it, in no container)
    ended: asyncio.Future[Ran | None]
    answered: Callable[[], None] | None = None

    def end(self, ran: Ran | None) -> None:
        if not self.ended.done():
            self.ended.set_result(ran)


@dataclass(slots=True)
class Job:
    """A received activation with its action resolved, waiting for or holding a core.

    A job deep in the queue keeps only its raw message (``compact``): the parsed form is
    several times larger, and it is parsed again when the job comes up."""

    raw: bytes
    action: Action
    partition: int
    offset: int
    received: float  # clock.now() at receipt
    admitted: float = 0.0  # clock.now() when queued for a core (after parse and fetch)
    max_payload: int = MIB
    platform_env: dict[str, str] | None = None
    parsed: ActivationMessage | None = None
    in_run: CpuMark | None = None  # set while in /run with its CPU measured
    in_init: Container | None = None  # set while it initialises its own container
    pausable: Pausable | None = None  # set while in /run when the node may preempt it
    pause_cost_s: float = 0.0  # what its last pause took (the resume adds its own)
    binding: Binding | None = None  # pulled for a container (the scheduler mode)

    @property
    def msg(self) -> ActivationMessage:
        if self.parsed is None:
            self.parsed = parse_activation(self.raw)
        return self.parsed

    def compact(self) -> None:
        self.parsed = None


@dataclass(slots=True)
class Outcome:
    response: ActivationResponse
    run_s: float | None  # processing time of /run, for E[p] (None if it never ran)
    healthy: bool  # whether the container may be reused
    # What is left once the container and the core are free: the acks and the record.
    answer: Coroutine[Any, Any, None] | None = None
    cpu_s: float | None = None  # CPU time the container used during /run, if measured
    cpu_wait_s: float = 0.0  # time within /run it waited for a CPU (0 if unknown)


class ActivationRunner:
    def __init__(
        self,
        pool: ContainerPool,
        acks: AckSender,
        records: RecordWriter,
        clock: Clock,
        metrics: InvokerMetrics,
        sentinelled: Callable[[Action], bool] = lambda action: True,
        preemptive: bool = False,
        rank_call: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """``preemptive``: calls in /run may be paused (:class:`Pausable`).
        ``rank_call``: awaited as a call enters /init (:attr:`Job.in_init`) and /run with its
        CPU measured (:attr:`Job.in_run`), before the request is sent: an order of the
        running calls' CPU ranks it then (:meth:`invoker.cpu_order.CpuOrder.admit`), so
        that neither runs at a weight its container kept (a new one's default)."""
        self.pool = pool
        self.preemptive = preemptive
        self.rank_call = rank_call
        self.acks = acks
        self.records = records
        self.clock = clock
        self.metrics = metrics
        self.sentinelled = sentinelled

    async def run(self, job: Job, lease: Lease, cores: frozenset[int]) -> Outcome:
        """Run the job in the leased container; a blocking caller's result ack leaves at
        once. The caller then frees the core and the container and awaits
        ``Outcome.answer`` (logs, completion ack, record), so the next call never waits for
        log collection, the bus or the database."""
        msg, action = job.msg, job.action
        timeout_s = action.limits.timeout_ms / 1000
        start_ms = self.clock.epoch_ms()
        init_ms: int | None = None
        init_s = 0.0
        t_start = self.clock.now()
        self.metrics.starts.labels(lease.how.value).inc()
        try:
            container = await self.pool.prepare(lease, msg.user.namespace, action.name)
        except (ContainerError, ValueError) as e:
            log.error("activation %s: no container: %s", msg.activation_id, e)
            if isinstance(e, ContainerError) and not isinstance(e, ImagePullError):
                unrun = ActivationResponse.error(StatusCode.WHISK_ERROR, PROVISION_FAILED)
            else:  # a missing image or a kind this backend cannot run: the action's problem
                unrun = ActivationResponse.error(StatusCode.DEVELOPER_ERROR, str(e))
            await self.answer_unrun(job, unrun)
            return Outcome(unrun, None, healthy=False)
        self.metrics.wait.observe(max(0.0, self.clock.now() - job.received))
        wait_ms = self.clock.epoch_ms() - int(msg.transaction_start_ms)
        slot = lease.slot
        shared = slot.concurrency > 1  # calls of this action may run in it at once
        # Who initialises it is decided before any await, so that one call does.
        init_by_other = slot.init_result if not slot.initialized else None
        initialised: asyncio.Future[ActivationResponse | None] | None = None
        if not slot.initialized and init_by_other is None:
            slot.init_result = initialised = asyncio.get_running_loop().create_future()
        try:
            await container.assign_cores(cores)
        except BaseException:
            if initialised is not None:
                initialised.set_result(
                    ActivationResponse.error(StatusCode.WHISK_ERROR, PROVISION_FAILED)
                )
            raise
        response: ActivationResponse | None = None
        timed_out = False
        if init_by_other is not None:
            # Another call of this container is initialising it: run after it, or answer
            # with its /init error (the stock invoker aborts the calls it buffered so).
            response = await asyncio.shield(init_by_other)
        elif initialised is not None:
            response = ActivationResponse.error(StatusCode.WHISK_ERROR, PROVISION_FAILED)
            try:
                t0 = self.clock.now()
                start_ms = self.clock.epoch_ms()
                deadline = start_ms + action.limits.timeout_ms
                body = init_body(msg, action, deadline, job.platform_env)
                if not shared:
                    job.in_init = container
                    if self.rank_call is not None:
                        await self.rank_call()
                response, timed_out = await self._call(
                    container, "init", dumps(body), timeout_s, during_init=True
                )
                init_s = self.clock.now() - t0
                init_ms = round(init_s * 1000)
                if response is None:
                    self.pool.mark_initialized(lease)
            finally:
                job.in_init = None
                initialised.set_result(response)
        run_s: float | None = None
        cpu_s: float | None = None
        cpu_wait_s = 0.0
        if response is None:
            # A shared container's counters mix its calls' CPU: not one call's measure.
            cpu_before = None if shared else await container.cpu_times()
            run_start_ms = self.clock.epoch_ms()
            if init_ms is None:
                start_ms = run_start_ms
            t0 = self.clock.now()
            deadline = run_start_ms + action.limits.timeout_ms
            if cpu_before is not None:
                job.in_run = CpuMark(container, t0, cpu_before, t0, cpu_before)
            try:
                if job.in_run is not None and self.rank_call is not None:
                    await self.rank_call()
                result, timed_out = await self._call(
                    container,
                    "run",
                    dumps(run_body(msg, action, deadline)),
                    timeout_s,
                    max_payload=job.max_payload,
                    job=job if self.preemptive else None,
                )
            finally:
                job.in_run = None
            paused_s = job.pausable.paused_s if job.pausable is not None else 0.0
            job.pausable = None
            run_s = self.clock.now() - t0 - paused_s
            self.metrics.duration.observe(run_s)
            response = result
            cpu_after = await container.cpu_times() if cpu_before is not None else None
            if cpu_after is not None and cpu_before is not None:
                cpu_s = max(0.0, cpu_after.used - cpu_before.used)
                cpu_wait_s = min(run_s, max(0.0, cpu_after.waited - cpu_before.waited))
                self.metrics.cpu.observe(cpu_s)
        end_ms = self.clock.epoch_ms()
        assert response is not None  # an /init error, or what /run answered (never None)
        record = action_record(
            msg,
            action,
            start_ms=start_ms,
            end_ms=end_ms,
            response=response,
            init_time_ms=init_ms,
            wait_time_ms=max(0, wait_ms),
            timed_out=timed_out,
            cpu_time_ms=None if cpu_s is None else round(cpu_s * 1000),
        )
        developer_error = response.status_code >= StatusCode.DEVELOPER_ERROR
        logs_bytes = action.limits.logs_mb * MIB
        self._added_latency(job, t_start, (run_s or 0.0) + init_s)
        result_sent: asyncio.Task[None] | None = None
        if msg.blocking and logs_bytes > 0:
            result_sent = spawn(self.acks.result(msg.controller, msg.transid, record))
        logs: asyncio.Task[list[str]] | None = None
        if logs_bytes > 0:
            if developer_error and not shared:  # the container goes: read what it left first
                lines, _ = await self._logs(container, action, logs_bytes, True)
                record = record.with_logs(lines)
            else:  # (a shared one goes once its last call's logs are read)
                logs = self._logs_in_turn(lease, container, action, logs_bytes, developer_error)
        answer = self._finish(job, record, response, result_sent, logs)
        return Outcome(response, run_s, not developer_error, answer, cpu_s, cpu_wait_s)

    def _logs_in_turn(
        self,
        lease: Lease,
        container: Container,
        action: Action,
        limit: int,
        developer_error: bool = False,
    ) -> asyncio.Task[list[str]]:
        """Collect this activation's logs after the container's previous activations', so
        the container and the core are free while it happens (the next call may already run
        in the same container: its lines come after this one's sentinels). A collection
        failure condemns the container, as the reference destroys it. Calls that ran at
        once in one container (concurrency > 1) take its lines in the order they finished,
        each up to the next sentinels: lines written while two overlapped may land in
        either's record (as with the stock invoker's default log store)."""
        slot = lease.slot
        previous = slot.logs_done
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        slot.logs_done = mine

        async def collect() -> list[str]:
            try:
                if previous is not None:
                    await asyncio.shield(previous)
                lines, ok = await self._logs(container, action, limit, developer_error)
                if not ok:
                    self.pool.condemn(slot)
                return lines
            finally:
                mine.set_result(None)

        return spawn(collect(), name="collect-logs")

    def _added_latency(self, job: Job, dispatched: float, in_container_s: float) -> None:
        """The invoker's own time for a call, up to handing its result ack to the bus:
        receipt to ack, minus the time in /init and /run and the time queued for a core."""
        queued = max(0.0, dispatched - job.admitted) if job.admitted else 0.0
        added = self.clock.now() - job.received - queued - in_container_s
        self.metrics.observe_added_latency(max(0.0, added))

    async def _call(
        self,
        container: Container,
        what: str,
        body: bytes,
        timeout_s: float,
        *,
        during_init: bool = False,
        max_payload: int = MIB,
        job: Job | None = None,
    ) -> tuple[ActivationResponse | None, bool]:
        """POST /init or /run; returns (error-or-result, timed_out). For /init, None = ok.
        With ``job``, the /run may be paused (``job.pausable``)."""
        try:
            if during_init:
                answer: HttpResult = await container.init(body, timeout_s)
                return interpret_init(answer.status, answer.body), False
            if job is None:
                answer = await container.run(body, timeout_s)
            else:
                async with asyncio.timeout(timeout_s) as limit:
                    job.pausable = pausable = Pausable(container, limit, self.clock)
                    try:
                        answer = await container.run(body, UNBOUNDED_S)
                    finally:
                        await pausable.end()
            return interpret_run(answer.status, answer.body, max_payload, answer.length), False
        except TimeoutError:
            ms = int(timeout_s * 1000)
            return ActivationResponse.error(
                StatusCode.DEVELOPER_ERROR, timeout_message(ms, during_init)
            ), True
        except ContainerGone:
            oom = await container.was_oom_killed()
            message = MEMORY_EXHAUSTED if oom else (INIT_EXITED if during_init else RUN_EXITED)
            return ActivationResponse.error(StatusCode.DEVELOPER_ERROR, message), False
        except ContainerError as e:
            log.error("container %s failed during %s: %s", container.name, what, e)
            return ActivationResponse.error(StatusCode.WHISK_ERROR, PROVISION_FAILED), False

    async def _logs(
        self, container: Container, action: Action, limit: int, developer_error: bool
    ) -> tuple[list[str], bool]:
        collector = LogCollector(limit)
        ok = True
        try:
            lines, complete = await container.read_logs(
                limit, wait_for_sentinels=self.sentinelled(action) and not developer_error
            )
            for line in lines:
                collector.add(line.time, line.stream, line.text, line.raw_size)
            if sum(line.raw_size for line in lines) > limit:
                collector.truncated = True
            ok = complete or developer_error
        except (ContainerError, OSError) as e:
            log.warning("log collection from %s failed: %s", container.name, e)
            ok = False
        now = iso_time(self.clock.epoch_ms() * 1_000_000)
        return collector.finish(now, developer_error=developer_error, failed=not ok), ok

    async def _finish(
        self,
        job: Job,
        record: ActivationRecord,
        response: ActivationResponse,
        result_sent: asyncio.Task[None] | None,
        logs: asyncio.Task[list[str]] | None = None,
    ) -> None:
        msg = job.msg
        system_error = response.is_system_error
        if logs is not None:
            record = record.with_logs(await logs)
        if result_sent is not None:
            await result_sent
            ack = self.acks.completion(msg.controller, msg.transid, msg.activation_id, system_error)
        elif msg.blocking:
            ack = self.acks.combined(msg.controller, msg.transid, record, system_error)
        else:
            ack = self.acks.completion(msg.controller, msg.transid, msg.activation_id, system_error)
        await self._ack_and_store(ack, msg, record)
        self.metrics.activations.labels(response.status_code.status).inc()

    async def _ack_and_store(
        self,
        ack: Coroutine[Any, Any, None],
        msg: ActivationMessage | None,
        record: ActivationRecord,
    ) -> None:
        """Send the ack while the record is written (unless the user keeps no records);
        both, without a task each: the record is queued first, the ack awaited, then the
        record. An ack that fails still leaves the record to be written."""
        stored = None
        if msg is None or msg.user.limits.get("storeActivations") is not False:
            stored = self.records.submit(activation_document(record, self.clock.epoch_ms()))
        try:
            await ack
        except BaseException:
            if stored is not None:
                stored.add_done_callback(_retrieved)
            raise
        if stored is not None:
            await stored

    async def answer_unrun(self, job: Job, response: ActivationResponse) -> None:
        """Answer a resolved activation that could not run (no container, limits): a record
        with the action's annotations, a combined ack (shrunk unless blocking)."""
        now = self.clock.epoch_ms()
        record = action_record(
            job.msg,
            job.action,
            start_ms=now,
            end_ms=now,
            response=response,
            init_time_ms=None,
            wait_time_ms=max(0, now - job.msg.transaction_start_ms),
            timed_out=False,
        )
        await self.answer_fallback(job.msg.partial(), record, job.msg)

    async def answer_fallback(
        self, partial: Partial, record: ActivationRecord, msg: ActivationMessage | None = None
    ) -> None:
        """Answer an activation that never ran: combined ack (shrunk unless blocking) + record."""
        system_error = record.response.is_system_error
        assert partial.controller is not None
        ack = self.acks.combined(
            partial.controller, partial.transid, record, system_error, shrunk=not partial.blocking
        )
        await self._ack_and_store(ack, msg, record)
        code = StatusCode(record.response.status_code)
        self.metrics.activations.labels(code.status).inc()

    def fallback(self, partial: Partial, code: StatusCode, message: str) -> ActivationRecord:
        return fallback_record(partial, code, message, self.clock.epoch_ms())
