"""Faults injected into the real in-memory parts, for the unit tests of the invoker's modules.

The parts themselves are the ones the embedded mode and the simulator run (the simulated
container backend, the in-memory bus's producer, the embedded store); these thin layers only
make one of them fail on demand, so a test can drive a module down an error path without
Kafka, CouchDB or a container engine, and a failure names the module under test.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from containers.backend import ContainerSpec, HttpResult, LogLine
from containers.simulated import SimulatedBackend, SimulatedContainer
from whisk.bus.base import BusUnavailable
from whisk.bus.memory import MemoryProducer
from whisk.clock import VirtualTimeLoop
from whisk.store import StoreError, StoreUnavailable, WriteResult
from whisk.store.embedded import EmbeddedStore

T = TypeVar("T")


def virtual(main: Callable[[asyncio.AbstractEventLoop], Coroutine[Any, Any, T]]) -> T:
    """Run ``main(loop)`` on a fresh virtual-time loop: sleeps and timeouts cost nothing."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main(loop))
    finally:
        loop.close()


# -- containers ------------------------------------------------------------------------------


@dataclass
class Faults:
    """What the containers of a :class:`FaultyBackend` do wrong (nothing by default)."""

    create_error: BaseException | None = None
    init_answer: HttpResult | None = None  # /init answers this instead of 200
    init_s: float = 0.0  # /init takes this long (bounded by its timeout)
    init_error: BaseException | None = None
    run_answer: HttpResult | None = None  # /run answers this after its simulated work
    run_error: BaseException | None = None  # raised after ``error_after_s`` of /run
    error_after_s: float = 0.0
    oom: bool = False
    logs: list[LogLine] = field(default_factory=list)
    logs_complete: bool = True
    logs_s: float = 0.0  # reading the logs takes this long
    pause_error: BaseException | None = None


class FaultyContainer(SimulatedContainer):
    def __init__(self, backend: FaultyBackend, spec: ContainerSpec) -> None:
        super().__init__(backend, spec)
        self.faults = backend.faults
        self.spec = spec
        self.inits = 0
        self.runs = 0
        self.cores: list[frozenset[int]] = []
        self.paused = False
        self.pauses = 0
        self.resumes = 0
        self.destroyed = 0

    async def init(self, body: bytes, timeout_s: float) -> HttpResult:
        self.inits += 1
        f = self.faults
        async with asyncio.timeout(timeout_s):
            if f.init_s:
                await asyncio.sleep(f.init_s)
            if f.init_error is not None:
                raise f.init_error
        return f.init_answer or await super().init(body, timeout_s)

    async def run(self, body: bytes, timeout_s: float) -> HttpResult:
        self.runs += 1
        f = self.faults
        if f.run_error is not None:
            async with asyncio.timeout(timeout_s):
                await asyncio.sleep(f.error_after_s)
            raise f.run_error
        answer = await super().run(body, timeout_s)
        return f.run_answer or answer

    async def assign_cores(self, cores: frozenset[int]) -> None:
        self.cores.append(cores)
        await super().assign_cores(cores)

    async def read_logs(
        self, limit_bytes: int, wait_for_sentinels: bool
    ) -> tuple[list[LogLine], bool]:
        if self.faults.logs_s:
            await asyncio.sleep(self.faults.logs_s)
        return list(self.faults.logs), self.faults.logs_complete

    async def was_oom_killed(self) -> bool:
        return self.faults.oom

    async def pause(self) -> None:
        if self.faults.pause_error is not None:
            raise self.faults.pause_error
        self.pauses += 1
        self.paused = True

    async def resume(self) -> None:
        self.resumes += 1
        self.paused = False

    async def destroy(self) -> None:
        self.destroyed += 1
        if self.destroyed == 1:
            await super().destroy()


class FaultyBackend(SimulatedBackend):
    """The simulated backend, whose containers fail as :attr:`faults` says; it keeps every
    container it made in :attr:`containers`."""

    def __init__(self, cold_start_s: float = 0.0, init_s: float = 0.0) -> None:
        super().__init__(cold_start_s=cold_start_s, init_s=init_s)
        self.faults = Faults()
        self.containers: list[FaultyContainer] = []
        self.specs: list[ContainerSpec] = []

    async def create(self, spec: ContainerSpec) -> FaultyContainer:
        self.specs.append(spec)
        if self.cold_start_s:
            await asyncio.sleep(self.cold_start_s)
        if self.faults.create_error is not None:
            raise self.faults.create_error
        self.created += 1
        self.live += 1
        container = FaultyContainer(self, spec)
        self.containers.append(container)
        return container


# -- bus -------------------------------------------------------------------------------------


class FlakyProducer:
    """A producer of the in-memory bus whose next :attr:`failures` sends raise
    :class:`BusUnavailable`; every attempt is counted, every delivery kept in :attr:`sent`."""

    def __init__(self, inner: MemoryProducer, failures: int = 0) -> None:
        self.inner = inner
        self.failures = failures
        self.attempts = 0
        self.sent: list[tuple[str, bytes]] = []

    async def start(self) -> None:
        await self.inner.start()

    async def send(self, topic: str, value: bytes) -> None:
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            raise BusUnavailable("broker unreachable (injected)")
        await self.inner.send(topic, value)
        self.sent.append((topic, value))

    async def stop(self) -> None:
        await self.inner.stop()


# -- store -----------------------------------------------------------------------------------


class FlakyStore:
    """The embedded store, unreachable while :attr:`down`, refusing requests while
    :attr:`refuse`; counts calls by method, and ``get`` may be held at :attr:`gate`."""

    def __init__(self, inner: EmbeddedStore) -> None:
        self.inner = inner
        self.down = False
        self.refuse = False
        self.broken: BaseException | None = None  # raised once by the next bulk
        self.attachments_down = False
        self.gate: asyncio.Event | None = None
        self.calls: Counter[str] = Counter()
        self.bulks: list[list[str]] = []  # the ids of each bulk that reached the store

    def _check(self, method: str) -> None:
        self.calls[method] += 1
        if self.down:
            raise StoreUnavailable("connection refused (injected)")
        if self.refuse:
            raise StoreError("500 internal server error (injected)")

    async def ensure_db(self, db: str) -> None:
        self._check("ensure_db")
        await self.inner.ensure_db(db)

    async def get(self, db: str, docid: str) -> dict[str, Any] | None:
        self._check("get")
        if self.gate is not None:
            await self.gate.wait()
        return await self.inner.get(db, docid)

    async def get_attachment(self, db: str, docid: str, name: str) -> bytes | None:
        self._check("get_attachment")
        if self.attachments_down:
            raise StoreUnavailable("attachment read timed out (injected)")
        return await self.inner.get_attachment(db, docid, name)

    async def put(self, db: str, doc: dict[str, Any]) -> str:
        self._check("put")
        return await self.inner.put(db, doc)

    async def put_attachment(
        self, db: str, docid: str, rev: str, name: str, data: bytes, content_type: str
    ) -> str:
        self._check("put_attachment")
        return await self.inner.put_attachment(db, docid, rev, name, data, content_type)

    async def bulk(self, db: str, docs: list[dict[str, Any]]) -> list[WriteResult]:
        self._check("bulk")
        if self.broken is not None:
            e, self.broken = self.broken, None
            raise e
        self.bulks.append([d["_id"] for d in docs])
        return await self.inner.bulk(db, docs)

    async def delete(self, db: str, docid: str, rev: str) -> None:
        self._check("delete")
        await self.inner.delete(db, docid, rev)

    async def find(self, db: str, selector: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
        self._check("find")
        return await self.inner.find(db, selector, **kwargs)

    async def close(self) -> None:
        await self.inner.close()
