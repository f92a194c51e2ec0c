"""Exclusive worker pools (the KaaS paper's eTask baseline: one function's worker per GPU).

A device serves one client's (function's) worker at a time. Each client owns a pool of
devices; a request runs on an idle device of its own pool. When none is idle the policy may
shrink another pool: the largest pool is the victim (ties: the least recently evicted one);
if the requester's pool is smaller, an idle victim device is handed over at once, or a busy one
is reserved and handed over when its current request finishes; if the requester's pool is among
the largest, the request waits for its own pool. Handing a device to another client replaces
its worker: the next request there is a cold start (process start, framework import, model
load), which the driver carries out and times.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from gpu.scheduler import Dispatch, GpuScheduler, Request


class ExclusiveScheduler(GpuScheduler):
    name = "exclusive"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        n = len(self.slots)
        self.owner: list[str | None] = [None] * n
        self.warm_for: list[str | None] = [None] * n  # whose worker is running there
        self.reserved: dict[int, str] = {}
        self.last_evicted: dict[str, float] = {}
        self._queues: dict[str, deque[Request]] = {}

    def _enqueue(self, req: Request) -> None:
        q = self._queues.setdefault(req.client, deque())
        q.append(req)
        if len(q) > 1 and q[-2].seq > req.seq:
            self._queues[req.client] = deque(sorted(q, key=lambda r: r.seq))

    def _waiting(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def pool(self, client: str) -> list[int]:
        """Devices that belong (or are promised) to ``client``."""
        return [
            d
            for d in range(len(self.slots))
            if (self.reserved.get(d) == client)
            or (self.owner[d] == client and d not in self.reserved)
        ]

    def _run(self, c: str, d: int, out: list[Dispatch]) -> None:
        req = self._queues[c].popleft()
        cold = self.warm_for[d] != c
        self.owner[d] = self.warm_for[d] = c
        out.append(self._start(req, d, cold=cold))

    def _plan(self, out: list[Dispatch]) -> None:
        now = self.clock.now()
        while True:
            for d in self.idle_devices():  # promised devices change hands once idle
                if d in self.reserved:
                    self.owner[d] = self.reserved.pop(d)
            progressed = False
            heads = sorted((q[0].seq, c) for c, q in self._queues.items() if q)
            for _, c in heads:
                if self._place(c, now, out):
                    progressed = True
            if not progressed:
                return

    def _place(self, c: str, now: float, out: list[Dispatch]) -> bool:
        idle = self.idle_devices()
        mine = [d for d in idle if self.owner[d] == c and d not in self.reserved]
        if mine:
            self._run(c, mine[0], out)
            return True
        free = [d for d in idle if self.owner[d] is None]
        if free:
            self._run(c, free[0], out)
            return True
        promised = sum(1 for v in self.reserved.values() if v == c)
        if promised >= len(self._queues[c]):
            return False  # already waiting for enough devices
        sizes = {o: len(self.pool(o)) for o in {x for x in self.owner if x and x != c}}
        if not sizes:
            return False
        victim = min(sizes, key=lambda o: (-sizes[o], self.last_evicted.get(o, float("-inf")), o))
        if len(self.pool(c)) >= sizes[victim]:
            return False  # the requester is among the largest pools: wait for its own
        self.last_evicted[victim] = now
        victim_idle = [d for d in idle if self.owner[d] == victim and d not in self.reserved]
        if victim_idle:
            self._run(c, victim_idle[0], out)
            return True
        busy = [
            d for d in range(len(self.slots)) if self.owner[d] == victim and d not in self.reserved
        ]
        if busy:
            self.reserved[busy[0]] = c
        return False

    def _on_reset(self, device: int, lost: Request | None) -> None:
        self.warm_for[device] = None
