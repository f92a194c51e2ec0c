"""kTasks on a virtual clock: the production queue, placement and constant cache, timed devices.

The simulator's counterpart of :class:`gpu.kaas.driver.KaasDriver`, as ``SimBackend`` is the
model pool's: :class:`KTaskQueue` (placement included) decides, :class:`ConstantCache` keeps
each device's constants (LRU, pins, hits/misses/evictions), and only the device is a stand-in.
A device runs its started kTasks one at a time in the order placed; a run takes the copy of
the constants not resident on it (bytes ÷ ``copy_bytes_per_s``, the host tier's copy model)
plus ``kernel_s``. The data layer is its versions alone (a put bumps a key's version).

As in the live driver, a run admits (and pins) its constants when its device starts it, as
the KaaS paper's executor loads them, not when it is placed: kTasks queued on a device hold
no room, so a working set beyond a device's budget is evicted by LRU, not refused.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from gpu.kaas.constants import ConstantCache
from gpu.kaas.format import KTask
from gpu.kaas.ktask_queue import KDevice, KTaskQueue, Refuse, Start
from gpu.kaas.placement import requirements
from gpu.kaas.spec import KTaskError
from whisk.clock import Clock
from whisk.supervisor import spawn


@dataclass(frozen=True)
class SimRun:
    """One finished kTask: where, when, and what its constants cost."""

    device: int
    submitted: float
    started: float  # its device began it (copy first)
    finished: float
    copy_s: float
    hits: int
    misses: int


class SimKaas:
    def __init__(
        self,
        devices: int,
        constant_budget: int,
        clock: Clock,
        *,
        kernel_s: float,
        copy_bytes_per_s: float,
    ) -> None:
        self.clock = clock
        self.kernel_s = kernel_s
        self.copy_bytes_per_s = copy_bytes_per_s
        self.constants = ConstantCache([constant_budget] * devices, clock=clock)
        self.versions: dict[str, int] = {}
        self.queue = KTaskQueue(
            [KDevice(i, constant_budget) for i in range(devices)],
            clock,
            holders=self.constants.holders,
            versions=self.versions.get,
            copy_bytes_per_s=copy_bytes_per_s,
        )
        self._fifo: list[deque[Start]] = [deque() for _ in range(devices)]
        self._busy = [False] * devices
        self._pending: dict[int, tuple[asyncio.Future[SimRun], float]] = {}
        self.failures = 0

    def put(self, key: str) -> None:
        """A new version of ``key`` in the data layer (a waiting kTask may now be ready)."""
        self.versions[key] = self.versions.get(key, 0) + 1
        self.pump()

    async def run(self, task: KTask, client: str = "") -> SimRun:
        fut: asyncio.Future[SimRun] = asyncio.get_running_loop().create_future()
        id = self.queue.submit(task, client)
        self._pending[id] = (fut, self.clock.now())
        self.pump()
        return await fut

    def pump(self) -> None:
        """Hand the queue's starts to their devices' FIFOs (refusals fail their callers)."""
        for d in self.queue.schedule():
            if isinstance(d, Refuse):
                self._fail(d.id, KTaskError(d.error))
                continue
            self._fifo[d.device].append(d)
            if not self._busy[d.device]:
                self._busy[d.device] = True
                spawn(self._drain(d.device), name=f"sim-kaas-{d.device}")

    async def _drain(self, device: int) -> None:
        try:
            while self._fifo[device]:
                await self._execute(self._fifo[device].popleft())
        finally:
            self._busy[device] = False

    async def _execute(self, d: Start) -> None:
        t0 = self.clock.now()
        needs, _ = requirements(d.task, self.versions.get)
        pinned: list[tuple[str, int, bool]] = []  # key, version, hit
        try:
            for n in {(n.key, n.version): n for n in needs}.values():
                adm = self.constants.admit(d.device, n.key, n.version, n.nbytes)
                pinned.append((n.key, n.version, adm.hit))
        except KTaskError as e:  # pinned constants leave no room (never with one run a device)
            for key, version, hit in pinned:
                if hit:
                    self.constants.release(d.device, key, version)
                else:  # admitted, never copied
                    self.constants.forget(d.device, key, version)
            self.queue.complete(d.id, 0.0)
            self._fail(d.id, e)
            self.pump()
            return
        missing = {(n.key, n.version): n.nbytes for n in needs}
        copy_bytes = sum(missing[(k, v)] for k, v, hit in pinned if not hit)
        copy_s = copy_bytes / self.copy_bytes_per_s
        await asyncio.sleep(copy_s + self.kernel_s)
        for key, version, _ in pinned:
            self.constants.release(d.device, key, version)
        end = self.clock.now()
        self.queue.complete(d.id, end - t0)
        hits = sum(hit for _, _, hit in pinned)
        fut, submitted = self._pending.pop(d.id)
        if not fut.done():
            fut.set_result(SimRun(d.device, submitted, t0, end, copy_s, hits, len(pinned) - hits))
        self.pump()

    def _fail(self, id: int, e: BaseException) -> None:
        self.failures += 1
        fut, _ = self._pending.pop(id)
        if not fut.done():
            fut.set_exception(e)
