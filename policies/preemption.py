"""When a running call may be paused for a waiting one: the pure rule the node scheduler
(``invoker/scheduler/``) applies, with time passed in.

Two estimates of a running call's remaining time:

- *Expected* (``tail = 0``, ``--preempt``'s rule): E[p] at its start minus the time it has
  run; a call that outruns its E[p] is expected to end at once, so it is never paused.
- *Tail-aware* (``tail > 0``): at least ``tail`` times the time it has run. Under heavy
  tails a call that has run long is likely a long one (its mean residual life grows with
  its age), so the longer it runs, the sooner a short call may pause it: least attained
  service among the calls that outran their estimate.

Each pause of a call needs it to have run ``quantum_s * growth ** pauses`` since it last
resumed (a multilevel-feedback time slice, doubling by default), which bounds the pauses
of a call by the logarithm of its length instead of a fixed count.

*Sharing* (``share_cores > 1``): a call that the rule would pause for the head is moved
instead onto the core of another such call, if one holds fewer than ``share_cores`` of
them, and the head takes the core it left. Long calls then share cores among themselves
(processor sharing, as the SFS paper layers CFS under a FIFO quantum) while short calls
get a core of their own at once: no freeze, no pause latency, no paused container
holding memory. Pausing remains for a call with no such partner.

*Overdue* (``overdue > 0``, with sharing): a waiting call that has waited ``overdue`` times
its E[p] may start on a core it shares with running calls each expected to need at least
as long as it (fewer than ``share_cores`` of them). Under sustained overload an exclusive
order makes the longest calls wait without bound while processor sharing slows everyone a
little; an overdue call starts slowed instead of waiting on, and no call expected to end
sooner than it is slowed by it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Preemption:
    """``ratio``: the waiting call's E[p] must be at most this fraction of the running
    call's remaining time; the time saved must exceed ``pause_cost_s`` (measurements
    replace it). ``max_paused`` calls may be paused at once, each ``max_pauses`` times.
    ``resume_first``: a paused call resumes as soon as a core has room (else only when
    its remaining time is below the head of the queue's E[p], shortest first).
    ``share_cores``: how many long calls may share a core instead of being paused.
    ``overdue``: after waiting this many times its E[p], a call may join such a core
    (0: never)."""

    ratio: float = 0.5
    pause_cost_s: float = 0.01
    max_paused: int = 8
    max_pauses: int = 16
    tail: float = 0.0
    quantum_s: float = 0.0
    growth: float = 2.0
    resume_first: bool = True
    share_cores: int = 1
    overdue: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.ratio < 1 or self.pause_cost_s < 0:
            raise ValueError("preemption: 0 < ratio < 1 and pause_cost_s >= 0")
        if self.max_paused < 1 or self.max_pauses < 1:
            raise ValueError("preemption: max_paused and max_pauses must be >= 1")
        if self.tail < 0 or self.quantum_s < 0 or self.growth < 1:
            raise ValueError("preemption: tail >= 0, quantum_s >= 0 and growth >= 1")
        if self.share_cores < 1 or self.overdue < 0:
            raise ValueError("preemption: share_cores >= 1 and overdue >= 0")

    def remaining(self, expected: float, ran: float) -> float:
        """The time a call expected to take ``expected`` that has run ``ran`` still needs."""
        return max(expected - ran, self.tail * ran, 0.0)

    def deadline(self, received: float, expected: float) -> float | None:
        """When a call received at ``received`` and expected to take ``expected`` becomes
        overdue (None: never)."""
        if self.overdue <= 0 or self.share_cores < 2:
            return None
        return received + self.overdue * expected

    def sliced(self, pauses: int, ran_since_resume: float) -> bool:
        """Whether a call paused ``pauses`` times has used up its current time slice."""
        return ran_since_resume >= self.quantum_s * self.growth**pauses

    def outweighs(self, wanted: float, left: float, pause_cost_s: float) -> bool:
        """Whether a waiting call expected to take ``wanted`` should go before a running
        call with ``left`` to run: much shorter, by more than a pause costs."""
        return wanted <= self.ratio * left and left - wanted > pause_cost_s
