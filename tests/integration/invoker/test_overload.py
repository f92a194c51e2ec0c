"""Overload: 100 000 queued activations keep memory bounded, and back-pressure pauses
consumption (the rest stays in Kafka) instead of growing without limit."""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition

from harness.controller import running_invoker
from whisk.protocol import dumps
from whisk.protocol.controller import activation_message

pytestmark = pytest.mark.services

QUEUED = 100_000
EXTRA = 5_000
BLOCKER = b"import time\ndef main(a):\n    time.sleep(300)\n    return {}\n"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def test_hundred_thousand_queued_calls(kafka, couchdb, tmp_path, capsys):
    async with running_invoker(kafka, couchdb, tmp_path, action_cores=(0,), max_pending=QUEUED) as (
        invoker,
        stub,
    ):
        action, rev = await stub.create_action("blocker", BLOCKER, timeout_ms=600_000, logs_mb=0)
        # Occupy the only core, so everything after queues.
        await stub.invoke(action, rev, blocking=False)
        async with asyncio.timeout(30):
            while invoker.scheduler.running == 0:
                await asyncio.sleep(0.05)
        gc.collect()
        before = rss_bytes()
        t0 = time.monotonic()
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka.bootstrap,
            max_batch_size=1 << 20,
            linger_ms=20,
            max_request_size=2 << 20,
        )
        await producer.start()
        try:
            delivered = []
            for i in range(QUEUED + EXTRA):
                msg = activation_message(action, rev, start_ms=1, blocking=False, content={"i": i})
                delivered.append(
                    await producer.send(stub.config.invoker_topic, dumps(msg.to_json()))
                )
            await asyncio.gather(*delivered)
        finally:
            await producer.stop()
        async with asyncio.timeout(180):
            while invoker.pending < QUEUED:
                await asyncio.sleep(0.2)
        await asyncio.sleep(2.0)  # consumption must stay paused now
        gc.collect()
        grown = rss_bytes() - before
        queued = invoker.scheduler.queued
        per_call = grown / queued
        with capsys.disabled():
            print(
                f"\n{queued} queued activations: RSS +{grown / 2**20:.0f} MiB, "
                f"{per_call:.0f} bytes per queued call; "
                f"queued in {time.monotonic() - t0:.1f} s"
            )
        assert QUEUED - 1 <= queued <= QUEUED  # one runs, the rest wait
        assert invoker.pending <= QUEUED
        tp = TopicPartition(invoker.config.invoker_topic, 0)
        position = await invoker.consumer._consumer.position(tp)
        end = (await invoker.consumer.end_offsets())[0]
        assert end - position >= EXTRA // 2, "back-pressure left the rest in Kafka"
        assert per_call < 4096, f"{per_call:.0f} bytes per queued call"
