"""The record writer (whisk/store/records.py) on the embedded store and a virtual clock: batches,
the on-disk spool while the database is away, its replay in order, its bound, a restart with
records still spooled, and a failing batch that never leaves a writer waiting."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.faults import FlakyStore
from whisk.clock import VirtualClock
from whisk.protocol import dumps
from whisk.store.embedded import EmbeddedStore
from whisk.store.records import RecordWriter
from whisk.supervisor import Supervisor

DB = "activations"
# How long the writer leaves the database alone (on the virtual clock, which the tests move)
# and how often it looks at the spool (in real time).
RETRY_S = 0.05


def doc(n: int) -> dict[str, Any]:
    return {"_id": f"guest/{n:032x}", "activationId": f"{n:032x}", "namespace": "guest"}


@pytest.fixture
async def store() -> AsyncIterator[FlakyStore]:
    s = FlakyStore(EmbeddedStore(":memory:", threaded=False))
    await s.ensure_db(DB)
    yield s
    await s.close()


class Writers:
    """Record writers on one store, spool directory and virtual clock; all closed at the end."""

    def __init__(self, store: FlakyStore, spool: Path) -> None:
        self.store = store
        self.spool = spool
        self.clock = VirtualClock()
        self.all: list[RecordWriter] = []

    async def new(self, **kwargs: Any) -> RecordWriter:
        kwargs.setdefault("linger_s", 0.0)
        kwargs.setdefault("retry_s", RETRY_S)
        # Restarts of the writing loop after a failure are quick in real time.
        sup = Supervisor(self.clock, backoff_s=0.01, max_failures=100)
        w = RecordWriter(self.store, DB, self.spool, self.clock, supervisor=sup, **kwargs)
        await w.start()
        self.all.append(w)
        return w

    async def close(self) -> None:
        for w in self.all:
            await w.close(timeout_s=1.0)


@pytest.fixture
async def writers(store: FlakyStore, tmp_path: Path) -> AsyncIterator[Writers]:
    ws = Writers(store, tmp_path / "spool")
    yield ws
    await ws.close()


async def stored(store: FlakyStore, n: int) -> dict[str, Any] | None:
    return await store.inner.get(DB, doc(n)["_id"])


async def eventually(condition, timeout_s: float = 5.0) -> None:
    """Wait (in real time: the writer's replay runs on its own timer) until ``condition()``."""
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.005)


async def test_a_write_returns_once_the_record_is_in_the_database(store, writers):
    w = await writers.new()
    await w.write(doc(1))
    assert (await stored(store, 1))["activationId"] == f"{1:032x}"
    assert (w.written, w.spooled, w.spooled_now) == (1, 0, 0)


async def test_records_written_together_go_in_batches_of_at_most_batch_max(store, writers):
    w = await writers.new(batch_max=4)
    await asyncio.gather(*(w.write(doc(n)) for n in range(10)))
    assert [len(b) for b in store.bulks] == [4, 4, 2]
    assert [i for b in store.bulks for i in b] == [doc(n)["_id"] for n in range(10)]
    assert w.written == 10


async def test_a_re_delivered_record_already_stored_counts_as_written(store, writers):
    await store.inner.put(DB, doc(1))
    w = await writers.new()
    await w.write(doc(1))  # 409 conflict
    assert (w.written, w.spooled_now) == (1, 0)


@pytest.mark.parametrize("failure", ["down", "refuse"])
async def test_while_the_database_is_away_records_are_spooled_then_replayed_in_order(
    store, writers, failure, caplog
):
    caplog.set_level(logging.WARNING, logger="whisk.store.records")
    w = await writers.new()
    setattr(store, failure, True)
    await w.write(doc(1))  # durable on disk: the write returns
    assert w.is_spooled(doc(1)["_id"]) and w.spooled_now == 1
    assert "spooling records" in caplog.text
    assert doc(1)["_id"].encode() in w.spool_path.read_bytes()
    setattr(store, failure, False)
    # Back, but within the retry interval: a new record queues behind the spooled one.
    await w.write(doc(2))
    assert w.spooled_now == 2 and store.bulks == []
    assert await stored(store, 1) is None
    writers.clock.advance_to(writers.clock.now() + RETRY_S)
    await eventually(lambda: w.spooled_now == 0)
    assert [i for b in store.bulks for i in b] == [doc(1)["_id"], doc(2)["_id"]]
    assert await stored(store, 1) is not None and await stored(store, 2) is not None
    assert w.spool_path.read_bytes() == b""
    # Nothing waits in the spool any more: the next record goes straight in.
    await w.write(doc(3))
    assert store.bulks[-1] == [doc(3)["_id"]] and w.spooled_now == 0


async def test_a_restarted_writer_replays_what_a_previous_one_spooled(store, writers):
    first = await writers.new()
    store.down = True
    for n in range(3):
        await first.write(doc(n))
    await first.close()
    store.down = False
    second = await writers.new()
    assert second.spooled_now == 3 and second.is_spooled(doc(0)["_id"])
    writers.clock.advance_to(writers.clock.now() + RETRY_S)
    await eventually(lambda: second.spooled_now == 0)
    for n in range(3):
        assert await stored(store, n) is not None


async def test_a_torn_last_line_of_the_spool_is_skipped(store, writers, caplog):
    writers.spool.mkdir(parents=True)
    spool = writers.spool / f"{DB}.spool.jsonl"
    spool.write_bytes(dumps(doc(1)) + b"\n" + dumps(doc(2))[:15])  # killed mid-append
    w = await writers.new()
    assert w.spooled_now == 1
    assert "torn line" in caplog.text
    await eventually(lambda: w.spooled_now == 0)
    assert await stored(store, 1) is not None


async def test_a_full_spool_holds_the_writer_until_the_database_is_back(store, writers):
    w = await writers.new(spool_limit_bytes=len(dumps(doc(1))) + 10, retry_s=0.01)
    store.down = True
    await w.write(doc(1))
    second = asyncio.ensure_future(w.write(doc(2)))
    await asyncio.sleep(0.1)
    assert not second.done()  # held: its offset stays uncommitted, consumption pauses
    assert w.spooled_now == 1
    store.down = False
    writers.clock.advance_to(writers.clock.now() + 1.0)
    await asyncio.wait_for(second, 5.0)
    await eventually(lambda: w.spooled_now == 0)
    assert await stored(store, 1) is not None and await stored(store, 2) is not None


async def test_close_flushes_what_is_queued(store, writers):
    w = await writers.new(linger_s=0.05)
    pending = [asyncio.ensure_future(w.write(doc(n))) for n in range(5)]
    await asyncio.sleep(0)
    await w.close()
    assert all(p.done() for p in pending)
    for n in range(5):
        assert await stored(store, n) is not None


async def test_an_unexpected_failure_reaches_the_writers_and_the_loop_restarts(
    store, writers, caplog
):
    w = await writers.new()
    store.broken = RuntimeError("disk on fire")
    with pytest.raises(RuntimeError, match="disk on fire"):
        await asyncio.wait_for(w.write(doc(1)), 2.0)
    assert "task record-writer failed" in caplog.text
    await asyncio.wait_for(w.write(doc(2)), 2.0)  # the loop was restarted
    assert await stored(store, 2) is not None
