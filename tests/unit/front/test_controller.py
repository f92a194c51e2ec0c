"""Malformed acks on ``completed<C>`` and pings on ``health`` are logged, counted and
skipped: the front's consumers go on, so a blocking invoke still gets its result. In process;
over the real Kafka broker: tests/integration/front/test_controller.py."""

from __future__ import annotations

import re

from containers.simulated import SimulatedBackend
from tests.front_platform import platform
from whisk.bus.memory import MemoryBus
from whisk.store.embedded import EmbeddedStore

NS = "/api/v1/namespaces/_"

AID = "5a64676ec8aa46b5a4676ec8aaf6b5d2"

BAD_ACKS = [
    b'{"transid":["t",1],"activationId":["' + AID.encode() + b'"],"isSystemError":false,'
    b'"instance":{"instance":0,"userMemory":"1 B"}}',  # the one seen in the wild
    b'{"transid":["t",1],"response":{"activationId":{"x":1}}}',
    b'{"transid":["t",1],"activationId":"' + AID.encode() + b'","instance":{"instance":"0"}}',
    b'{"transid":' + b"[" * 1000 + b"]" * 1000 + b',"activationId":"' + AID.encode() + b'"}',
    b"[1,2]",
    b"",
    b"\xff\xfe not json",
    b'{"response":' + b'{"a":' * 2000 + b"1" + b"}" * 2001,
]

BAD_PINGS = [
    b'{"name":{"instance":"zero","userMemory":"1 B"}}',
    b'{"name":{"instance":0,"userMemory":"' + b"9" * 5000 + b' B"}}',
    b'{"name":[' + b"[" * 1000 + b"]" * 1000 + b"]}",
    b'{"name":{"instance":-1}}',
    b"null",
]


async def _invoke_after_poison(p, topic_prefix: str) -> None:
    producer = p.front.controller.bus.producer()
    await producer.start()
    try:
        for raw in BAD_ACKS:
            await producer.send(f"{topic_prefix}completed0", raw)
        for raw in BAD_PINGS:
            await producer.send(f"{topic_prefix}health", raw)
    finally:
        await producer.stop()
    code = {"exec": {"kind": "python:3.11", "code": "def main(a): return a"}}
    assert (await p.call("PUT", f"{NS}/actions/echo", json=code))[0] == 200
    for i in range(3):
        status, rec = await p.call("POST", f"{NS}/actions/echo?blocking=true", json={"i": i})
        assert status == 200, rec
        assert rec["response"]["success"] is True and len(rec["activationId"]) == 32
    metrics = p.front.controller.metrics
    assert sum(metrics.bad_acks.labels(k)._value.get() for k in _kinds()) == len(BAD_ACKS)
    assert sum(metrics.bad_pings.labels(k)._value.get() for k in _kinds()) == len(BAD_PINGS)
    # The same figures on the front's /metrics.
    status, text = await p.call("GET", "/metrics")
    assert status == 200
    counted = sum(
        float(v) for v in re.findall(r"^front_bad_acks_total\{[^}]*\} (\S+)$", text, re.M)
    )
    assert counted == len(BAD_ACKS)


def _kinds() -> tuple[str, ...]:
    from whisk.protocol.errors import KINDS

    return KINDS


async def test_bad_acks_and_pings_are_skipped_in_process(tmp_path):
    store = EmbeddedStore(tmp_path / "db.sqlite3")
    async with platform(
        bus=MemoryBus(),
        store=store,
        backend=SimulatedBackend(),
        state_dir=tmp_path,
        policy="fifo",
        action_cores=(0,),
    ) as p:
        await _invoke_after_poison(p, "")
    await store.close()
