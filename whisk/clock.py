"""Time sources.

Every component that needs the time gets a :class:`Clock` injected, so the same code runs
in the live service (``SystemClock``) and in the discrete-event simulator
(``VirtualClock`` driving a :class:`VirtualTimeLoop`). This is the only module allowed to
read the system clock (ruff ``TID251`` enforces it).
"""

from __future__ import annotations

import asyncio
import selectors
import time
from typing import Protocol


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


class _JumpingSelector(selectors.DefaultSelector):
    """Instead of blocking for ``timeout`` seconds, jump the virtual clock forward by it."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None):
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            # Nothing is scheduled and nothing can wake us: a simulation deadlock.
            raise RuntimeError("virtual-time loop is idle with no timer pending (deadlock)")
        if timeout > 0:
            self._clock.advance_to(self._clock.now() + timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose time is virtual and jumps to the next timer when idle.

    Production coroutines that ``await asyncio.sleep(...)`` or use ``asyncio.timeout`` become
    discrete events, so the simulator needs no second copy of the scheduling logic.
    """

    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.clock = clock or VirtualClock()
        super().__init__(selector=_JumpingSelector(self.clock))

    def time(self) -> float:
        return self.clock.now()


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
