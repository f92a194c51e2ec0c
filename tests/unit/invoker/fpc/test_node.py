"""The scheduler mode's pure parts: the resource record presence publishes, and which
ContainerCreationError a failed creation is acked with."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest

from containers.backend import ContainerError, ImagePullError
from containers.placement import SlotState
from containers.simulated import SIM_DURATION, SimulatedBackend, SimulatedContainer
from harness.fpc_scheduler import StandInScheduler, stand_in_scheduler
from invoker.config import InvokerConfig
from invoker.fpc.journal import Journal, Pulled
from invoker.fpc.messages import CREATION_ERRORS, ContainerCreation, encode
from invoker.fpc.node import _creation_error, resource_record
from invoker.fpc.presence import NoPresence
from invoker.service import Invoker
from whisk.bus.base import Record
from whisk.bus.memory import MemoryBus
from whisk.clock import SystemClock
from whisk.protocol import QualifiedName, loads
from whisk.protocol.controller import action_document, activation_message
from whisk.protocol.etcd_keys import ResourceRecord
from whisk.store.embedded import EmbeddedStore

SIM = QualifiedName("guest", "sim", "0.0.1")


def test_the_resource_record_counts_busy_and_in_progress_memory_against_free():
    record = resource_record(
        status="up",
        user_memory_mb=2048,
        busy_mb=512,
        in_progress_mb=256,
        tags=("gpu",),
        dedicated_namespaces=("ns1",),
    )
    assert json.loads(record.to_json()) == {
        "status": "up",
        "freeMemory": 1280,
        "busyMemory": 512,
        "inProgressMemory": 256,
        "tags": ["gpu"],
        "dedicatedNamespaces": ["ns1"],
    }
    over = resource_record(
        status="unhealthy",
        user_memory_mb=256,
        busy_mb=256,
        in_progress_mb=256,
        tags=(),
        dedicated_namespaces=(),
    )
    assert over.free_memory_mb == 0


def test_creation_failures_map_to_errors_the_scheduler_reads():
    cases = {
        (ImagePullError("no such image"), True): "BlackBoxError",
        (ValueError("the backend cannot run kind 'cobol:1'"), False): "WhiskError",
        (ContainerError("engine said no"), False): "WhiskError",
        (RuntimeError("bug"), False): "UnknownError",
    }
    for (error, blackbox), code in cases.items():
        got, reason = _creation_error(error, blackbox)
        assert got == code and got in CREATION_ERRORS and reason


async def test_no_presence_is_healthy_and_publishes_nothing():
    presence = NoPresence()
    await presence.start(ResourceRecord)
    assert presence.started and presence.healthy
    await presence.close()
    assert not presence.started


# -- the mode in process: the embedded bus and store, the simulated backend, the stand-in
# scheduler's gRPC side on loopback (the real services: tests/integration/invoker/fpc) --


@pytest.fixture
async def fpc(tmp_path) -> AsyncIterator[tuple[Invoker, StandInScheduler, Callable]]:
    bus, store = MemoryBus(), EmbeddedStore(tmp_path / "db.sqlite3")
    config = InvokerConfig(
        state_dir=str(tmp_path), policy="fifo", action_cores=(0,), mode="fpc", pause_grace_s=60
    )
    invoker = Invoker(config, bus=bus, store=store, backend=SimulatedBackend(), clock=SystemClock())
    await store.ensure_db(config.whisks_db)
    await store.put(
        config.whisks_db, action_document("guest", "sim", kind="python:3.11", code=b"x")
    )
    acks = bus.consumer(config.completed_topic("0"), "test-acks")
    created = bus.consumer(f"{config.topic_prefix}creationAck0", "test-creations")
    await invoker.start()
    # Not up before its own health test has run (upstream's InvokerHealthManager).
    assert invoker.fpc.resource_record().status == "unhealthy"
    await acks.start()
    await created.start()
    async with asyncio.timeout(10):  # the node's own health test first: one cold start
        while not invoker.fpc.health.ring.healthy or invoker.pending:
            await asyncio.sleep(0.01)
    assert invoker.pool.cold_starts == 1

    async def read(consumer_name: str, count: int) -> list[dict[str, Any]]:
        consumer = acks if consumer_name == "acks" else created
        out: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            while len(out) < count:
                out += [loads(r.value) for r in await consumer.poll(100, 0.05)]
        return out

    async with stand_in_scheduler(hold_s=0.5) as scheduler:
        yield invoker, scheduler, read
        await invoker.stop(deadline_s=5)
    await store.close()


def _creation(scheduler: StandInScheduler, rev: str) -> ContainerCreation:
    return ContainerCreation(
        transid=["tid", 1],
        invocation_namespace="guest",
        action=SIM,
        revision=rev,
        metadata={"exec": {"kind": "python:3.11"}, "name": "sim", "namespace": "guest"},
        scheduler_index={"asString": "0"},
        scheduler_host=scheduler.host,
        rpc_port=scheduler.port,
        creation_id="c" * 32,
    )


def _call(rev: str, seconds: float) -> dict[str, Any]:
    msg = activation_message(
        SIM, rev, start_ms=SystemClock().epoch_ms(), blocking=False, content={SIM_DURATION: seconds}
    )
    return msg.to_json()


async def test_a_pulled_call_runs_in_its_container_through_the_node_s_queue(fpc):
    invoker, scheduler, read = fpc
    rev = (await invoker.store.get(invoker.config.whisks_db, "guest/sim"))["_rev"]
    invoker._receive(Record(invoker.config.invoker_topic, 0, 0, encode(_creation(scheduler, rev))))
    (ack,) = await read("created", 1)
    assert ack["creationId"] == "c" * 32 and "error" not in ack
    assert invoker.pending == 0 and not invoker.offsets._in_flight.get(0), "offset finished"
    (puller,) = invoker.fpc.pullers.values()
    first, second = _call(rev, 0.3), _call(rev, 0.01)
    scheduler.enqueue("guest", SIM, rev, first)
    async with asyncio.timeout(5):
        while invoker.scheduler.running != 1:
            await asyncio.sleep(0.01)
    assert len(invoker.fpc.journal) == 1, "journaled while it runs"
    scheduler.enqueue("guest", SIM, rev, second)
    await asyncio.sleep(0.1)
    # One call at a time per container: the second waits at the scheduler, not here.
    assert scheduler.queued("guest", SIM, rev) == [second] and invoker.scheduler.queued == 0
    acks = await read("acks", 2)
    assert [a["activationId"] for a in acks] == [first["activationId"], second["activationId"]]
    assert all(a["isSystemError"] is False for a in acks)
    assert puller.calls == 2 and invoker.pool.cold_starts == 2, "both in the one container"
    assert puller.lease.slot.state is SlotState.BUSY, "held by its puller between calls"
    seen = scheduler.seen[puller.container_id]
    assert seen.warmed and seen.last_duration_ms is not None and seen.last_duration_ms >= 5
    async with asyncio.timeout(5):  # the answers (records) finish after the acks
        while invoker.pending:
            await asyncio.sleep(0.01)
    assert len(invoker.fpc.journal) == 0, "each left the journal once answered"


async def test_three_whisk_errors_in_ten_calls_make_it_unhealthy_until_its_test_passes(
    fpc, monkeypatch
):
    """Upstream's rule: the resource record says ``unhealthy`` once three of the last ten
    calls ended in a whisk error; the node then runs its health test action, call after
    call, until the errors have left the last ten."""
    invoker, scheduler, read = fpc
    health = invoker.fpc.health
    tests_before = health.tests
    run = SimulatedContainer.run

    async def failing(self: SimulatedContainer, body: bytes, timeout_s: float) -> Any:
        if b'"fail"' in body:
            raise ContainerError("the engine lost it")
        return await run(self, body, timeout_s)

    monkeypatch.setattr(SimulatedContainer, "run", failing)
    rev = (await invoker.store.get(invoker.config.whisks_db, "guest/sim"))["_rev"]
    for n in range(3):  # each failed call takes its container with it: a creation each
        creation = _creation(scheduler, rev)
        creation = replace(creation, creation_id=f"{n}" * 32)
        invoker._receive(Record(invoker.config.invoker_topic, 0, n, encode(creation)))
        (ack,) = await read("created", 1)
        assert "error" not in ack
        call = _call(rev, 0.01)
        call["content"] = {"fail": True}
        scheduler.enqueue("guest", SIM, rev, call)
        (done,) = await read("acks", 1)
        assert done["isSystemError"] is True
        if n < 2:
            assert health.ring.healthy
    async with asyncio.timeout(10):
        while health.ring.healthy:
            await asyncio.sleep(0.01)
    assert invoker.fpc.resource_record().status == "unhealthy"
    assert "whisk error" in invoker.health.problems["health-test"]
    async with asyncio.timeout(10):  # eight test calls push the first test and an error out
        while not health.ring.healthy:
            await asyncio.sleep(0.01)
    assert health.tests - tests_before == 8 and health.ring.errors == 2
    assert invoker.fpc.resource_record().status == "up"
    assert "health-test" not in invoker.health.problems


async def test_calls_a_killed_run_pulled_are_acked_again_rescheduled_or_answered(tmp_path):
    """What a killed run left in its journal: a call whose record was stored is acknowledged
    again (not run), one whose queue the scheduler still has goes back to it, one it cannot
    take back is answered with a whisk error; each then leaves the journal."""
    bus, store = MemoryBus(), EmbeddedStore(tmp_path / "db.sqlite3")
    config = InvokerConfig(state_dir=str(tmp_path), policy="fifo", action_cores=(0,), mode="fpc")
    for db in (config.whisks_db, config.activations_db):
        await store.ensure_db(db)
    rev = await store.put(
        config.whisks_db, action_document("guest", "sim", kind="python:3.11", code=b"x")
    )
    start_ms = SystemClock().epoch_ms()
    finished, cut_off, orphan = (
        activation_message(SIM, rev, start_ms=start_ms, blocking=False) for _ in range(3)
    )
    record = {"_id": f"guest/{finished.activation_id}", "response": {"statusCode": 0}}
    await store.put(config.activations_db, record)
    gone = QualifiedName("guest", "gone", "0.0.1")  # no queue for it at the scheduler
    journal = Journal(tmp_path / f"{config.container_prefix}.fpc-pulled")
    acks = bus.consumer(config.completed_topic("0"), "test-acks")
    async with stand_in_scheduler(hold_s=0.5) as scheduler:
        scheduler.create_queue("guest", SIM, rev)
        for msg, action in ((finished, SIM), (cut_off, SIM), (orphan, gone)):
            where = (scheduler.host, scheduler.port, "guest", action.to_json(), rev)
            journal.add(Pulled(*where, msg.to_json()))
        invoker = Invoker(
            config, bus=bus, store=store, backend=SimulatedBackend(), clock=SystemClock()
        )
        await invoker.start()
        await acks.start()
        try:
            got: dict[str, dict[str, Any]] = {}
            async with asyncio.timeout(20):
                while len(got) < 2 or len(journal):
                    got |= {_aid(a): a for a in map(loads, await _values(acks))}
            assert got[finished.activation_id]["isSystemError"] is False
            assert got[orphan.activation_id]["isSystemError"] is True
            assert cut_off.activation_id not in got
            assert scheduler.queued("guest", SIM, rev) == [cut_off.to_json()]
            answered = await store.get(config.activations_db, f"guest/{orphan.activation_id}")
            assert "did not take it back" in answered["response"]["result"]["error"]
            assert invoker.pool.cold_starts <= 1, "nothing ran but the health test"
        finally:
            await invoker.stop(deadline_s=5)
    await store.close()


async def _values(consumer: Any) -> list[bytes]:
    return [r.value for r in await consumer.poll(100, 0.05)]


def _aid(ack: dict[str, Any]) -> str:
    """The activation an ack is for (a combined ack carries it as its record or, shrunk, as
    its response)."""
    response = ack.get("response")
    return ack.get("activationId") or (
        response if isinstance(response, str) else response["activationId"]
    )
