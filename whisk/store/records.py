"""Writing activation records: batched, and kept on disk while the database is away.

``write`` returns once a record is durable — in the database, or appended (fsync'd) to the
local spool. The spool is replayed in order when the database answers again and is bounded:
when it is full, ``write`` waits, which holds the activation's offset uncommitted and, through
the feed's pending limit, pauses consumption. A 409 conflict means the record is already
stored (a re-delivered activation) and counts as written.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from pathlib import Path
from typing import Any

from whisk.clock import Clock
from whisk.protocol.json import dumps, loads
from whisk.store import Store, StoreError, StoreUnavailable
from whisk.supervisor import Supervisor

log = logging.getLogger(__name__)


def _expire(arrival: asyncio.Future[None]) -> None:
    if not arrival.done():
        arrival.set_result(None)


class RecordWriter:
    def __init__(
        self,
        store: Store,
        db: str,
        spool_dir: str | Path,
        clock: Clock,
        spool_limit_bytes: int = 512 * 1024 * 1024,
        batch_max: int = 256,
        retry_s: float = 1.0,
        linger_s: float = 0.02,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.store = store
        self.supervisor = supervisor or Supervisor(clock)
        self.db = db
        self.clock = clock
        self.spool_path = Path(spool_dir) / f"{db}.spool.jsonl"
        self.spool_limit_bytes = spool_limit_bytes
        self.batch_max = batch_max
        self.retry_s = retry_s
        # Records are not waited on (the acks went first): lingering a little makes the
        # database's batches, and so its work per record, several times smaller.
        self.linger_s = linger_s
        # Records to write, and the writing loop's wait for the next (set by ``write``).
        # Not an asyncio.Queue: waiting for a record with a time limit (the linger) was a
        # task, a timer and a cancellation per record (millions in a simulated day).
        self._queue: deque[tuple[dict[str, Any], asyncio.Future[None]]] = deque()
        self._arrival: asyncio.Future[None] | None = None
        self._unflushed = 0  # queued or being written
        self._flushed: asyncio.Future[None] | None = None  # close() waits for 0
        self._spooled_ids: set[str] = set()
        self._spool_bytes = 0
        self._down_until = float("-inf")
        self._started = False
        self.written = 0
        self.spooled = 0

    @property
    def spooled_now(self) -> int:
        return len(self._spooled_ids)

    def is_spooled(self, docid: str) -> bool:
        return docid in self._spooled_ids

    async def start(self) -> None:
        self.spool_path.parent.mkdir(parents=True, exist_ok=True)
        if self.spool_path.exists():
            for doc in self._read_spool():
                self._spooled_ids.add(doc["_id"])
            self._spool_bytes = self.spool_path.stat().st_size
            if self._spooled_ids:
                log.info("%d activation records wait in the spool", len(self._spooled_ids))
        self.supervisor.start("record-writer", self._run)
        self._started = True

    async def write(self, doc: dict[str, Any]) -> None:
        await self.submit(doc)

    def submit(self, doc: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a record; the future is done once it is durable (``write`` awaits it).
        For a caller with something else to await meanwhile, without a task."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((doc, fut))
        self._unflushed += 1
        arrival = self._arrival
        if arrival is not None and not arrival.done():
            arrival.set_result(None)
        return fut

    async def close(self, timeout_s: float = 10.0) -> None:
        """Flush what is queued (to the database or the spool), then stop."""
        if not self._started:
            return
        try:
            async with asyncio.timeout(timeout_s):
                while self._unflushed:
                    self._flushed = asyncio.get_running_loop().create_future()
                    await self._flushed
        except TimeoutError:
            log.warning("record writer closed with %d records unflushed", len(self._queue))
        finally:
            self._flushed = None
        await self.supervisor.stop("record-writer")
        self._started = False

    # -- internals --

    async def _arrived(self, timeout_s: float | None) -> bool:
        """Whether a record waits, waiting up to ``timeout_s`` (None: as long as it takes)."""
        if self._queue:
            return True
        loop = asyncio.get_running_loop()
        self._arrival = arrival = loop.create_future()
        timer = None if timeout_s is None else loop.call_later(timeout_s, _expire, arrival)
        try:
            await arrival
        finally:
            self._arrival = None
            if timer is not None:
                timer.cancel()
        return bool(self._queue)

    async def _run(self) -> None:
        queue = self._queue
        while True:
            if self._spooled_ids:
                if not await self._arrived(self.retry_s):
                    await self._replay()
                    continue
            else:
                while not await self._arrived(None):
                    pass
            batch = [queue.popleft()]
            deadline = self.clock.now() + self.linger_s
            while len(batch) < self.batch_max:
                if not queue:
                    wait = deadline - self.clock.now()
                    if wait <= 0 or not await self._arrived(wait):
                        break
                batch.append(queue.popleft())
            try:
                await self._flush(batch)
            except Exception as e:  # its writers must not wait forever; the task restarts
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)
                raise
            finally:
                self._unflushed -= len(batch)
                if not self._unflushed and self._flushed is not None and not self._flushed.done():
                    self._flushed.set_result(None)

    async def _flush(self, batch: list[tuple[dict[str, Any], asyncio.Future[None]]]) -> None:
        docs = [d for d, _ in batch]
        if self._spooled_ids:
            await self._replay()
        stored = False
        if not self._spooled_ids and self.clock.now() >= self._down_until:
            stored = await self._store(docs)
        if not stored:
            await self._spool(docs)
        for _, fut in batch:
            if not fut.done():
                fut.set_result(None)

    async def _store(self, docs: list[dict[str, Any]]) -> bool:
        try:
            results = await self.store.bulk(self.db, docs)
        except StoreUnavailable as e:
            log.warning("activations database unavailable (%s); spooling records", e)
            self._down_until = self.clock.now() + self.retry_s
            return False
        except StoreError as e:
            log.error("activations database refused a batch (%s); spooling records", e)
            self._down_until = self.clock.now() + self.retry_s
            return False
        failed = [r for r in results if not r.ok and r.error != "conflict"]
        if failed:
            log.error("%d records were refused: %s", len(failed), failed[:3])
        self.written += len(results) - len(failed)
        return True

    async def _spool(self, docs: list[dict[str, Any]]) -> None:
        data = b"".join(dumps(d) + b"\n" for d in docs)
        while self._spool_bytes + len(data) > self.spool_limit_bytes:
            log.warning("record spool full (%d bytes); waiting for the database", self._spool_bytes)
            await asyncio.sleep(self.retry_s)
            await self._replay()
        await asyncio.to_thread(self._append, data)
        self._spool_bytes += len(data)
        self._spooled_ids.update(d["_id"] for d in docs)
        self.spooled += len(docs)

    def _append(self, data: bytes) -> None:
        with open(self.spool_path, "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def _read_spool(self) -> list[dict[str, Any]]:
        docs = []
        with open(self.spool_path, "rb") as f:
            for line in f:
                try:
                    docs.append(loads(line))
                except ValueError:
                    log.warning("skipping a torn line in the record spool")
        return docs

    async def _replay(self) -> None:
        """Write the spool to the database, oldest first, when it answers again."""
        if self.clock.now() < self._down_until:
            return
        docs = await asyncio.to_thread(self._read_spool)
        for i in range(0, len(docs), self.batch_max):
            if not await self._store(docs[i : i + self.batch_max]):
                rest = docs[i:]
                await asyncio.to_thread(self._rewrite, rest)
                return
        await asyncio.to_thread(self._rewrite, [])
        log.info("replayed %d spooled activation records", len(docs))

    def _rewrite(self, docs: list[dict[str, Any]]) -> None:
        tmp = self.spool_path.with_suffix(".tmp")
        data = b"".join(dumps(d) + b"\n" for d in docs)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.spool_path)
        self._spool_bytes = len(data)
        self._spooled_ids = {d["_id"] for d in docs}
