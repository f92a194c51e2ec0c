"""Poison messages against the real broker and the real ``ow-invoker run`` process: each is
counted, answered with a whisk error when its activation id can be read, committed past
(never delivered again), and the node goes on running the next good activation."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from harness.controller import controller, make_config
from harness.processes import InvokerProcess
from tests.integration.harness import PY_HELLO
from whisk.protocol import QualifiedName, dumps
from whisk.protocol.controller import activation_message

pytestmark = pytest.mark.services


def _message(**changes) -> tuple[str, dict]:
    msg = activation_message(QualifiedName("guest", "good"), None, start_ms=1).to_json()
    msg.update(changes)
    return msg["activationId"], msg


def _nested(depth: int, head: bytes, leaf: bytes, tail: bytes) -> bytes:
    return head * depth + leaf + tail * depth


def poison() -> list[tuple[str, bytes | None, str | None, str]]:
    """(name, message, activation id when it can be answered, kind counted)."""
    out: list[tuple[str, bytes | None, str | None, str]] = []
    # ~4 KB: the transid with a few hundred levels of extras seen in the wild.
    aid, msg = _message(transid="@T@")
    deep = _nested(400, b'["t",1,', b'["t",1]', b"]")
    out.append(("deep transid", dumps(msg).replace(b'"@T@"', deep), aid, "invalid_field"))
    # Nested beyond the JSON parser's limit, in the content.
    aid, msg = _message(content="@C@")
    deep = _nested(2000, b'{"a":', b"1", b"}")
    out.append(("deep content", dumps(msg).replace(b'"@C@"', deep), aid, "too_deep"))
    # About 1 MB (the broker's limit), invalid UTF-8 inside.
    aid, msg = _message(content={"x": "@X@"})
    big = dumps(msg).replace(b"@X@", b"\xff" * 1_000_000)
    out.append(("1 MB of invalid UTF-8", big, aid, "not_utf8"))
    aid, msg = _message()
    text = dumps(msg).replace(b'"name":"good"', b'"name":"g\xc3"')
    out.append(("invalid UTF-8 in the name", text, aid, "not_utf8"))
    aid, msg = _message(blocking="@B@")
    huge = dumps(msg).replace(b'"@B@"', b"1" + b"0" * 400)
    out.append(("huge number", huge, aid, "number_out_of_range"))
    _, msg = _message()
    out.append(("JSON array", b"[" + dumps(msg) + b"]", None, "not_object"))
    out.append(("empty", b"", None, "empty"))
    out.append(("null (a tombstone)", None, None, "empty"))
    return out


async def committed(bootstrap: str, group: str, topic: str) -> int:
    """The consumer group's committed offset, as the broker has it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    meta = offsets.get(TopicPartition(topic, 0))
    return meta.offset if meta is not None else -1


_SAMPLE = re.compile(r'^(invoker_bad_message\w*?_total)(?:\{kind="(\w+)"\})? (\S+)$', re.M)


async def metrics(port: int) -> dict[str, float]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        text = await r.text()
    values = {}
    for m in _SAMPLE.finditer(text):
        values[m.group(2) or m.group(1)] = float(m.group(3))
    return values


async def test_poison_is_answered_committed_past_and_counted(kafka, couchdb, tmp_path):
    config = make_config(tmp_path, action_cores=(0,))
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    messages = poison()
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("good", PY_HELLO)
            proc.start()
            async with asyncio.timeout(60):  # joined: it pings
                while not stub.pings:
                    await asyncio.sleep(0.1)
            assert stub.producer is not None
            for _, raw, _, _ in messages:
                key = b"tombstone" if raw is None else None  # Kafka wants one of the two
                await stub.producer.send_and_wait(config.invoker_topic, raw, key=key)
            good = await stub.invoke(action, rev)
            # The good activation behind them all still runs.
            acks = await stub.wait_completion(good, timeout_s=60)
            assert acks[0]["response"]["response"]["result"] == {"greeting": "Hello stranger"}
            for name, _, aid, _ in messages:
                if aid is None:
                    continue
                acks = await stub.wait_completion(aid, timeout_s=30)
                assert acks[-1]["isSystemError"] is True, name
                rec = await stub.record(aid)
                assert rec["response"]["statusCode"] == 3, name
                assert "invalid" in rec["response"]["result"]["error"], name
            # Committed past every one of them: a restart never sees them again.
            topic, end = config.invoker_topic, len(messages) + 1
            async with asyncio.timeout(30):
                while await committed(kafka.bootstrap, topic, topic) < end:
                    await asyncio.sleep(0.2)
            counted = await metrics(proc.admin_port)
            assert counted["invoker_bad_messages_total"] == len(messages), counted
            for kind in {k for *_, k in messages}:
                expected = sum(1 for *_, k in messages if k == kind)
                assert counted[kind] == expected, (kind, counted)
            assert proc.proc is not None and proc.proc.poll() is None, proc.log()[-3000:]
            # And after a restart nothing is delivered again, while new work still runs.
            assert await asyncio.to_thread(proc.terminate, 60) == 0
            proc.start()
            again = await stub.invoke(action, rev)
            await stub.wait_completion(again, timeout_s=60)
            assert (await metrics(proc.admin_port))["invoker_bad_messages_total"] == 0
    finally:
        proc.stop()
