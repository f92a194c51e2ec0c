"""The GPU request scheduler: shared state and the LB / LALB / LALB+O3 policies.

Pure logic with an injected clock: the live pool and the simulator drive the same objects.
The driver calls ``submit`` when a request arrives, ``schedule`` whenever something changed
(it returns the requests to start now, each bound to an idle device), and ``complete`` when a
device finishes. A device runs one request at a time; a request placed in a busy device's
local queue is started by a later ``schedule`` call, before anything in the global queue.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedDict, SortedList

from gpu.cache import CacheView, victims_age
from gpu.estimates import Estimator
from whisk.clock import Clock


@dataclass(eq=False)
class Request:
    """One inference: which model (content key), how big, for whom, and when it arrived."""

    model: str
    size: int
    batch: int = 1
    client: str = ""
    arrival: float = 0.0
    seq: int = -1
    attempts: int = 0
    payload: Any = None  # opaque to the scheduler (the input tensor bytes, a future, ...)


@dataclass(frozen=True)
class Dispatch:
    """Start ``request`` on ``device`` now; evict ``victims`` first and upload unless ``hit``."""

    request: Request
    device: int
    hit: bool
    victims: tuple[str, ...] = ()
    false_miss: bool = False
    cold_start: bool = False  # Exclusive: replace the device's worker process first
    out_of_order: bool = False
    estimate_s: float = 0.0


@dataclass(frozen=True)
class DeviceSlot:
    """What the scheduler knows about a device: capacity in bytes and its type (for profiles)."""

    index: int
    capacity: int
    dtype: str = "virtual"


@dataclass
class _DeviceState:
    busy: bool = False
    current: Request | None = None
    busy_until: float = 0.0
    idle_since: float = 0.0
    local: deque[Request] = field(default_factory=deque)
    local_est: float = 0.0


class GpuScheduler(ABC):
    """Device states, the cache view and the helpers every policy shares."""

    name = "base"

    def __init__(
        self,
        devices: Sequence[DeviceSlot],
        clock: Clock,
        estimator: Estimator | None = None,
        cache: CacheView | None = None,
    ) -> None:
        if not devices:
            raise ValueError("a GPU scheduler needs at least one device")
        self.slots = list(devices)
        self.clock = clock
        self.estimator = estimator or Estimator()
        self.cache = cache or CacheView([d.capacity for d in devices])
        self.state = [_DeviceState(idle_since=clock.now()) for _ in devices]
        self._seq = 0

    # -- driver API ---------------------------------------------------------------------------

    def submit(self, req: Request) -> None:
        """Queue a request (raises ModelTooLarge for a model no device could hold)."""
        self.cache.check_fits(req.model, req.size)
        if req.seq < 0:
            req.seq = self._seq
            self._seq += 1
        self._enqueue(req)

    def schedule(self) -> list[Dispatch]:
        """Requests to start now; call after every submit/complete."""
        out: list[Dispatch] = []
        self._plan(out)
        return out

    def complete(self, device: int) -> Request:
        """The device finished its current request and is idle again."""
        st = self.state[device]
        req = st.current
        if req is None:
            raise RuntimeError(f"device {device} completed but was not running anything")
        self.cache.unpin(device, req.model)
        st.busy, st.current = False, None
        st.idle_since = self.clock.now()
        self._on_complete(device, req)
        return req

    def reset_device(self, device: int) -> Request | None:
        """The device's worker died: forget its models, requeue its local queue.

        Returns the request that was running (the driver retries or fails it).
        """
        st = self.state[device]
        lost = st.current
        for r in st.local:
            self._enqueue(r)
        st.local.clear()
        st.local_est = 0.0
        st.busy, st.current = False, None
        st.idle_since = self.clock.now()
        self.cache.clear_device(device, self.clock.now())
        self._on_reset(device, lost)
        return lost

    def requeue(self, req: Request) -> None:
        """Put a request back at its arrival position (a retry after a worker crash)."""
        req.attempts += 1
        self._enqueue(req)

    @property
    def pending(self) -> int:
        return self._waiting() + sum(len(s.local) for s in self.state)

    def idle_devices(self) -> list[int]:
        """Idle devices, longest idle first."""
        idle = [i for i, s in enumerate(self.state) if not s.busy]
        idle.sort(key=lambda i: (self.state[i].idle_since, i))
        return idle

    # -- policy hooks -------------------------------------------------------------------------

    @abstractmethod
    def _enqueue(self, req: Request) -> None: ...

    @abstractmethod
    def _waiting(self) -> int: ...

    @abstractmethod
    def _plan(self, out: list[Dispatch]) -> None: ...

    def _on_complete(self, device: int, req: Request) -> None:  # noqa: B027
        """Policy bookkeeping when a request finishes (optional)."""

    def _on_reset(self, device: int, lost: Request | None) -> None:  # noqa: B027
        """Policy bookkeeping when a device's worker died (optional)."""

    # -- shared helpers -----------------------------------------------------------------------

    def _dtype(self, device: int) -> str:
        return self.slots[device].dtype

    def _infer_est(self, req: Request, device: int) -> float:
        return self.estimator.infer_s(req.model, req.size, req.batch, self._dtype(device))

    def _upload_est(self, req: Request, device: int) -> float:
        return self.estimator.upload_s(req.size, self._dtype(device))

    def _start(
        self, req: Request, device: int, *, out_of_order: bool = False, cold: bool = False
    ) -> Dispatch:
        """Bind a request to an idle device: admit its model (evicting), pin it, mark busy."""
        st = self.state[device]
        assert not st.busy, f"device {device} is busy"
        now = self.clock.now()
        hit = self.cache.holds(device, req.model) and not cold
        false_miss = not hit and bool(self.cache.holders(req.model) - {device})
        if cold:
            victims = self.cache.devices[device].lru()
            for k in victims:
                self.cache.evict(device, k, now)
            self.cache.admit(device, req.model, req.size, now)
            est = self.estimator.cold_start_s(req.size, self._dtype(device))
        else:
            victims = self.cache.admit(device, req.model, req.size, now)
            est = 0.0 if hit else self._upload_est(req, device)
        est += self._infer_est(req, device)
        self.cache.pin(device, req.model)
        st.busy, st.current, st.busy_until = True, req, now + est
        return Dispatch(req, device, hit, tuple(victims), false_miss, cold, out_of_order, est)

    def _pick_miss_device(self, req: Request, candidates: Sequence[int]) -> int | None:
        """Among idle devices, the one where a miss costs the least locality.

        Prefer a device with free room (no victims), then the one whose victims were used
        least recently; devices whose pins leave no room are skipped.
        """
        best: tuple[float, float, int] | None = None
        for d in candidates:
            victims = self.cache.plan(d, req.model, req.size)
            if victims is None:
                continue
            score = (victims_age(self.cache.devices[d], victims), self.state[d].idle_since, d)
            if best is None or score < best:
                best = score
        return None if best is None else best[2]

    def _busy_finish(self, device: int, req: Request) -> float:
        """Estimated time until ``req`` finishes behind everything already on ``device``."""
        st = self.state[device]
        remaining = max(0.0, st.busy_until - self.clock.now())
        return remaining + st.local_est + self._infer_est(req, device)

    def _queue_local(self, req: Request, device: int) -> None:
        st = self.state[device]
        self.cache.pin(device, req.model)
        self.cache.devices[device].touch(req.model, self.clock.now())
        st.local.append(req)
        st.local_est += self._infer_est(req, device)

    def _drain_local(self, out: list[Dispatch]) -> bool:
        """An idle device first runs what it already promised (its local queue)."""
        progressed = False
        for d in self.idle_devices():
            st = self.state[d]
            if st.local:
                req = st.local.popleft()
                st.local_est = max(0.0, st.local_est - self._infer_est(req, d))
                self.cache.unpin(d, req.model)  # _start pins it again
                out.append(self._start(req, d))
                progressed = True
        return progressed


class GlobalQueueScheduler(GpuScheduler):
    """A global queue in arrival order, indexed by model for out-of-order lookups."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queue: SortedDict = SortedDict()  # seq -> Request
        self._by_model: dict[str, SortedList] = {}  # model -> seqs waiting

    def _enqueue(self, req: Request) -> None:
        self._queue[req.seq] = req
        self._by_model.setdefault(req.model, SortedList()).add(req.seq)

    def _waiting(self) -> int:
        return len(self._queue)

    def _take(self, req: Request) -> Request:
        del self._queue[req.seq]
        seqs = self._by_model[req.model]
        seqs.remove(req.seq)
        if not seqs:
            del self._by_model[req.model]
        return req

    def _head(self) -> Request | None:
        return self._queue.peekitem(0)[1] if self._queue else None


class LBScheduler(GlobalQueueScheduler):
    """Baseline: the head of the global queue goes to whichever device is idle (longest idle)."""

    name = "lb"

    def _plan(self, out: list[Dispatch]) -> None:
        while self._queue:
            idle = self.idle_devices()
            if not idle:
                return
            head = self._head()
            assert head is not None
            for d in idle:  # normally the first; later ones only if pins block the first
                if self.cache.plan(d, head.model, head.size) is not None:
                    out.append(self._start(self._take(head), d))
                    break
            else:
                return


class LALBScheduler(GlobalQueueScheduler):
    """Locality-aware load balancing, with out-of-order (O3) dispatch when ``o3_limit > 0``.

    Each round, with at least one request waiting and one device idle:
      0. idle devices drain their local queues first;
      1. the head request goes to an idle device that holds its model (hit);
      2. O3: a later request whose model is on an idle device jumps ahead (each request it
         passes counts a skip); once the head has been skipped ``o3_limit`` times it is
         dispatched at once, hit or miss;
      3. else, if busy devices hold the head's model, the earliest estimated finish there
         (remaining work + local queue + this inference) is compared with a miss on an idle
         device (upload + inference): the busy hit wins → that device's local queue;
         otherwise → a miss on an idle device, evicting LRU victims.
    """

    name = "lalb"

    def __init__(self, *args: Any, o3_limit: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if o3_limit < 0:
            raise ValueError("o3_limit must be >= 0")
        self.o3_limit = o3_limit
        if o3_limit:
            self.name = "lalbo3"
        self._jumped = SortedList()  # seqs of requests dispatched out of order

    def skips(self, req: Request) -> int:
        """How many later requests were dispatched ahead of ``req`` while it waited."""
        return len(self._jumped) - self._jumped.bisect_right(req.seq)

    def _idle_holder(self, model: str, idle: Sequence[int]) -> int | None:
        holders = self.cache.holders(model)
        for d in idle:
            if d in holders:
                return d
        return None

    def _earliest_idle_hit(self, idle: Sequence[int]) -> tuple[Request, int] | None:
        best: tuple[int, int] | None = None
        for d in idle:
            for key in self.cache.devices[d].lru():
                seqs = self._by_model.get(key)
                if seqs and (best is None or seqs[0] < best[0]):
                    best = (seqs[0], d)
        return None if best is None else (self._queue[best[0]], best[1])

    def _plan(self, out: list[Dispatch]) -> None:
        while True:
            if self._drain_local(out):
                continue
            idle = self.idle_devices()
            head = self._head()
            if head is None or not idle:
                return
            d = self._idle_holder(head.model, idle)
            if d is not None:  # rule 1: idle hit
                out.append(self._start(self._take(head), d))
                continue
            if self.o3_limit:
                self._prune_jumped(head)
                if self.skips(head) >= self.o3_limit:  # starvation guard: now, hit or miss
                    d = self._pick_miss_device(head, idle)
                    if d is None:
                        return
                    out.append(self._start(self._take(head), d))
                    continue
                jump = self._earliest_idle_hit(idle)
                if jump is not None:  # rule 2: O3
                    req, d = jump
                    out.append(self._start(self._take(req), d, out_of_order=True))
                    self._jumped.add(req.seq)
                    continue
            if not self._place_head(head, idle, out):
                return

    def _place_head(self, head: Request, idle: Sequence[int], out: list[Dispatch]) -> bool:
        """Rule 3: busy hit vs idle miss by estimated finish time."""
        miss_dev = self._pick_miss_device(head, idle)
        busy = [d for d in self.cache.holders(head.model) if self.state[d].busy]
        if busy:
            best = min(busy, key=lambda d: (self._busy_finish(d, head), d))
            t_busy = self._busy_finish(best, head)
            t_miss = (
                float("inf")
                if miss_dev is None
                else self._upload_est(head, miss_dev) + self._infer_est(head, miss_dev)
            )
            if t_busy <= t_miss:
                self._queue_local(self._take(head), best)
                return True
        if miss_dev is None:
            return False
        out.append(self._start(self._take(head), miss_dev))
        return True

    def _prune_jumped(self, head: Request) -> None:
        """Forget the jumps ahead of requests no longer waiting (older than the head)."""
        while self._jumped and self._jumped[0] < head.seq:
            self._jumped.pop(0)
