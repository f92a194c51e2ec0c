"""A simulated container backend for the discrete-event simulator.

Only this leaf is swapped: the pool, the scheduler and the invoker run unchanged on a
virtual-time event loop. A call's one-core service time travels in its parameters
(``SIM_DURATION``); the simulated CPU runs it by processor sharing: calls pinned to a
core of their own run at full speed, calls that share the action cores (the ``openwhisk``
baseline) each get ``min(1, cores / running)`` of a core.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass

from containers.backend import ContainerSpec, HttpResult, LogLine
from invoker.protocol.json import loads

SIM_DURATION = "__sim_duration_s"


@dataclass(slots=True)
class _Job:
    remaining: float
    group: frozenset[int]
    done: asyncio.Future[None]


class SimulatedCpu:
    """Processor sharing within each group of cores (groups are assumed not to overlap)."""

    def __init__(self) -> None:
        self._jobs: dict[int, _Job] = {}
        self._ids = itertools.count()
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.busy_core_seconds = 0.0

    def _rates(self) -> dict[int, float]:
        per_group: dict[frozenset[int], int] = {}
        for job in self._jobs.values():
            per_group[job.group] = per_group.get(job.group, 0) + 1
        return {
            jid: min(1.0, len(job.group) / per_group[job.group]) for jid, job in self._jobs.items()
        }

    def _advance(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        elapsed, self._last = now - self._last, now
        if elapsed <= 0:
            return
        for jid, rate in self._rates().items():
            self._jobs[jid].remaining -= elapsed * rate
            self.busy_core_seconds += elapsed * rate

    def _reschedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for jid in [j for j, job in self._jobs.items() if job.remaining <= 1e-12]:
            self._jobs.pop(jid).done.set_result(None)
        if not self._jobs:
            return
        rates = self._rates()
        delay = min(self._jobs[j].remaining / r for j, r in rates.items())
        self._timer = loop.call_at(loop.time() + delay, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._advance(loop)
        self._reschedule(loop)

    async def run(self, work_s: float, cores: frozenset[int]) -> None:
        loop = asyncio.get_running_loop()
        self._advance(loop)
        done = loop.create_future()
        jid = next(self._ids)
        self._jobs[jid] = _Job(max(0.0, work_s), cores, done)
        self._reschedule(loop)
        try:
            await done
        finally:
            if jid in self._jobs:  # cancelled (timeout): stop charging the CPU for it
                self._advance(loop)
                del self._jobs[jid]
                self._reschedule(loop)


class SimulatedContainer:
    def __init__(self, backend: SimulatedBackend, spec: ContainerSpec) -> None:
        self.name = spec.name
        self._backend = backend
        self._cores: frozenset[int] = frozenset({0})

    async def init(self, body: bytes, timeout_s: float) -> HttpResult:
        if self._backend.init_s:
            await asyncio.sleep(self._backend.init_s)
        return HttpResult(200, b'{"ok":true}', self._backend.init_s)

    async def run(self, body: bytes, timeout_s: float) -> HttpResult:
        value = loads(body).get("value") or {}
        work = float(value.get(SIM_DURATION, 0.0)) if isinstance(value, dict) else 0.0
        async with asyncio.timeout(timeout_s):
            await self._backend.cpu.run(work, self._cores)
        return HttpResult(200, b'{"ok":true}', work)

    async def assign_cores(self, cores: frozenset[int]) -> None:
        self._cores = cores

    async def read_logs(
        self, limit_bytes: int, wait_for_sentinels: bool
    ) -> tuple[list[LogLine], bool]:
        return [], True

    async def pause(self) -> None:
        pass

    async def resume(self) -> None:
        pass

    async def was_oom_killed(self) -> bool:
        return False

    async def destroy(self) -> None:
        self._backend.live -= 1


class SimulatedBackend:
    """Containers cost ``cold_start_s`` to create and ``init_s`` to initialise."""

    name = "simulated"

    def __init__(self, cold_start_s: float = 0.0, init_s: float = 0.0) -> None:
        self.cold_start_s = cold_start_s
        self.init_s = init_s
        self.cpu = SimulatedCpu()
        self.created = 0
        self.live = 0

    def supports(self, kind: str) -> bool:
        return True

    async def start(self) -> None:
        pass

    async def create(self, spec: ContainerSpec) -> SimulatedContainer:
        if self.cold_start_s:
            await asyncio.sleep(self.cold_start_s)
        self.created += 1
        self.live += 1
        return SimulatedContainer(self, spec)

    async def remove_leftovers(self) -> int:
        return 0

    async def close(self) -> None:
        pass
