"""Calls that wait for a busy container of their action instead of a new one.

An attained-service order admits every call that memory allows, as the stock invoker does,
so a burst of a short function gets a container per call. Where a container costs more to
make than a busy one of the action takes to free (Docker: hundreds of ms of the engine's CPU
on the cores the calls share, against a function of tens of ms), the call is better off
waiting for that one, as the scheduler mode's queues do (a creation only when the containers
there cannot drain the queue in time). Pure and clock-free: the invoker asks
:func:`worth_waiting` with what the pool and the function's statistics say, parks the call
here, and starts it when a container of its action is idle or its wait is up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Generic, NamedTuple, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def expected_wait(busy_for: Sequence[float], expected_s: float, ahead: int) -> float:
    """When a call with ``ahead`` calls before it should get one of these busy containers.

    ``busy_for``: how long each has run its call; ``expected_s``: the function's E[p]. A
    call is expected to need E[p] minus what it has run, and one already past E[p] another
    E[p] (its length is then unknown, not nearly over); the containers then serve the calls
    ahead in turn, each another E[p]."""
    left = sorted(expected_s - run if run < expected_s else expected_s for run in busy_for)
    rounds, index = divmod(ahead, len(left))
    return left[index] + rounds * expected_s


def worth_waiting(
    busy_for: Sequence[float], expected_s: float, ahead: int, start_cost_s: float
) -> bool:
    """Whether a call should wait for one of its action's busy containers (``busy_for``)
    rather than start one: it is expected to get one sooner than a start would take."""
    if not busy_for or expected_s <= 0 or start_cost_s <= 0:
        return False
    return expected_wait(busy_for, expected_s, ahead) < start_cost_s


class Parked(NamedTuple, Generic[T]):
    item: T
    until: float  # when it stops waiting and starts a container of its own


class WarmWaits(Generic[K, T]):
    """The parked calls, per action (``K``), in the order they parked."""

    def __init__(self) -> None:
        self._by_key: dict[K, deque[Parked[T]]] = {}
        self.parked = 0  # calls parked so far

    def __len__(self) -> int:
        return sum(len(q) for q in self._by_key.values())

    def __iter__(self) -> Iterator[T]:
        return (p.item for q in self._by_key.values() for p in q)

    def ahead(self, key: K) -> int:
        """How many calls of ``key`` already wait (they get its containers first)."""
        q = self._by_key.get(key)
        return len(q) if q else 0

    def park(self, key: K, item: T, until: float) -> None:
        self._by_key.setdefault(key, deque()).append(Parked(item, until))
        self.parked += 1

    def next_until(self, after: float) -> float | None:
        """The earliest time after ``after`` that a call first in its action's line stops
        waiting (for a wake-up), or None."""
        return min((q[0].until for q in self._by_key.values() if q[0].until > after), default=None)

    def serve(self, now: float, idle: Callable[[K], bool], start: Callable[[K, T], bool]) -> None:
        """Start, per action in the order they parked, the calls that have a container of
        their action ``idle`` or whose wait is up (``start``: False if it must wait for
        memory, and so do the rest of its action's)."""
        for key in list(self._by_key):
            q = self._by_key[key]
            while q and (q[0].until <= now or idle(key)):
                if not start(key, q[0].item):
                    break
                q.popleft()
            if not q:
                del self._by_key[key]

    def drain(self) -> list[T]:
        """Every parked call, removed (shutdown hands them back)."""
        items = list(self)
        self._by_key.clear()
        return items
