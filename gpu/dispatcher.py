"""The asyncio driver around a pure scheduler: starts dispatches on a backend, reports back.

One loop for the live pool (backend = device worker processes) and the simulator (backend =
timed sleeps on a virtual-time loop). The dispatcher owns one task per running dispatch; a
device runs one request at a time, so at most one task per device is alive.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gpu.scheduler import Dispatch, GpuScheduler, Request
from gpu.stats import PoolStats
from whisk.clock import Clock
from whisk.supervisor import spawn


class WorkerCrashed(RuntimeError):
    """The device's worker process died while serving a request."""


class ModelNotLoaded(RuntimeError):
    """A miss failed before the model reached the device (the cache must not list it)."""


class PoolClosed(RuntimeError):
    """The pool stopped before the request finished."""


@dataclass(frozen=True)
class JobResult:
    """What a backend reports for one dispatch (seconds measured on the device side)."""

    output: Any = None
    upload_s: float = 0.0  # host tier → device copy (or the whole cold start)
    infer_s: float = 0.0


@dataclass(frozen=True)
class InferenceResult:
    output: Any
    device: int
    hit: bool
    cold_start: bool
    queue_s: float
    upload_s: float
    infer_s: float
    latency_s: float


class Backend(Protocol):
    async def execute(self, dispatch: Dispatch) -> JobResult:
        """Evict ``dispatch.victims``, load the model unless hit, run the request.

        Raises WorkerCrashed if the device's worker died; any other exception is the
        request's own failure (bad input, model error) and leaves the device usable.
        """
        ...


class Dispatcher:
    def __init__(
        self,
        scheduler: GpuScheduler,
        backend: Backend,
        clock: Clock,
        *,
        stats: PoolStats | None = None,
        max_retries: int = 1,
        on_event: Callable[[str, Dispatch, JobResult | None], None] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.backend = backend
        self.clock = clock
        self.stats = stats
        self.max_retries = max_retries
        self.on_event = on_event
        self._futures: dict[Request, asyncio.Future[InferenceResult]] = {}
        self._started: dict[Request, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        if stats is not None:
            scheduler.cache.listeners.append(stats.on_residency)

    async def submit(self, req: Request) -> InferenceResult:
        """Queue a request and wait for its result (ModelTooLarge is raised at once)."""
        if self._closed:
            raise PoolClosed("the GPU pool is stopped")
        fut: asyncio.Future[InferenceResult] = asyncio.get_running_loop().create_future()
        self.scheduler.submit(req)
        self._futures[req] = fut
        self.pump()
        return await fut

    def pump(self) -> None:
        """Ask the scheduler what to start now and start it."""
        if self._closed:
            return
        for d in self.scheduler.schedule():
            now = self.clock.now()
            self._started[d.request] = now
            if self.stats is not None:
                self.stats.on_dispatch(d, now)
            if self.on_event is not None:
                self.on_event("dispatch", d, None)
            task = spawn(self._run(d), name="gpu-dispatch")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, d: Dispatch) -> None:
        req = d.request
        fut = self._futures.get(req)
        try:
            res = await self.backend.execute(d)
        except asyncio.CancelledError:
            raise
        except WorkerCrashed as e:
            self.scheduler.reset_device(d.device)
            if self.on_event is not None:
                self.on_event("crash", d, None)
            if req.attempts < self.max_retries and not self._closed:
                self.scheduler.requeue(req)
            else:
                self._fail(req, e)
            self.pump()
            return
        except Exception as e:
            self.scheduler.complete(d.device)
            if not d.hit and isinstance(e, (ModelNotLoaded, KeyError)):
                r = self.scheduler.cache.devices[d.device].get(req.model)
                if r is not None and r.pins == 0:
                    self.scheduler.cache.evict(d.device, req.model, self.clock.now())
            self._fail(req, e)
            self.pump()
            return
        self._learn(d, res)
        self.scheduler.complete(d.device)
        now = self.clock.now()
        if self.stats is not None:
            self.stats.on_finish(req, d.device, now, res.upload_s, res.infer_s)
        if self.on_event is not None:
            self.on_event("finish", d, res)
        started = self._started.pop(req, now)
        self._futures.pop(req, None)
        if fut is not None and not fut.done():
            fut.set_result(
                InferenceResult(
                    res.output,
                    d.device,
                    d.hit,
                    d.cold_start,
                    started - req.arrival,
                    res.upload_s,
                    res.infer_s,
                    now - req.arrival,
                )
            )
        self.pump()

    def _learn(self, d: Dispatch, res: JobResult) -> None:
        est = self.scheduler.estimator
        dtype = self.scheduler.slots[d.device].dtype
        req = d.request
        if d.cold_start:
            est.observe_cold_start(req.size, dtype, res.upload_s)
        elif not d.hit:
            est.observe_upload(req.size, dtype, res.upload_s)
        est.observe_infer(req.model, req.size, req.batch, dtype, res.infer_s)

    def _fail(self, req: Request, exc: BaseException) -> None:
        if self.stats is not None:
            self.stats.failures += 1
        self._started.pop(req, None)
        fut = self._futures.pop(req, None)
        if fut is not None and not fut.done():
            fut.set_exception(exc)

    async def close(self) -> None:
        """Cancel running dispatches and fail every waiting request."""
        self._closed = True
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for req in list(self._futures):
            self._fail(req, PoolClosed("the GPU pool stopped"))
