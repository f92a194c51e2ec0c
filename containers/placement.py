"""Where a call runs: pure placement over the pool's slots (spec section 4.3).

Order: a warm idle container of the same invoking namespace and action revision; a
prewarmed container of the same kind and memory; a new container if memory allows; a new
container after evicting idle warm containers (least recently used first), then prewarmed
ones (a spare is worth less than a waiting call, and an action larger than the memory the
prewarms leave would otherwise wait for ever), never busy or starting ones; otherwise
nothing (the call waits).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple, Protocol


class WarmKey(NamedTuple):
    """What makes a warm container reusable: same invoking namespace, same action revision."""

    namespace: str
    docid: str
    revision: str | None


class SlotState(Enum):
    STARTING = "starting"  # being created (cold or prewarm)
    PREWARM = "prewarm"  # runtime started, no action initialised
    IDLE = "idle"  # warm, initialised, no call running
    PAUSED = "paused"  # warm and idle, paused to free the CPU
    BUSY = "busy"  # running a call


IDLE_STATES = (SlotState.IDLE, SlotState.PAUSED)  # warm containers with no call running


class SlotLike(Protocol):
    """What placement reads of a container: a :class:`SlotView`, or the pool's own slot
    (read in place, so that a reservation builds no copy of every container)."""

    @property
    def kind(self) -> str: ...
    @property
    def memory_mb(self) -> int: ...
    @property
    def state(self) -> SlotState: ...
    @property
    def key(self) -> WarmKey | None: ...
    @property
    def last_used(self) -> float: ...


@dataclass(slots=True)
class SlotView:
    """What placement needs to know about one container."""

    kind: str
    memory_mb: int
    state: SlotState
    key: WarmKey | None
    last_used: float


class How(Enum):
    WARM = "warm"
    PREWARM = "prewarm"
    COLD = "cold"


@dataclass(frozen=True, slots=True)
class Placement:
    how: How
    slot: int | None  # the container to use (None for a new one)
    evict: tuple[int, ...] = ()


def used_memory(slots: Iterable[SlotLike]) -> int:
    return sum(s.memory_mb for s in slots)


def place(
    slots: Mapping[int, SlotLike],
    key: WarmKey,
    kind: str,
    memory_mb: int,
    user_memory_mb: int,
    *,
    prewarm: bool = True,
) -> Placement | None:
    """Choose a container for a call, or None if it must wait for memory to free up.
    ``prewarm=False``: not a prewarmed one (it was started without what this call needs)."""
    warm = [
        (s.last_used, sid) for sid, s in slots.items() if s.key == key and s.state in IDLE_STATES
    ]
    if warm:
        # Prefer an unpaused container, then the most recently used one.
        best = max(warm, key=lambda t: (slots[t[1]].state is SlotState.IDLE, t[0], -t[1]))
        return Placement(How.WARM, best[1])
    for sid, s in sorted(slots.items()) if prewarm else ():
        if s.state is SlotState.PREWARM and s.kind == kind and s.memory_mb == memory_mb:
            return Placement(How.PREWARM, sid)
    free = user_memory_mb - used_memory(slots.values())
    if memory_mb <= free:
        return Placement(How.COLD, None)
    victims: list[int] = []
    evictable = sorted(
        (s.state is SlotState.PREWARM, s.last_used, sid)
        for sid, s in slots.items()
        if s.state in IDLE_STATES or s.state is SlotState.PREWARM
    )
    for *_, sid in evictable:
        victims.append(sid)
        free += slots[sid].memory_mb
        if memory_mb <= free:
            return Placement(How.COLD, None, tuple(victims))
    return None
