"""CFS-Affinity (KaaS): fair GPU time per client, preferring each client's own devices.

Every client (a function or a namespace) has a virtual time that grows by the expected GPU
time of each request it is given. An idle device serves the client whose virtual time, plus a
penalty when the device lies outside the client's affinity set, is smallest; the penalty (10x
the client's expected per-request GPU time by default, the constant KaaS settled on) is charged
too, so straying costs the client. A client that comes back from idle starts at the current
minimum virtual time (no banked credit, like CFS's min_vruntime); ties go to the least recently
served client. Work-conserving: an idle device never stays idle while anyone waits.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from gpu.scheduler import Dispatch, GpuScheduler, Request


class CFSAffinityScheduler(GpuScheduler):
    name = "cfs-affinity"

    def __init__(self, *args: Any, affinity_penalty: float = 10.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if affinity_penalty < 0:
            raise ValueError("affinity_penalty must be >= 0")
        self.penalty_factor = affinity_penalty
        self._queues: dict[str, deque[Request]] = {}
        self.vtime: dict[str, float] = {}
        self._order: list[str] = []  # clients in order of first appearance
        self._affinity: dict[str, frozenset[int]] = {}
        self._last_served: dict[str, int] = {}
        self._served = 0
        self._running: dict[str, int] = {}
        self._floor = 0.0  # monotone minimum virtual time of active clients
        self.gpu_time: dict[str, float] = {}  # charged expected GPU time, for fairness reports

    def affinity(self, client: str) -> frozenset[int]:
        return self._affinity[client]

    def _assign_affinity(self) -> None:
        """Spread clients over devices so every device has at least one client."""
        n_dev, n_cli = len(self.slots), len(self._order)
        for i, c in enumerate(self._order):
            if n_cli >= n_dev:
                self._affinity[c] = frozenset({i % n_dev})
            else:
                self._affinity[c] = frozenset(d for d in range(n_dev) if d % n_cli == i)

    def _active(self, c: str) -> bool:
        return bool(self._queues.get(c)) or self._running.get(c, 0) > 0

    def _enqueue(self, req: Request) -> None:
        c = req.client
        if c not in self.vtime:
            self._order.append(c)
            self._assign_affinity()
            self._last_served[c] = -1
            self.vtime[c] = self._floor
        elif not self._active(c):
            self.vtime[c] = max(self.vtime[c], self._floor)  # no banked credit
        q = self._queues.setdefault(c, deque())
        q.append(req)
        if len(q) > 1 and q[-2].seq > req.seq:  # a retry: keep arrival order
            self._queues[c] = deque(sorted(q, key=lambda r: r.seq))

    def _waiting(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def _expected(self, req: Request, device: int) -> float:
        return self._infer_est(req, device)

    def _plan(self, out: list[Dispatch]) -> None:
        while True:
            idle = self.idle_devices()
            waiting = [c for c, q in self._queues.items() if q]
            if not idle or not waiting:
                return
            self._floor = max(self._floor, min(self.vtime[c] for c in waiting))
            best: tuple[float, int, int, str] | None = None
            for d in idle:
                for c in waiting:
                    head = self._queues[c][0]
                    if self.cache.plan(d, head.model, head.size) is None:
                        continue
                    pen = 0.0 if d in self._affinity[c] else self._penalty(head, d)
                    key = (self.vtime[c] + pen, self._last_served[c], d, c)
                    if best is None or key < best:
                        best = key
            if best is None:
                return
            _, _, d, c = best
            req = self._queues[c].popleft()
            off = d not in self._affinity[c]
            disp = self._start(req, d)
            charge = disp.estimate_s + (self._penalty(req, d) if off else 0.0)
            self.vtime[c] += charge
            self.gpu_time[c] = self.gpu_time.get(c, 0.0) + disp.estimate_s
            self._last_served[c] = self._served
            self._served += 1
            self._running[c] = self._running.get(c, 0) + 1
            out.append(disp)

    def _penalty(self, req: Request, device: int) -> float:
        return self.penalty_factor * self._expected(req, device)

    def _on_complete(self, device: int, req: Request) -> None:
        self._running[req.client] = max(0, self._running.get(req.client, 0) - 1)

    def _on_reset(self, device: int, lost: Request | None) -> None:
        if lost is not None:
            self._on_complete(device, lost)
