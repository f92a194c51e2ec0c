"""Time sources.

Every component that needs the time gets a :class:`Clock` injected, so the same code runs
in the live service (``SystemClock``) and in the discrete-event simulator
(``VirtualClock`` driving a :class:`VirtualTimeLoop`). This is the only module allowed to
read the system clock (ruff ``TID251`` enforces it).
"""

from __future__ import annotations

import asyncio
import heapq
import selectors
import time
from collections import Counter, deque
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    def epoch_ms(self) -> int:
        """Wall-clock milliseconds since the epoch, for records and wire formats."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def epoch_ms(self) -> int:
        return time.time_ns() // 1_000_000


class VirtualClock:
    """A clock that only moves when told to (by the simulator's event loop)."""

    def __init__(self, start: float = 0.0, epoch_ms_at_start: int = 1_700_000_000_000) -> None:
        self._t = start
        self._epoch0 = epoch_ms_at_start - int(start * 1000)

    def now(self) -> float:
        return self._t

    def epoch_ms(self) -> int:
        return self._epoch0 + round(self._t * 1000)

    def advance_to(self, t: float) -> None:
        if t > self._t:
            self._t = t


class VirtualTimeStalled(RuntimeError):
    """Virtual time stopped moving while callbacks kept running: a simulation livelock."""


class _JumpingSelector(selectors.DefaultSelector):
    """Instead of blocking for ``timeout`` seconds, jump the virtual clock forward by it.

    It is also the loop's watchdog: the loop selects once per iteration, so a run of
    ``stall_iterations`` selects at one virtual time means callbacks keep coming without
    time moving (e.g. a timer that reschedules itself at the same instant). Then it raises
    :class:`VirtualTimeStalled` naming what is ready, rather than spin for ever."""

    def __init__(self, clock: VirtualClock, stall_iterations: int) -> None:
        super().__init__()
        self._clock = clock
        self._stall_iterations = max(1, stall_iterations)
        self._seen = float("nan")
        self._same = 0
        self._registered = 0  # file objects registered (1: only the loop's wakeup pipe)
        self.loop: asyncio.AbstractEventLoop | None = None

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = super().register(fileobj, events, data)
        self._registered += 1
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        key = super().unregister(fileobj)
        self._registered -= 1
        return key

    def select(self, timeout: float | None = None):
        now = self._clock.now()
        if now == self._seen:
            self._same += 1
            if self._same >= self._stall_iterations:
                message = (
                    f"virtual time has stayed at {now!r} s for {self._same} loop iterations "
                    f"with callbacks ready: {_ready_callbacks(self.loop, now)}"
                )
                self._same = 0  # the loop may run again (to cancel what is left)
                raise VirtualTimeStalled(message)
        else:
            self._seen, self._same = now, 0
        # With nothing registered but the loop's own wakeup pipe there is nothing to poll
        # for: a thread's call_soon_threadsafe puts its callback in the ready queue before
        # it writes to the pipe, so the queue tells whether one came in since the loop
        # looked, and time does not move past it (a system call per iteration was a good
        # part of a simulation's work; the pipe's bytes, unread, are dropped when it is
        # full, as asyncio does).
        if self._registered > 1:
            ready = super().select(0)
            if ready:
                return ready
        elif timeout == 0 or (self.loop is not None and self.loop._ready):  # type: ignore[attr-defined]
            return []
        if timeout is None:
            # Nothing is scheduled and nothing can wake us: a simulation deadlock.
            raise RuntimeError("virtual-time loop is idle with no timer pending (deadlock)")
        if timeout > 0:
            self._clock.advance_to(self._clock.now() + timeout)
        return []


def _ready_callbacks(loop: asyncio.AbstractEventLoop | None, now: float, most: int = 5) -> str:
    """The callbacks ready to run and the timers due at ``now``, most frequent first."""
    if loop is None:
        return "(unknown)"
    handles = list(getattr(loop, "_ready", ()))
    handles += [h for when, h in getattr(loop, "_timers", ()) if when <= now]
    counts = Counter(_describe(h) for h in handles if not h.cancelled())
    if not counts:
        return "(none)"
    return "; ".join(f"{n} x {name}" for name, n in counts.most_common(most))


def _describe(handle: asyncio.Handle) -> str:
    callback = getattr(handle, "_callback", None)
    target = getattr(callback, "__self__", None)
    if isinstance(target, asyncio.Task):  # a task's step: name its coroutine
        coro = target.get_coro()
        return getattr(coro, "__qualname__", repr(coro))
    return getattr(callback, "__qualname__", repr(callback))


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose time is virtual and jumps to the next timer when idle.

    Production coroutines that ``await asyncio.sleep(...)`` or use ``asyncio.timeout`` become
    discrete events, so the simulator needs no second copy of the scheduling logic.
    ``stall_iterations``: how many loop iterations at one virtual time count as a livelock
    (:class:`VirtualTimeStalled`); a burst of thousands of calls at one instant takes far
    fewer, since each iteration runs every ready callback.

    A simulated day runs millions of callbacks, so scheduling and running them is leaner
    than asyncio's own (which checks threads and debug settings at every step, and orders
    its timers by a Python ``__lt__``): timers wait in the heap as ``(when, handle)``, which
    orders them exactly as the handles would (equal times compare as not less either way),
    so a simulation's schedule is the same, step for step. There is no debug mode's
    slow-callback report (in virtual time every callback takes no time).
    """

    # asyncio's own state, which the lean methods below use as its methods do
    _ready: deque[asyncio.Handle]
    _closed: bool
    _stopping: bool
    _timer_cancelled_count: int
    _clock_resolution: float
    _selector: _JumpingSelector

    def __init__(
        self, clock: VirtualClock | None = None, stall_iterations: int = 1_000_000
    ) -> None:
        self.clock = clock or VirtualClock()
        selector = _JumpingSelector(self.clock, stall_iterations)
        super().__init__(selector=selector)
        selector.loop = self
        self._timers: list[tuple[float, asyncio.TimerHandle]] = []

    def time(self) -> float:
        return self.clock._t  # clock.now(), read directly: asyncio asks millions of times

    def call_soon(  # type: ignore[override]
        self, callback: Any, *args: Any, context: Any = None
    ) -> asyncio.Handle:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def call_at(  # type: ignore[override]
        self, when: float, callback: Any, *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:
            raise RuntimeError("Event loop is closed")
        timer = asyncio.TimerHandle(when, callback, args, self, context)
        heapq.heappush(self._timers, (when, timer))
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    def call_later(  # type: ignore[override]
        self, delay: float, callback: Any, *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        if delay is None:
            raise TypeError("delay must not be None")
        return self.call_at(self.clock._t + delay, callback, *args, context=context)

    def _run_once(self) -> None:
        """One iteration, as asyncio's: drop cancelled timers, jump the clock to the first
        timer when nothing is ready (through the selector, the watchdog), move the timers
        that are due to the ready queue and run what was ready."""
        timers = self._timers
        count = len(timers)
        if count > 100 and self._timer_cancelled_count / count > 0.5:
            kept = []
            for entry in timers:
                if entry[1]._cancelled:
                    entry[1]._scheduled = False  # type: ignore[attr-defined]
                else:
                    kept.append(entry)
            heapq.heapify(kept)
            self._timers = timers = kept
            self._timer_cancelled_count = 0
        else:
            while timers and timers[0][1]._cancelled:
                self._timer_cancelled_count -= 1
                heapq.heappop(timers)[1]._scheduled = False  # type: ignore[attr-defined]
        ready = self._ready
        timeout: float | None = None
        if ready or self._stopping:
            timeout = 0
        elif timers:
            timeout = min(max(0, timers[0][0] - self.clock._t), 24 * 3600)
        events = self._selector.select(timeout)
        if events:
            self._process_events(events)  # type: ignore[attr-defined]
        end = self.clock._t + self._clock_resolution
        while timers and timers[0][0] < end:
            timer = heapq.heappop(timers)[1]
            timer._scheduled = False  # type: ignore[attr-defined]
            ready.append(timer)
        for _ in range(len(ready)):
            handle = ready.popleft()
            if handle._cancelled:
                continue
            try:
                handle._context.run(handle._callback, *handle._args)  # type: ignore[attr-defined]
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self.call_exception_handler(
                    {
                        "message": f"Exception in callback {handle!r}",
                        "exception": exc,
                        "handle": handle,
                    }
                )

    def close(self) -> None:
        super().close()
        self._timers.clear()

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """``run_until_complete``; if it fails (a stall, an error), the tasks still
        pending are cancelled and let finish, so none is destroyed pending."""
        try:
            return self.run_until_complete(main)
        except BaseException:
            tasks = asyncio.all_tasks(self)
            for task in tasks:
                task.cancel()
            try:
                self.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            except Exception:  # the first error is the one to report
                pass
            raise


class LoopClock:
    """A clock that follows the running event loop's time (virtual under VirtualTimeLoop)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, epoch_ms_at_start: int | None = None
    ) -> None:
        self._loop = loop
        self._t0 = loop.time()
        self._epoch0 = (
            epoch_ms_at_start if epoch_ms_at_start is not None else SystemClock().epoch_ms()
        )

    def now(self) -> float:
        return self._loop.time()

    def epoch_ms(self) -> int:
        return self._epoch0 + round((self._loop.time() - self._t0) * 1000)
