"""The node's kTask queue: hold kTasks until their inputs are ready, then place them (pure).

The paper's scheduler around :func:`gpu.kaas.placement.place`, with an injected clock: the
driver calls ``submit`` when a kTask arrives, ``schedule`` whenever something changed (a key
was put, a device finished), and ``complete`` when an executor finishes one. ``schedule``
returns decisions, never raises: a :class:`Start` binds a kTask to a device's FIFO (its
executor runs them in order), a :class:`Refuse` fails it with the developer's message (its
inputs did not arrive in time, its constants fit no device, it needs CUDA and there is none).

Per-device backlog is the sum of the estimates of the kTasks started there and not yet
complete: an estimate is the task's expected run time (a running average per client and task
name, learned from ``complete``) plus the copy of the constants it will load. Constants a
started kTask will load count as resident on that device for the kTasks placed after it, so
one client's burst follows its first request instead of copying its constants everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpu.kaas.format import KTask
from gpu.kaas.placement import DeviceState, Holders, Placement, Versions, place, requirements
from gpu.kaas.spec import KTaskError
from whisk.clock import Clock


@dataclass(frozen=True)
class KDevice:
    index: int
    constant_capacity: int
    cuda: bool = False


@dataclass
class Waiting:
    id: int
    task: KTask
    client: str
    arrived: float
    timeout_s: float  # how long it may wait for its inputs


@dataclass(frozen=True)
class Start:
    id: int
    device: int
    task: KTask
    client: str
    placement: Placement
    waited_s: float


@dataclass(frozen=True)
class Refuse:
    id: int
    error: str


Decision = Start | Refuse


@dataclass
class _Running:
    device: int
    estimate_s: float
    copy_s: float
    profile: tuple[str, str]
    constants: frozenset[tuple[str, int]]


@dataclass
class _Device:
    spec: KDevice
    backlog_s: float = 0.0
    incoming: dict[tuple[str, int], int] = field(default_factory=dict)  # constant -> tasks


class KTaskQueue:
    def __init__(
        self,
        devices: Sequence[KDevice],
        clock: Clock,
        *,
        holders: Holders,
        versions: Versions,
        copy_bytes_per_s: float,
        input_timeout_s: float = 60.0,
        default_run_s: float = 0.01,
        smoothing: float = 0.3,
    ) -> None:
        if not devices:
            raise ValueError("a kTask queue needs at least one device")
        self._devices = [_Device(d) for d in devices]
        self.clock = clock
        self._holders = holders
        self._versions = versions
        self.copy_bytes_per_s = copy_bytes_per_s
        self.input_timeout_s = input_timeout_s
        self.default_run_s = default_run_s
        self.smoothing = smoothing
        self._waiting: list[Waiting] = []
        self._running: dict[int, _Running] = {}
        self._run_s: dict[tuple[str, str], float] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def submit(self, task: KTask, client: str = "", input_timeout_s: float | None = None) -> int:
        """Queue ``task``; it may wait ``input_timeout_s`` (default: the queue's) for its
        inputs, 0 meaning they must be in the data layer now."""
        self._next += 1
        timeout = self.input_timeout_s if input_timeout_s is None else input_timeout_s
        self._waiting.append(Waiting(self._next, task, client, self.clock.now(), timeout))
        return self._next

    def next_deadline(self) -> float | None:
        """When the first waiting kTask runs out of time for its inputs (a driver calls
        ``schedule`` then, as nothing else may)."""
        return min((w.arrived + w.timeout_s for w in self._waiting), default=None)

    def backlog(self, device: int) -> float:
        return self._devices[device].backlog_s

    def estimate(self, client: str, name: str) -> float:
        return self._run_s.get((client, name), self.default_run_s)

    def schedule(self) -> list[Decision]:
        """Place every waiting kTask whose inputs are ready, in arrival order; one whose
        inputs are missing does not hold up those behind it."""
        now = self.clock.now()
        decisions: list[Decision] = []
        still: list[Waiting] = []
        for w in self._waiting:
            needs, missing = requirements(w.task, self._versions)
            states = [
                DeviceState(d.spec.index, d.backlog_s, d.spec.constant_capacity, d.spec.cuda)
                for d in self._devices
            ]
            try:
                p = place(
                    needs,
                    missing,
                    states,
                    self._holders_now,
                    copy_bytes_per_s=self.copy_bytes_per_s,
                    needs_cuda=w.task.needs_cuda,
                )
            except KTaskError as e:
                decisions.append(Refuse(w.id, str(e)))
                continue
            if p.device is None:
                if now - w.arrived >= w.timeout_s:
                    keys = ", ".join(repr(k) for k in p.waiting_for)
                    when = f"after {w.timeout_s:g} s" if w.timeout_s > 0 else "when it arrived"
                    decisions.append(
                        Refuse(
                            w.id,
                            f"the kTask's inputs {keys} were not in the data layer (at the "
                            f"versions it names) {when}",
                        )
                    )
                else:
                    still.append(w)
                continue
            decisions.append(self._start(w, p, {(n.key, n.version) for n in needs}))
        self._waiting = still
        return decisions

    def complete(self, id: int, seconds: float) -> None:
        """A started kTask finished (or failed) after ``seconds`` on its device."""
        r = self._running.pop(id)
        d = self._devices[r.device]
        d.backlog_s = max(0.0, d.backlog_s - r.estimate_s - r.copy_s)
        if not any(o.device == r.device for o in self._running.values()):
            d.backlog_s = 0.0  # no rounding residue on an idle device
        for c in r.constants:
            left = d.incoming.get(c, 0) - 1
            if left > 0:
                d.incoming[c] = left
            else:
                d.incoming.pop(c, None)
        run = max(0.0, seconds - r.copy_s)
        old = self._run_s.get(r.profile)
        self._run_s[r.profile] = run if old is None else old + self.smoothing * (run - old)

    def _holders_now(self, key: str, version: int) -> set[int]:
        held = set(self._holders(key, version))
        return held | {d.spec.index for d in self._devices if (key, version) in d.incoming}

    def _start(self, w: Waiting, p: Placement, needs_keys: set[tuple[str, int]]) -> Start:
        assert p.device is not None
        d = self._devices[p.device]
        profile = (w.client, w.task.name)
        estimate = self.estimate(*profile)
        copy_s = p.missing_bytes / self.copy_bytes_per_s
        d.backlog_s += estimate + copy_s
        for c in needs_keys:
            d.incoming[c] = d.incoming.get(c, 0) + 1
        self._running[w.id] = _Running(p.device, estimate, copy_s, profile, frozenset(needs_keys))
        return Start(w.id, p.device, w.task, w.client, p, self.clock.now() - w.arrived)
