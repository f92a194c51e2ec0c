"""The activation runner (invoker/activation.py) with a pool on the simulated backend, acks on
the in-memory bus and records in the embedded store, on a virtual clock: what each failure of
a container becomes (status, acks, record) and whether the container is kept."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from containers.backend import (
    ContainerError,
    ContainerGone,
    HttpResult,
    ImagePullError,
    LogLine,
)
from containers.placement import WarmKey
from containers.pool import ContainerPool, Lease
from containers.simulated import SIM_CPU, SIM_DURATION
from invoker.acks import AckSender
from invoker.activation import ActivationRunner, Job, Outcome
from invoker.metrics import InvokerMetrics
from tests.unit.faults import FaultyBackend, FaultyContainer, FlakyProducer, FlakyStore, virtual
from whisk.bus.memory import MemoryBus
from whisk.clock import LoopClock
from whisk.protocol import QualifiedName, StatusCode, action_from_document, dumps
from whisk.protocol.controller import GUEST, action_document, activation_message
from whisk.protocol.logs import COLLECTION_FAILED
from whisk.protocol.messages import Ack, parse_ack
from whisk.protocol.runtime import (
    INIT_EXITED,
    INVALID_JSON,
    MEMORY_EXHAUSTED,
    PROVISION_FAILED,
    RUN_EXITED,
    timeout_message,
)
from whisk.store.embedded import EmbeddedStore
from whisk.store.records import RecordWriter

ACTIVATIONS = "activations"
CORES = frozenset({1})
INSTANCE = {"instance": 0, "uniqueName": "owi0", "displayedName": "owi0", "userMemory": "2048 MB"}


@dataclasses.dataclass
class Call:
    """One activation's run and everything it left: the outcome, the acks, the record."""

    outcome: Outcome
    lease: Lease
    held: FaultyContainer | None  # the container it ran in (the pool forgets a destroyed one)
    acks: list[Ack]
    record: dict[str, Any] | None

    @property
    def status(self) -> StatusCode:
        return self.outcome.response.status_code

    @property
    def error(self) -> Any:
        return self.outcome.response.result.get("error")

    def annotation(self, key: str) -> Any:
        assert self.record is not None
        return next((a["value"] for a in self.record["annotations"] if a["key"] == key), None)

    @property
    def container(self) -> FaultyContainer:
        assert self.held is not None
        return self.held


class Node:
    """The runner's collaborators, real and in memory, wired as the service wires them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, spool: Path, bus_failures: int) -> None:
        self.loop = loop
        self.clock = LoopClock(loop, epoch_ms_at_start=1_700_000_000_000)
        self.backend = FaultyBackend()
        self.pool = ContainerPool(
            self.backend, user_memory_mb=2048, clock=self.clock, name_prefix="wsk0"
        )
        self.bus = MemoryBus()
        self.producer = FlakyProducer(self.bus.producer(), bus_failures)
        self.acks = AckSender(self.producer, INSTANCE)
        self.store = FlakyStore(EmbeddedStore(":memory:", threaded=False))
        self.records = RecordWriter(self.store, ACTIVATIONS, spool, self.clock, linger_s=0.0)
        self.metrics = InvokerMetrics()
        self.runner = ActivationRunner(self.pool, self.acks, self.records, self.clock, self.metrics)
        self._read = 0
        self.runner_jobs: list[Job] = []  # every job given to the runner
        # What a test looks at once the container and the core are free, before the answer.
        self.before_answer: Callable[[], Awaitable[None]] | None = None

    async def start(self) -> None:
        await self.store.ensure_db(ACTIVATIONS)
        await self.pool.start()
        await self.records.start()

    async def close(self) -> None:
        await self.records.close()
        await self.pool.close()
        await self.store.close()

    def new_acks(self) -> list[Ack]:
        topic = self.bus.topic(self.acks.topic("0"))
        values = topic.read(self._read, 1000)
        self._read += len(values)
        return [parse_ack(v) for v in values]

    async def call(
        self,
        content: dict[str, Any] | None = None,
        *,
        name: str = "hello",
        blocking: bool = True,
        timeout_ms: int = 60_000,
        logs_mb: int = 10,
        max_payload: int = 1024 * 1024,
        user_limits: dict[str, Any] | None = None,
    ) -> Call:
        doc = action_document(
            "guest",
            name,
            kind="python:3.11",
            code=b"def main(args):\n    return args\n",
            timeout_ms=timeout_ms,
            logs_mb=logs_mb,
        )
        action = action_from_document({**doc, "_rev": "1-abc"})
        user = dataclasses.replace(GUEST, limits=user_limits or {})
        msg = activation_message(
            QualifiedName("guest", name),
            "1-abc",
            start_ms=self.clock.epoch_ms(),
            user=user,
            blocking=blocking,
            content=content or {SIM_DURATION: 0.5},
        )
        job = Job(dumps(msg.to_json()), action, 0, 0, self.clock.now(), max_payload=max_payload)
        self.runner_jobs.append(job)
        key = WarmKey("guest", action.docid, action.revision)
        lease = self.pool.reserve(key, action.kind, action.limits.memory_mb)
        assert lease is not None
        outcome = await self.runner.run(job, lease, CORES)
        held = lease.slot.container
        assert held is None or isinstance(held, FaultyContainer)
        self.pool.release(lease, healthy=outcome.healthy)  # as the service: before the answer
        if outcome.answer is not None:
            if self.before_answer is not None:
                await self.before_answer()
            await outcome.answer
        for _ in range(3):  # the pool's removals
            await asyncio.sleep(0)
        record = await self.store.inner.get(ACTIVATIONS, f"guest/{msg.activation_id}")
        return Call(outcome, lease, held, self.new_acks(), record)


def node_test(tmp_path: Path, body, *, bus_failures: int = 0) -> None:
    async def main(loop: asyncio.AbstractEventLoop) -> None:
        node = Node(loop, tmp_path / "spool", bus_failures)
        await node.start()
        try:
            await body(node)
        finally:
            await node.close()

    virtual(main)


def log_line(text: str) -> LogLine:
    return LogLine("2023-11-14T22:13:20.000000000Z", "stdout", text, len(text) + 60)


# -- the path without faults ------------------------------------------------------------------


def test_a_blocking_call_gets_its_result_at_once_then_its_completion_and_record(tmp_path):
    async def body(node: Node) -> None:
        node.backend.faults.logs = [log_line("hello from the action")]
        t0 = node.loop.time()
        first = await node.call({SIM_DURATION: 2.0, SIM_CPU: 0.5})
        assert first.status is StatusCode.SUCCESS and first.outcome.healthy
        assert first.outcome.run_s == pytest.approx(2.0)
        assert first.outcome.cpu_s == pytest.approx(0.5)
        assert node.loop.time() - t0 == pytest.approx(2.0)
        result, completion = first.acks
        assert result.record is not None and result.instance is None  # the result, at once
        assert result.record["response"]["statusCode"] == 0
        assert completion.instance == 0 and not completion.has_response
        assert not completion.system_error
        assert first.record is not None and first.record["duration"] == 2000
        assert first.record["logs"][0].endswith("stdout: hello from the action")
        assert first.annotation("initTime") == 0 and first.annotation("cpuTime") == 500
        assert first.annotation("timeout") is False
        assert first.container.cores == [CORES] and first.container.inits == 1
        assert first.lease.slot.initialized  # told to the pool: its next call skips /init
        # Warm: no second /init, no initTime.
        second = await node.call()
        assert second.container is first.container and first.container.inits == 1
        assert second.status is StatusCode.SUCCESS and second.annotation("initTime") is None
        samples = node.metrics.registry.get_sample_value
        assert samples("invoker_activations_total", {"status": "success"}) == 2

    node_test(tmp_path, body)


def test_the_runner_awaits_the_cpu_order_as_a_call_enters_init_and_run(tmp_path):
    """``rank_call``: an attained-service order ranks a call as it initialises its container
    (:attr:`Job.in_init`) and as it enters /run with its CPU measured (:attr:`Job.in_run`),
    not at its start; each request waits for it (the weights are in force before it)."""

    async def body(node: Node) -> None:
        seen: list[tuple[float, str]] = []

        async def rank_call() -> None:
            (job,) = [j for j in node.runner_jobs if j.in_init or j.in_run]
            seen.append((node.loop.time() - t0, "init" if job.in_init else "run"))
            await asyncio.sleep(0.5)  # each request waits: the call takes 0.5 s longer

        node.runner.rank_call = rank_call
        t0 = node.loop.time()
        await node.call({SIM_DURATION: 2.0})  # cold: /init, then /run
        first = node.loop.time() - t0
        await node.call({SIM_DURATION: 1.0})  # warm: /run only
        assert [where for _, where in seen] == ["init", "run", "run"]
        assert seen[0][0] + 0.5 <= seen[1][0] < 2.0 and first <= seen[2][0] < first + 0.1
        assert node.loop.time() - t0 >= 2.0 + 1.0 + 3 * 0.5
        assert all(j.in_init is None and j.in_run is None for j in node.runner_jobs)

    node_test(tmp_path, body)


def test_the_result_leaves_before_the_logs_are_collected(tmp_path):
    async def body(node: Node) -> None:
        node.backend.faults.logs_s = 5.0
        seen: list[list[Ack]] = []

        async def look() -> None:
            await asyncio.sleep(0.1)
            seen.append(node.new_acks())

        node.before_answer = look
        t0 = node.loop.time()
        call = await node.call({SIM_DURATION: 1.0})
        (early,) = seen[0]  # 0.1 s after /run, the logs still being read: the result is out
        assert early.record is not None and early.instance is None
        (completion,) = call.acks  # the completion waited for the logs
        assert completion.instance == 0
        assert node.loop.time() - t0 == pytest.approx(6.0)

    node_test(tmp_path, body)


def test_a_non_blocking_call_is_answered_with_its_completion_only(tmp_path):
    async def body(node: Node) -> None:
        call = await node.call(blocking=False)
        assert [a.has_response for a in call.acks] == [False]
        assert call.record is not None and call.record["response"]["statusCode"] == 0

    node_test(tmp_path, body)


def test_without_logs_a_blocking_call_gets_one_combined_ack(tmp_path):
    async def body(node: Node) -> None:
        call = await node.call(logs_mb=0)
        (ack,) = call.acks
        assert ack.record is not None and ack.instance == 0
        assert call.record is not None and call.record["logs"] == []

    node_test(tmp_path, body)


def test_records_are_not_stored_for_a_user_who_opted_out(tmp_path):
    async def body(node: Node) -> None:
        call = await node.call(user_limits={"storeActivations": False})
        assert call.record is None and len(call.acks) == 2
        assert node.store.calls["bulk"] == 0

    node_test(tmp_path, body)


# -- /init -------------------------------------------------------------------------------------


def test_an_init_failure_is_a_developer_error_and_the_container_goes(tmp_path):
    async def body(node: Node) -> None:
        node.backend.faults.init_answer = HttpResult(502, b'{"error":"SyntaxError: line 1"}', 0.0)
        node.backend.faults.logs = [log_line("Traceback ...")]
        call = await node.call()
        assert call.status is StatusCode.DEVELOPER_ERROR
        assert call.error == "SyntaxError: line 1"
        assert not call.outcome.healthy and call.outcome.run_s is None
        assert call.container.runs == 0 and not call.lease.slot.initialized
        assert call.container.destroyed == 1 and not node.pool.slots
        assert [a.system_error for a in call.acks] == [False, False]
        assert call.record is not None and "Traceback ..." in call.record["logs"][0]
        again = await node.call()  # a fresh container, initialised again
        assert again.container is not call.container

    node_test(tmp_path, body)


def test_an_init_past_the_time_limit_is_a_developer_error(tmp_path):
    async def body(node: Node) -> None:
        node.backend.faults.init_s = 30.0
        t0 = node.loop.time()
        call = await node.call(timeout_ms=1000)
        assert node.loop.time() - t0 == pytest.approx(1.0)
        assert call.error == timeout_message(1000, during_init=True)
        assert call.annotation("timeout") is True and call.container.runs == 0
        assert call.container.destroyed == 1

    node_test(tmp_path, body)


@pytest.mark.parametrize(
    "error, oom, message",
    [
        (ContainerGone("connection reset"), False, INIT_EXITED),
        (ContainerGone("connection reset"), True, MEMORY_EXHAUSTED),
    ],
    ids=["crash", "oom"],
)
def test_a_container_gone_during_init_is_a_developer_error(tmp_path, error, oom, message):
    async def body(node: Node) -> None:
        node.backend.faults.init_error = error
        node.backend.faults.oom = oom
        call = await node.call()
        assert (call.status, call.error) == (StatusCode.DEVELOPER_ERROR, message)
        assert call.container.destroyed == 1

    node_test(tmp_path, body)


# -- /run --------------------------------------------------------------------------------------


def test_a_run_past_the_time_limit_is_a_developer_error_marked_timed_out(tmp_path):
    async def body(node: Node) -> None:
        t0 = node.loop.time()
        call = await node.call({SIM_DURATION: 300.0}, timeout_ms=1000)
        assert node.loop.time() - t0 == pytest.approx(1.0)
        assert call.status is StatusCode.DEVELOPER_ERROR
        assert call.error == timeout_message(1000)
        assert call.annotation("timeout") is True
        assert call.outcome.run_s == pytest.approx(1.0)
        assert not call.outcome.healthy and call.container.destroyed == 1
        assert [a.system_error for a in call.acks] == [False, False]

    node_test(tmp_path, body)


@pytest.mark.parametrize(
    "oom, message", [(False, RUN_EXITED), (True, MEMORY_EXHAUSTED)], ids=["crash", "oom"]
)
def test_a_container_gone_mid_run_is_a_developer_error_and_is_removed(tmp_path, oom, message):
    async def body(node: Node) -> None:
        node.backend.faults.run_error = ContainerGone("connection reset by peer")
        node.backend.faults.error_after_s = 0.3
        node.backend.faults.oom = oom
        call = await node.call({SIM_DURATION: 1.0})
        assert (call.status, call.error) == (StatusCode.DEVELOPER_ERROR, message)
        assert call.outcome.run_s == pytest.approx(0.3)
        assert not call.outcome.healthy and call.container.destroyed == 1
        assert call.record is not None and call.record["response"]["statusCode"] == 2
        assert len(call.acks) == 2

    node_test(tmp_path, body)


def test_a_container_failing_under_a_run_is_a_whisk_error(tmp_path):
    async def body(node: Node) -> None:
        node.backend.faults.run_error = ContainerError("engine stopped answering")
        call = await node.call()
        assert (call.status, call.error) == (StatusCode.WHISK_ERROR, PROVISION_FAILED)
        assert call.container.destroyed == 1
        result, completion = call.acks
        assert result.record is not None and result.record["response"]["statusCode"] == 3
        assert completion.system_error

    node_test(tmp_path, body)


def test_an_oversized_result_is_an_application_error_and_the_container_stays(tmp_path):
    async def body(node: Node) -> None:
        big = b'{"x":"' + b"a" * 2000 + b'"}'
        node.backend.faults.run_answer = HttpResult(200, big, 0.0)
        call = await node.call(max_payload=1000)
        assert call.status is StatusCode.APPLICATION_ERROR
        assert "exceeded the allowed length: 2008 > 1000 bytes" in call.error
        assert call.outcome.healthy and call.container.destroyed == 0
        # The client kept only the first bytes of a larger answer: its true size counts.
        node.backend.faults.run_answer = HttpResult(200, big[:1001], 0.0, length=50_000_000)
        cut = await node.call(max_payload=1000)
        assert "50000000 > 1000 bytes" in cut.error
        assert cut.record is not None and cut.record["response"]["size"] == 50_000_000

    node_test(tmp_path, body)


@pytest.mark.parametrize(
    "answer, status, healthy, error",
    [
        (HttpResult(200, b"not json", 0.0), StatusCode.DEVELOPER_ERROR, False, INVALID_JSON),
        (HttpResult(200, b'{"error":"bad input"}', 0.0), StatusCode.APPLICATION_ERROR, True, ""),
        (HttpResult(502, b'{"error":"crashed"}', 0.0), StatusCode.DEVELOPER_ERROR, False, ""),
    ],
    ids=["bad-json", "application-error", "developer-error"],
)
def test_what_a_run_answers_decides_the_status_and_the_containers_fate(
    tmp_path, answer, status, healthy, error
):
    async def body(node: Node) -> None:
        node.backend.faults.run_answer = answer
        call = await node.call()
        assert call.status is status and call.outcome.healthy is healthy
        assert error in str(call.error)
        assert call.container.destroyed == (0 if healthy else 1)

    node_test(tmp_path, body)


def test_logs_that_cannot_be_collected_condemn_the_container(tmp_path):
    async def body(node: Node) -> None:
        node.backend.faults.logs_complete = False
        call = await node.call()
        assert call.status is StatusCode.SUCCESS
        assert call.record is not None and COLLECTION_FAILED in call.record["logs"][-1]
        assert call.container.destroyed == 1 and not node.pool.slots

    node_test(tmp_path, body)


# -- no container --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error, status, message",
    [
        (ContainerError("podman: no space left"), StatusCode.WHISK_ERROR, PROVISION_FAILED),
        (ImagePullError("image u/x not found"), StatusCode.DEVELOPER_ERROR, "image u/x not found"),
        (ValueError("kind cobol:1 unsupported"), StatusCode.DEVELOPER_ERROR, "kind cobol:1"),
    ],
    ids=["provision", "image", "kind"],
)
def test_a_call_without_a_container_gets_one_combined_ack_and_a_record(
    tmp_path, error, status, message
):
    async def body(node: Node) -> None:
        node.backend.faults.create_error = error
        call = await node.call()
        assert call.status is status and message in call.error
        assert call.outcome.run_s is None and not call.outcome.healthy
        (ack,) = call.acks
        assert ack.record is not None and ack.instance == 0
        assert ack.system_error is (status is StatusCode.WHISK_ERROR)
        assert call.record is not None and call.record["response"]["statusCode"] == status
        assert node.pool.used_memory_mb == 0
        quiet = await node.call(blocking=False)  # nobody waits: the ack is shrunk to the id
        (ack,) = quiet.acks
        assert ack.record is None and ack.has_response

    node_test(tmp_path, body)


# -- the bus away ----------------------------------------------------------------------------------


def test_acks_wait_out_a_bus_outage_and_none_is_lost_or_doubled(tmp_path):
    async def body(node: Node) -> None:
        call = await node.call()
        assert [a.has_response for a in call.acks] == [True, False]
        assert node.producer.attempts == 2 + 4
        assert node.acks.retrying == 0
        assert call.record is not None

    node_test(tmp_path, body, bus_failures=4)
