"""The one owner of background tasks, so that none can end silently.

A node that stops working while it still pings ``health`` is the worst failure an OpenWhisk
operator meets: the controller keeps routing calls to it. So every long-lived loop runs under
a :class:`Supervisor`, which logs a failure with its traceback and restarts the loop with
back-off; a loop that keeps failing (``max_failures`` within ``window_s``) marks the node
*failed*: it stops pinging and ``ow-invoker run`` exits non-zero, for systemd or Kubernetes
to restart it. Short-lived tasks go through :meth:`Supervisor.spawn` (or :func:`spawn` where
no supervisor is at hand), which logs any exception they end with.

This is the only module that creates tasks (ruff ``TID251`` bans ``asyncio.create_task`` and
``asyncio.ensure_future`` elsewhere; ``tests/unit/whisk/test_supervisor.py`` scans for
``loop.create_task``). Pure asyncio; failures are counted on the injected clock, back-off
sleeps follow the loop's time, so a virtual-time loop drives it in tests.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from whisk.clock import Clock

log = logging.getLogger(__name__)
T = TypeVar("T")

_detached: set[asyncio.Task[Any]] = set()


def _log_failure(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("task %s failed", task.get_name(), exc_info=exc)


def _detached_ended(task: asyncio.Task[Any]) -> None:
    _detached.discard(task)
    _log_failure(task)


def spawn(coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """A fire-and-forget task of an object that has no supervisor: kept referenced until it
    ends (the loop holds tasks only weakly) and any exception it ends with is logged."""
    task = asyncio.create_task(coro, name=name)
    _detached.add(task)
    task.add_done_callback(_detached_ended)  # one callback (one loop step) for both
    return task


def child(coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """A helper task that its creator awaits or cancels before it returns (a race between
    two operations, a send overlapped with other work): its outcome reaches the creator, so
    nothing is logged here. Made here only so that task creation stays in one module."""
    return asyncio.create_task(coro, name=name)


@dataclass
class _Loop:
    name: str
    factory: Callable[[], Coroutine[Any, Any, None]]
    critical: bool
    task: asyncio.Task[None] | None = None
    running: bool = False  # False while waiting to be restarted
    restarts: int = 0
    failures: deque[float] = field(default_factory=deque)


class Supervisor:
    """Starts named long-lived loops and restarts them when they fail; spawns short tasks.

    ``on_failure`` callbacks run once when the node is declared failed. A loop that returns
    counts as a failure too: these loops are meant to run until they are stopped."""

    def __init__(
        self,
        clock: Clock,
        *,
        max_failures: int = 3,
        window_s: float = 30.0,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        self.clock = clock
        self.max_failures = max_failures
        self.window_s = window_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.failure: str | None = None
        self.on_failure: list[Callable[[str], None]] = []
        self._loops: dict[str, _Loop] = {}
        self._spawned: set[asyncio.Task[Any]] = set()
        self._failed = asyncio.Event()

    # -- long-lived loops --

    def start(
        self, name: str, factory: Callable[[], Coroutine[Any, Any, None]], *, critical: bool = True
    ) -> None:
        """Run ``factory()`` until stopped, restarting it after a failure. A failing
        ``critical`` loop makes :attr:`alive` False until it runs again."""
        old = self._loops.get(name)
        if old is not None and old.task is not None and not old.task.done():
            raise ValueError(f"a task named {name!r} is already running")
        loop = _Loop(name, factory, critical, running=True)  # from now on, not when scheduled
        self._loops[name] = loop
        loop.task = asyncio.create_task(self._keep(loop), name=name)

    async def stop(self, *names: str) -> None:
        """Cancel the named loops and wait for them to end."""
        tasks = []
        for name in names:
            loop = self._loops.pop(name, None)
            if loop is not None and loop.task is not None:
                loop.task.cancel()
                tasks.append(loop.task)
        await asyncio.gather(*tasks, return_exceptions=True)

    def running(self, name: str) -> bool:
        loop = self._loops.get(name)
        return loop is not None and loop.running

    @property
    def alive(self) -> bool:
        """Not failed, and every critical loop is running (not waiting for a restart)."""
        return self.failure is None and all(
            loop.running for loop in self._loops.values() if loop.critical
        )

    def problem(self) -> str | None:
        """Why the node cannot work because of its tasks, or None."""
        if self.failure is not None:
            return self.failure
        down = [n for n, loop in self._loops.items() if loop.critical and not loop.running]
        return f"restarting {', '.join(down)}" if down else None

    async def wait_failed(self) -> str:
        """Wait until the node is declared failed; returns why."""
        await self._failed.wait()
        assert self.failure is not None
        return self.failure

    def status(self) -> dict[str, Any]:
        return {
            "failure": self.failure,
            "tasks": {
                n: {"running": loop.running, "restarts": loop.restarts, "critical": loop.critical}
                for n, loop in self._loops.items()
            },
            "spawned": len(self._spawned),
        }

    async def _keep(self, loop: _Loop) -> None:
        backoff = self.backoff_s
        while True:
            started = self.clock.now()
            loop.running = True
            try:
                await loop.factory()
                log.error("task %s ended; it should run until stopped", loop.name)
            except asyncio.CancelledError:
                loop.running = False
                raise
            except Exception:
                log.exception("task %s failed", loop.name)
            loop.running = False
            now = self.clock.now()
            if now - started > self.window_s:
                backoff = self.backoff_s  # it ran well for a while: start the back-off over
            loop.failures.append(now)
            while loop.failures and now - loop.failures[0] > self.window_s:
                loop.failures.popleft()
            if len(loop.failures) >= self.max_failures:
                self._fail(
                    f"task {loop.name} failed {len(loop.failures)} times within {self.window_s:g} s"
                )
                return
            log.warning("restarting task %s in %.1f s", loop.name, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff_s)
            loop.restarts += 1

    def _fail(self, reason: str) -> None:
        if self.failure is not None:
            return
        self.failure = reason
        log.critical("node failed: %s", reason)
        self._failed.set()
        for callback in self.on_failure:
            try:
                callback(reason)
            except Exception:
                log.exception("failure callback raised")

    # -- short-lived tasks --

    def spawn(
        self,
        coro: Coroutine[Any, Any, T],
        *,
        name: str | None = None,
        track: set[asyncio.Task[Any]] | None = None,
    ) -> asyncio.Task[T]:
        """A short task owned here: listed in :attr:`spawned` (and in ``track``, the
        caller's own set, if given) until it ends, and logged with its traceback if it
        ends with an exception. One done callback does all three, so a task's end costs
        one step of the loop, not one per set (the simulator runs millions of tasks)."""
        task = asyncio.create_task(coro, name=name)
        spawned = self._spawned
        spawned.add(task)
        if track is not None:
            track.add(task)

        def ended(t: asyncio.Task[Any]) -> None:
            spawned.discard(t)
            if track is not None:
                track.discard(t)
            _log_failure(t)

        task.add_done_callback(ended)
        return task

    @property
    def spawned(self) -> set[asyncio.Task[Any]]:
        return self._spawned

    async def close(self) -> None:
        """Cancel every loop and short task, and wait for them."""
        await self.stop(*list(self._loops))
        tasks = list(self._spawned)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def first_failure(*supervisors: Supervisor) -> str:
    """Wait until any of these supervisors declares its node failed; returns why."""
    waits = [child(s.wait_failed()) for s in supervisors]
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        return next(iter(done)).result()
    finally:
        for w in waits:
            w.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
