"""Where a call runs: pure placement over the pool's slots (spec section 4.3).

Order: a warm idle container of the same invoking namespace and action revision; a
prewarmed container of the same kind and memory; a new container if memory allows; a new
container after evicting idle warm containers, then prewarmed ones (a spare is worth less
than a waiting call, and an action larger than the memory the prewarms leave would
otherwise wait for ever), never busy or starting ones; otherwise nothing (the call waits).

Memory is counted by :func:`charged_mb`: a running or starting container holds its limit; a
kept one (idle, paused, prewarmed) holds its measured footprint once the pool has measured
it (keep-alive by footprint), else its limit (the stock invoker's accounting). A warm
container about to run grows back to its limit, so reusing it needs that growth free, made
by evicting others if need be. Idle containers are evicted in ``keep_value`` order (the
pool's Greedy-Dual value; all 0 under the stock accounting), least recently used first on
ties.
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
KEPT_STATES = (SlotState.PREWARM, *IDLE_STATES)  # containers kept for calls to come
# A container created ahead for a waiting call (``key`` set): being created, or ready.
AHEAD_STATES = (SlotState.STARTING, SlotState.PREWARM)


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
    @property
    def footprint_mb(self) -> int | None: ...
    @property
    def keep_value(self) -> float: ...


@dataclass(slots=True)
class SlotView:
    """What placement needs to know about one container."""

    kind: str
    memory_mb: int
    state: SlotState
    key: WarmKey | None
    last_used: float
    footprint_mb: int | None = None  # measured while kept (None: not measured)
    keep_value: float = 0.0  # the lower, the sooner evicted


class How(Enum):
    WARM = "warm"
    PREWARM = "prewarm"
    AHEAD = "ahead"  # created for a waiting call of its action (the pool's create_ahead)
    COLD = "cold"


@dataclass(frozen=True, slots=True)
class Placement:
    how: How
    slot: int | None  # the container to use (None for a new one)
    evict: tuple[int, ...] = ()


def charged_mb(slot: SlotLike) -> int:
    """The memory a container holds in the pool's accounting: its measured footprint while
    it is kept, else its limit."""
    if slot.footprint_mb is not None and slot.state in KEPT_STATES:
        return slot.footprint_mb
    return slot.memory_mb


def used_memory(slots: Iterable[SlotLike]) -> int:
    return sum(charged_mb(s) for s in slots)


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
    free = user_memory_mb - used_memory(slots.values())
    warm = [
        (s.last_used, sid) for sid, s in slots.items() if s.key == key and s.state in IDLE_STATES
    ]
    if warm:
        # Prefer an unpaused container, then the most recently used one.
        best = max(warm, key=lambda t: (slots[t[1]].state is SlotState.IDLE, t[0], -t[1]))[1]
        slot = slots[best]
        victims = to_evict(slots, slot.memory_mb - charged_mb(slot) - free, best)
        return None if victims is None else Placement(How.WARM, best, victims)
    for sid, s in sorted(slots.items()) if prewarm else ():  # one created ahead for it first
        if s.key == key and s.state in AHEAD_STATES:
            victims = to_evict(slots, memory_mb - charged_mb(s) - free, sid)
            return None if victims is None else Placement(How.AHEAD, sid, victims)
    for sid, s in sorted(slots.items()) if prewarm else ():
        if (
            s.state is SlotState.PREWARM
            and s.key is None
            and s.kind == kind
            and s.memory_mb == memory_mb
        ):
            victims = to_evict(slots, memory_mb - charged_mb(s) - free, sid)
            return None if victims is None else Placement(How.PREWARM, sid, victims)
    victims = to_evict(slots, memory_mb - free, None)
    return None if victims is None else Placement(How.COLD, None, victims)


def fits_ahead(slots: Iterable[SlotLike], memory_mb: int, user_memory_mb: int) -> bool:
    """Whether a container created ahead of its call fits in the free memory: it evicts
    nothing, since evicting a warm container for a call that has not started yet trades a
    likely warm start for a cold one (measured: benchmarks/bench_many_actions.py)."""
    return memory_mb <= user_memory_mb - used_memory(slots)


def to_evict(
    slots: Mapping[int, SlotLike], short_mb: int, keep: int | None, *, partial: bool = False
) -> tuple[int, ...] | None:
    """The kept containers (not ``keep``) to evict to free ``short_mb``, warm ones first in
    ``keep_value`` then least-recently-used order; () if nothing is short, None if even
    all of them would not free enough (``partial``: then all of them)."""
    if short_mb <= 0:
        return ()
    evictable = sorted(
        (s.state is SlotState.PREWARM, s.keep_value, s.last_used, sid)
        for sid, s in slots.items()
        if sid != keep and s.state in KEPT_STATES
    )
    victims: list[int] = []
    for *_, sid in evictable:
        victims.append(sid)
        short_mb -= charged_mb(slots[sid])
        if short_mb <= 0:
            return tuple(victims)
    return tuple(victims) if partial else None
