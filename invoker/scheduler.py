"""The node scheduler: the priority queue of pending calls and the core slots.

Pure logic with time passed in, shared by the live invoker and the simulator. A call's
priority is computed once, when it is admitted, by the policy; ties go to the call admitted
first. Under the paper's policies each running call holds one core of its own and the node
never runs more calls than it has action cores; under the ``openwhisk`` baseline calls are
not limited here (the container pool's memory is the only limit) and share the cores.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from policies import FunctionStats, Policy

T = TypeVar("T")


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


class NodeScheduler(Generic[T]):
    def __init__(
        self, policy: Policy, cores: Sequence[int], stats: FunctionStats | None = None
    ) -> None:
        if not cores:
            raise ValueError("the node needs at least one action core")
        if len(set(cores)) != len(cores):
            raise ValueError("action cores must be distinct")
        self.policy = policy
        self._priority = policy.priority
        self.cores = tuple(cores)
        self.stats = stats or FunctionStats()
        self._queue: list[tuple[float, int, Call[T]]] = []
        self._free_cores = sorted(self.cores)
        self._seq = 0
        self.running = 0

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def free_cores(self) -> int:
        return len(self._free_cores)

    def admit(self, function: str, payload: T, now: float) -> Call[T]:
        """Queue a received call; its priority is fixed now."""
        info = self.stats.arrive(function, now)
        self._seq = seq = self._seq + 1
        priority = self._priority(info)
        call = Call(function, payload, info.received, priority, seq)
        heapq.heappush(self._queue, (priority, seq, call))
        return call

    def peek(self) -> Call[T] | None:
        """The call that would start next, if a slot is free."""
        return self._queue[0][2] if self._queue else None

    def can_start(self) -> bool:
        if not self._queue:
            return False
        return not self.policy.exclusive_cores or bool(self._free_cores)

    def start(self, now: float) -> Call[T]:
        """Take the head of the queue and give it a core (None under the shared baseline)."""
        if not self.can_start():
            raise RuntimeError("no call can start: queue empty or every core busy")
        _, _, call = heapq.heappop(self._queue)
        if self.policy.exclusive_cores:
            call.core = heapq.heappop(self._free_cores)
        call.started = now
        self.running += 1
        return call

    def finish(self, call: Call[T], duration_s: float | None) -> None:
        """Release the call's core; a measured processing time feeds E[p]."""
        if call.started is None:
            raise RuntimeError("finish() of a call that was never started")
        call.started = None
        self.running -= 1
        if call.core is not None:
            heapq.heappush(self._free_cores, call.core)
            call.core = None
        if duration_s is not None:
            self.stats.finish(call.function, duration_s)

    def drain(self) -> list[Call[T]]:
        """Remove and return every queued call, in priority order (for shutdown)."""
        calls = [c for _, _, c in sorted(self._queue)]
        self._queue.clear()
        return calls
