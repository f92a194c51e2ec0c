"""What the scheduler plans to start next, as a value: :meth:`NodeScheduler.plan` returns
one without changing anything, the caller reserves the memory its call needs (none when it
``joins`` a running container), and :meth:`NodeScheduler.commit` applies it. A plan that
cannot have its memory is dropped: there is nothing to undo.

Values that nothing changes once made, but not frozen dataclasses: freezing costs 0.4 µs
more per start, on the path every call takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from invoker.scheduler.calls import Call, Shared


@dataclass(slots=True)
class Start:
    """Start ``call`` on ``core`` (None under the shared baseline) expecting ``share`` of
    it; or, with ``joins``, in that running container of its group (on its core, share 0),
    taking no core and no memory of its own."""

    call: Call[Any]
    core: int | None
    share: float
    joins: Shared | None = None


@dataclass(slots=True, kw_only=True)
class MoveThenStart(Start):
    """Move the running call ``moved`` onto ``to`` (another long call's core), then start
    ``call`` on the core it leaves (:meth:`NodeScheduler.sharing_move`)."""

    moved: Call[Any]
    to: int


@dataclass(slots=True, kw_only=True)
class PauseThenStart(Start):
    """Pause the running call ``victim``, then start ``call`` on the core it leaves
    (:meth:`NodeScheduler.preemption_victim`)."""

    victim: Call[Any]


@dataclass(slots=True)
class OverdueStart(Start):
    """Start the overdue ``call`` on ``core``, beside the longer calls already there."""


@dataclass(slots=True)
class LateStart(Start):
    """Start ``call``, past its deadline (:attr:`Policy.late`), ahead of the queue's head:
    late calls take at most :attr:`Policy.late_share` of the running ones."""
