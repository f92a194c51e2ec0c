"""The scheduler's values: a call, a container shared by calls of one group, and the heap
entry that orders waiting calls."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")
SHARED_SHARE = 1.0  # what a container running concurrent calls holds of its core


@dataclass(slots=True, eq=False)
class Call(Generic[T]):
    """One pending or running call; ``payload`` is opaque to the scheduler."""

    function: str
    payload: T
    received: float
    priority: float
    seq: int
    core: int | None = None
    started: float | None = None
    share: float = 1.0  # expected CPU share, fixed when it starts
    overrun: float = 0.0  # measured share beyond ``share`` while it runs (see Cores.observe)
    group: Hashable | None = None  # calls that may share a container (None: limit 1)
    limit: int = 1  # calls its container may run at once
    shared: Shared | None = None  # the container it runs in, when ``limit`` > 1
    waiting: bool = True  # queued; False once started (its other heap entries are then stale)
    # Preemption: E[p] when it started, run time before the current stretch (which began
    # at ``resumed``), how often it was paused, and since when it is (None: not paused).
    expected: float = 0.0
    ran_s: float = 0.0
    resumed: float | None = None
    pauses: int = 0
    paused_at: float | None = None
    shared_core: bool = False  # was moved to share a core (its E[p] leaves out the wait)
    late: bool = False  # started past its deadline, ahead of the queue (LateStart)

    def ran(self, now: float) -> float:
        """Time it has run (paused time excluded)."""
        return self.ran_s + (now - self.resumed if self.resumed is not None else 0.0)

    def remaining(self, now: float) -> float:
        """Expected time still to run: E[p] at its start minus the time it has run."""
        return max(0.0, self.expected - self.ran(now))


@dataclass(slots=True, eq=False)
class Shared:
    """A container taking up to ``limit`` calls of one group at once, on one core
    (``core``, None under the shared baseline) that it holds while ``calls`` > 0.
    ``handle`` is the caller's own reference to the container (opaque here)."""

    group: Hashable
    function: str
    limit: int
    core: int | None
    share: float
    calls: int = 0
    closed: bool = False  # takes no more calls (its container is going)
    handle: Any = None


class Entry(NamedTuple):
    """A waiting call in a heap: ``key`` (its priority, or in the overdue heap its
    deadline), then ``order`` (receipt: ties go to the call received first), then ``seq``
    (admission, unique, so a comparison never reaches ``call``). A call has an entry in
    one main heap, and maybe in its group's and the overdue heap; those left behind when
    it starts from another go stale (``call.waiting`` is False)."""

    key: float
    order: int
    seq: int
    call: Call[Any]
