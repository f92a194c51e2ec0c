"""The scheduler mode's Kafka messages on the real broker: what the stand-in scheduler
publishes on invoker<N> is what the invoker's parser reads, and acks published on
creationAck<S> reach the scheduler side."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer
from services import unique_name

from harness.controller import follow_topic
from harness.fpc_scheduler import StandInScheduler, stand_in_scheduler
from invoker.fpc.messages import (
    ContainerCreation,
    ContainerDeletion,
    CreationAck,
    encode,
    parse_container_message,
)
from whisk.bus.kafka import INVOKER_TOPIC_CONFIG, KafkaBus
from whisk.protocol import QualifiedName, loads
from whisk.supervisor import spawn

pytestmark = pytest.mark.services

ACTION = QualifiedName("guest", "hello", "0.0.1")
REV = "1-8c4f2d0e5a1b7c9d"
INVOKER = {
    "instance": 3,
    "instanceType": "invoker",
    "uniqueName": "node-a",
    "userMemory": "2147483648 B",
    "tags": [],
    "dedicatedNamespaces": [],
}


@pytest.fixture
async def scheduler(kafka) -> AsyncIterator[StandInScheduler]:
    prefix = unique_name("fpc") + "_"
    # The invoker creates its own topic at start-up; here the test stands in for it.
    await KafkaBus(kafka.bootstrap).ensure_topic(f"{prefix}invoker3", INVOKER_TOPIC_CONFIG)
    async with stand_in_scheduler(kafka.bootstrap, topic_prefix=prefix, index="1") as s:
        yield s


async def read(bootstrap: str, topic: str, count: int, timeout_s: float = 30) -> list[bytes]:
    got: list[bytes] = []
    done = asyncio.Event()

    def on_message(value: bytes) -> None:
        got.append(value)
        if len(got) >= count:
            done.set()

    task = spawn(follow_topic(bootstrap, topic, on_message), name="read")
    try:
        async with asyncio.timeout(timeout_s):
            await done.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return got


async def test_a_creation_and_a_deletion_reach_invoker_n_as_the_invoker_reads_them(
    kafka, scheduler
):
    creation = await scheduler.create_container(3, "guest", ACTION, REV, kind="nodejs:20")
    deletion = await scheduler.delete_containers(3, "guest", ACTION, REV, kind="nodejs:20")
    raw_creation, raw_deletion = await read(kafka.bootstrap, scheduler.invoker_topic(3), 2)
    obj = loads(raw_creation)
    assert set(obj) == {
        "action",
        "creationId",
        "invocationNamespace",
        "retryCount",
        "revision",
        "rootSchedulerIndex",
        "schedulerHost",
        "rpcPort",
        "transid",
        "whiskActionMetaData",
    }
    assert (obj["schedulerHost"], obj["rpcPort"]) == ("127.0.0.1", scheduler.port)
    assert obj["rootSchedulerIndex"] == {"asString": "1"}
    assert obj["action"] == {"path": "guest", "name": "hello", "version": "0.0.1"}
    meta = obj["whiskActionMetaData"]
    assert meta["exec"] == {"kind": "nodejs:20", "binary": False}  # no code: it is in CouchDB
    assert {"annotations", "limits", "name", "namespace", "parameters", "publish"} <= set(meta)
    parsed = parse_container_message(raw_creation)
    assert isinstance(parsed, ContainerCreation) and parsed == creation
    assert not parsed.is_warm_up and parsed.kind == "nodejs:20"
    gone = parse_container_message(raw_deletion)
    assert isinstance(gone, ContainerDeletion) and gone == deletion
    assert set(loads(raw_deletion)) == {
        "action",
        "invocationNamespace",
        "revision",
        "transid",
        "whiskActionMetaData",
    }
    # The scheduler makes the queue before it asks for containers.
    assert scheduler.queued("guest", ACTION, REV) == []


async def test_acks_on_creation_ack_s_reach_the_scheduler_side(kafka, scheduler):
    ok = await scheduler.create_container(3, "guest", ACTION, REV)
    failed = await scheduler.create_container(3, "guest", ACTION, REV, retry_count=1)
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)  # as the invoker sends
    await producer.start()
    try:
        assert scheduler.ack_topic.endswith("creationAck1")
        await producer.send_and_wait(scheduler.ack_topic, b"not an ack")
        await producer.send_and_wait(
            scheduler.ack_topic, encode(CreationAck.for_creation(ok, INVOKER))
        )
        await producer.send_and_wait(
            scheduler.ack_topic,
            encode(CreationAck.for_creation(failed, INVOKER, "DBFetchError", "no such action")),
        )
    finally:
        await producer.stop()
    ack = await scheduler.wait_ack(ok.creation_id)
    assert ack == CreationAck.for_creation(ok, INVOKER) and ack.error is None
    assert (ack.invoker["instance"], ack.rpc_port) == (3, scheduler.port)
    bad = await scheduler.wait_ack(failed.creation_id)
    assert (bad.error, bad.reason, bad.retry_count) == ("DBFetchError", "no such action", 1)
    assert scheduler.bad_acks == [b"not an ack"]
    with pytest.raises(TimeoutError):
        await scheduler.wait_ack("f" * 32, timeout_s=0.5)
