"""The asyncio driver of kTasks in the live pool: the queue's decisions, sent to the workers.

``KaasDriver`` owns the data layer, the constant cache and the :class:`KTaskQueue`. ``run``
submits a kTask and waits for its result; ``pump`` (after a submit, a put, a finished call or
an input deadline) asks the queue what to start and stages each start at once (its inputs
pinned at the versions placement saw, outputs staged, in decision order). Each device then
takes its calls one after another in that order: when a call's turn comes, its constants are
admitted on the device's cache (pinned, LRU victims evicted) and its header goes to that
device's worker through ``send`` with no await in between, so the cache and the worker agree
(``gpu.kaas.calls``). Admitting at the turn, not at placement, means the kTasks queued on a
device hold no constant memory: closed-loop clients whose constants together exceed a device's
budget evict one another by LRU instead of being refused, as the simulator's devices do
(``gpu.kaas.simulated``). A failure of the request is a :class:`KTaskError`; a failure of the
worker or the pool (a crash, the pool stopping) is a :class:`WorkerError`. Either way every
pin is released.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpu.kaas.calls import (
    KTaskCall,
    RunResult,
    WorkerError,
    abandon,
    admit_constants,
    finish,
    stage,
)
from gpu.kaas.constants import ConstantCache
from gpu.kaas.format import KTask
from gpu.kaas.ktask_queue import KDevice, KTaskQueue, Refuse, Start
from gpu.kaas.spec import KTaskError
from gpu.kaas.store import DataStore
from gpu.kaas.values import to_json
from whisk.clock import Clock
from whisk.supervisor import spawn

Send = Callable[[int, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Send one header to a device's worker, return its reply (``KaasWorker.handle``'s)."""


@dataclass
class Done:
    result: RunResult
    device: int
    waited_s: float  # in the queue: inputs, and the device's earlier kTasks
    values: dict[str, Any] = field(default_factory=dict)  # fetched outputs, as JSON

    def reply(self) -> dict[str, Any]:
        """The activation's result: outputs by key and version, the run's figures."""
        r = self.result
        out: dict[str, Any] = {
            "outputs": r.reply(),
            "device": self.device,
            "seconds": round(r.seconds, 6),
            "waited_s": round(self.waited_s, 6),
            "constants": {"hits": r.constant_hits, "misses": r.constant_misses},
        }
        if self.values:
            out["values"] = self.values
        return out


@dataclass
class _Pending:
    future: asyncio.Future[Done]
    fetch: tuple[str, ...]


class KaasDriver:
    def __init__(
        self,
        devices: Sequence[KDevice],
        store: DataStore,
        constants: ConstantCache,
        send: Send,
        clock: Clock,
        *,
        copy_bytes_per_s: float,
        input_timeout_s: float = 60.0,
    ) -> None:
        self.store = store
        self.constants = constants
        self.send = send
        self.clock = clock
        self.queue = KTaskQueue(
            devices,
            clock,
            holders=constants.holders,
            versions=self._version,
            copy_bytes_per_s=copy_bytes_per_s,
            input_timeout_s=input_timeout_s,
        )
        self._pending: dict[int, _Pending] = {}
        self._tails: dict[int, asyncio.Future[None]] = {}  # device -> its last call's end
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.runs = 0
        self.failures = 0

    def _version(self, key: str) -> int | None:
        o = self.store.get(key)
        return None if o is None else o.version

    async def run(
        self,
        task: KTask,
        client: str = "",
        *,
        fetch: Sequence[str] = (),
        input_timeout_s: float | None = None,
    ) -> Done:
        if self._closed:
            raise WorkerError("the GPU pool is stopped")
        fut: asyncio.Future[Done] = asyncio.get_running_loop().create_future()
        id = self.queue.submit(task, client, input_timeout_s)
        self._pending[id] = _Pending(fut, tuple(fetch))
        self.pump()
        return await fut

    def pump(self) -> None:
        """Start what the queue decides now; look again at the next input deadline."""
        if self._closed:
            return
        for d in self.queue.schedule():
            p = self._pending.pop(d.id, None)
            if isinstance(d, Refuse):
                self._fail(p, KTaskError(d.error))
                continue
            try:
                call = stage(d.task, d.device, self.store)
            except KTaskError as e:
                self.queue.complete(d.id, 0.0)
                self._fail(p, e)
                continue
            prev = self._tails.get(d.device)
            mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._tails[d.device] = mine
            task = spawn(self._execute(d, call, p, prev, mine), name="kaas-call")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = self.queue.next_deadline()
        if due is not None:
            delay = max(0.0, due - self.clock.now()) + 0.001
            self._timer = asyncio.get_running_loop().call_later(delay, self.pump)

    async def _execute(
        self,
        d: Start,
        call: KTaskCall,
        p: _Pending | None,
        prev: asyncio.Future[None] | None,
        mine: asyncio.Future[None],
    ) -> None:
        decided = self.clock.now()
        try:
            if prev is not None:
                try:
                    await asyncio.shield(prev)
                except asyncio.CancelledError:  # never sent: take the call back
                    abandon(call, self.store, self.constants)
                    self.queue.complete(d.id, 0.0)
                    self._fail(p, WorkerError("the GPU pool stopped"))
                    raise
            try:  # the device's turn: its constants now, the worker next (no await between)
                admit_constants(call, self.constants)
            except Exception as e:  # beyond what the device can hold, even with evictions
                abandon(call, self.store, self.constants)
                self.queue.complete(d.id, 0.0)
                err = e if isinstance(e, KTaskError) else WorkerError(f"{type(e).__name__}: {e}")
                self._fail(p, err)
                return
            t0 = self.clock.now()
            waited = d.waited_s + (t0 - decided)
            try:
                reply = await self.send(d.device, call.header)
            except asyncio.CancelledError:
                closed = {"error": "PoolClosed", "message": "the GPU pool stopped", "resident": []}
                self._fail(p, self._finish(d, call, p, closed, t0, waited))
                raise
            except Exception as e:  # the worker died, or the pool is stopping
                reply = {"error": type(e).__name__, "message": str(e), "resident": []}
            error = self._finish(d, call, p, reply, t0, waited)
            if error is not None:
                self._fail(p, error)
        finally:
            if not mine.done():
                mine.set_result(None)
            if self._tails.get(d.device) is mine:
                del self._tails[d.device]
            self.pump()

    def _finish(
        self,
        d: Start,
        call: KTaskCall,
        p: _Pending | None,
        reply: dict[str, Any],
        t0: float,
        waited_s: float,
    ) -> BaseException | None:
        """Take the worker's reply: the result to the waiting caller, or the error returned."""
        seconds = self.clock.now() - t0
        self.queue.complete(d.id, seconds)
        try:
            result = finish(call, reply, self.store, self.constants)
        except (KTaskError, WorkerError) as e:
            self.failures += 1
            return e
        self.runs += 1
        values = {}
        if p is not None:  # read now: a later version of the key could replace the file
            for name in p.fetch:
                o = result.outputs[name]
                with contextlib.suppress(OSError):
                    values[name] = to_json(o.path.read_bytes(), o.spec)
        if p is not None and not p.future.done():
            p.future.set_result(Done(result, d.device, waited_s, values))
        return None

    def _fail(self, p: _Pending | None, e: BaseException | None) -> None:
        if e is not None and p is not None and not p.future.done():
            p.future.set_exception(e)

    async def close(self) -> None:
        """Fail waiting kTasks, cancel the calls in flight (their pins are released)."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for p in self._pending.values():
            self._fail(p, WorkerError("the GPU pool stopped"))
        self._pending.clear()
