"""The ack sender (invoker/acks.py) on the in-memory bus and a virtual clock: the three ack
shapes, shrinking what the topic cannot take, and retries with back-off while the bus is
away, without losing or duplicating an ack."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from invoker.acks import AckSender
from tests.unit.faults import FlakyProducer, virtual
from whisk.bus import MessageTooLarge
from whisk.bus.memory import MemoryBus
from whisk.protocol import (
    ActivationRecord,
    ActivationResponse,
    StatusCode,
    combined_ack,
    dumps,
    parse_activation,
    result_ack,
)
from whisk.protocol.messages import Ack, parse_ack

AID = "5a64676ec8aa46b5a4676ec8aaf6b5d2"
TRANSID = ["K3uS0t1qQ9bVvJc2mO0fLZxX8rP4yT7a", 1717000000123]


def instance() -> dict[str, Any]:
    return {"instance": 0, "uniqueName": "owi0", "displayedName": "owi0", "userMemory": "2048 MB"}


def record(size: int = 10) -> ActivationRecord:
    return ActivationRecord(
        namespace="guest",
        name="hello",
        subject="guest",
        activation_id=AID,
        start_ms=1,
        end_ms=2,
        duration_ms=1,
        response=ActivationResponse(StatusCode.SUCCESS, {"text": "x" * size}),
        logs=(),
        version="0.0.1",
        annotations=(),
    )


class Node:
    """An ack sender on a fresh in-memory bus, with an urgent and a batching producer."""

    def __init__(self, failures: int = 0, max_backoff_s: float = 5.0, prefix: str = "") -> None:
        self.bus = MemoryBus()
        self.urgent = FlakyProducer(self.bus.producer(), failures)
        self.bulk = FlakyProducer(self.bus.producer(batching=True))
        self.acks = AckSender(
            self.urgent, instance(), prefix, self.bulk, max_backoff_s=max_backoff_s
        )

    def received(self, controller: str = "0") -> list[Ack]:
        topic = self.bus.topic(self.acks.topic(controller))
        return [parse_ack(v) for v in topic.read(0, 1000)]


def test_the_three_shapes_reach_completed_of_their_controller():
    async def main(loop):
        node = Node(prefix="dev_")
        await node.acks.result("3", TRANSID, record())
        await node.acks.completion("3", TRANSID, AID, system_error=False)
        await node.acks.combined("3", TRANSID, record(), system_error=True)
        assert node.acks.topic("3") == "dev_completed3"
        result, completion, combined = node.received("3")
        sent = record().to_json()
        assert result.has_response and result.record == sent and result.instance is None
        assert result.transid == TRANSID
        assert not completion.has_response and completion.instance == 0
        assert completion.activation_id == AID and not completion.system_error
        assert combined.record == sent and combined.instance == 0 and combined.system_error
        assert node.acks.sent == 3 and node.acks.shrunk == 0
        assert node.received("0") == []

    virtual(main)


def test_acks_carrying_a_result_go_out_at_once_completions_may_be_batched():
    async def main(loop):
        node = Node()
        await node.acks.result("0", TRANSID, record())
        await node.acks.combined("0", TRANSID, record(), system_error=False)
        await node.acks.completion("0", TRANSID, AID, system_error=False)
        await node.acks.combined("0", TRANSID, record(), system_error=False, shrunk=True)
        assert len(node.urgent.sent) == 2 and len(node.bulk.sent) == 2
        assert [parse_ack(v).has_response for _, v in node.bulk.sent] == [False, True]
        assert parse_ack(node.bulk.sent[1][1]).record is None  # the shrunk combined ack

    virtual(main)


def test_a_result_too_large_for_the_topic_is_sent_as_the_activation_id():
    async def main(loop):
        node = Node()
        await node.bus.ensure_topic("completed0", {"max.message.bytes": "2000"})
        await node.acks.result("0", TRANSID, record(size=5000))
        await node.acks.combined("0", TRANSID, record(size=5000), system_error=False)
        result, combined = node.received()
        assert result.activation_id == AID and result.has_response and result.record is None
        assert combined.activation_id == AID and combined.record is None
        assert combined.instance == 0  # still frees the controller's slot
        assert node.acks.shrunk == 2 and node.acks.sent == 2

    virtual(main)


def test_an_ack_carries_the_records_own_json_or_shrunk_only_its_activation_id():
    async def main(loop):
        node = Node()
        await node.bus.ensure_topic("completed0", {"max.message.bytes": "2000"})
        small, big = record(), record(size=5000)
        await node.acks.result("0", TRANSID, small)
        await node.acks.combined("0", TRANSID, small, system_error=False)
        await node.acks.result("0", TRANSID, big)
        await node.acks.combined("0", TRANSID, big, system_error=True)
        await node.acks.combined("0", TRANSID, small, system_error=False, shrunk=True)
        assert node.bus.topic("completed0").read(0, 10) == [
            dumps(result_ack(TRANSID, small.to_json())),
            dumps(combined_ack(TRANSID, small.to_json(), False, instance())),
            dumps(result_ack(TRANSID, AID)),
            dumps(combined_ack(TRANSID, AID, True, instance())),
            dumps(combined_ack(TRANSID, AID, False, instance())),
        ]

    virtual(main)


def test_an_ack_that_cannot_be_shrunk_fails_with_the_bus_error():
    async def main(loop):
        node = Node()
        await node.bus.ensure_topic("completed0", {"max.message.bytes": "50"})
        with pytest.raises(MessageTooLarge, match="completed0"):
            await node.acks.completion("0", TRANSID, AID, system_error=False)
        assert node.received() == [] and node.acks.retrying == 0

    virtual(main)


def test_while_the_bus_is_away_an_ack_is_retried_with_growing_backoff_and_sent_once(caplog):
    caplog.set_level(logging.WARNING, logger="invoker.acks")

    async def main(loop):
        node = Node(failures=6, max_backoff_s=1.0)
        t0 = loop.time()
        send = asyncio.ensure_future(node.acks.result("0", TRANSID, record()))
        await asyncio.sleep(0.05)
        assert not send.done() and node.acks.retrying == 1  # the node's health sees it
        await send
        # 0.1 + 0.2 + 0.4 + 0.8, then capped at 1.0 twice.
        assert loop.time() - t0 == pytest.approx(3.5)
        assert node.urgent.attempts == 7
        assert len(node.received()) == 1 and node.received()[0].record == record().to_json()
        assert node.acks.retrying == 0 and node.acks.sent == 1

    virtual(main)
    warnings = [r.getMessage() for r in caplog.records if r.name == "invoker.acks"]
    assert len(warnings) == 6
    assert "ack to completed0 failed (broker unreachable (injected))" in warnings[0]


def test_acks_waiting_for_the_bus_are_counted_and_all_delivered():
    async def main(loop):
        node = Node(failures=4)
        sends = [
            asyncio.ensure_future(node.acks.combined("0", TRANSID, record(n), False))
            for n in range(3)
        ]
        await asyncio.sleep(0.01)
        assert node.acks.retrying == 3
        await asyncio.gather(*sends)
        assert node.acks.retrying == 0
        assert sorted(len(a.record["response"]["result"]["text"]) for a in node.received()) == [
            0,
            1,
            2,
        ]

    virtual(main)


def test_an_ack_cancelled_while_retrying_is_no_longer_counted():
    async def main(loop):
        node = Node(failures=1000)
        send = asyncio.ensure_future(node.acks.result("0", TRANSID, record()))
        await asyncio.sleep(10)
        assert node.acks.retrying == 1
        send.cancel()
        with pytest.raises(asyncio.CancelledError):
            await send
        assert node.acks.retrying == 0 and node.received() == []

    virtual(main)


def test_the_acks_echo_the_activation_messages_transid():
    # The controller matches acks by transid: it must come back exactly as it was received.
    raw = (
        b'{"transid":["sid_x",1717000000001,true],"action":{"path":"guest","name":"a"},'
        b'"revision":null,"user":{"subject":"guest","namespace":{"name":"guest","uuid":'
        b'"23bc46b1-71f6-4ed5-8c54-816aa4f8c502"},"authkey":{"api_key":"k"},"rights":[],'
        b'"limits":{}},"activationId":"' + AID.encode() + b'","rootControllerIndex":'
        b'{"asString":"0","instanceType":"controller"},"blocking":false}'
    )
    msg = parse_activation(raw)

    async def main(loop):
        node = Node()
        await node.acks.completion(msg.controller, msg.transid, msg.activation_id, False)
        assert node.received()[0].transid == ["sid_x", 1717000000001, True]

    virtual(main)
