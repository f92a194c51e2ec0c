"""A simulated container backend for the discrete-event simulator.

Only this leaf is swapped: the pool, the scheduler and the invoker run unchanged on a
virtual-time event loop. A call's one-core processing time travels in its parameters
(``SIM_DURATION``), with the CPU time it needs (``SIM_CPU``; all of it by default: a
CPU-bound call); the rest of its time it waits (I/O), interleaved evenly with its CPU work.

The simulated CPU shares each group of cores (one core for pinned calls, all the action
cores under the ``openwhisk`` baseline) by processor sharing of the CPU parts: while the
calls' CPU demand fits in the group, every call runs at full speed; beyond it, every CPU
part is stretched by the same factor ``a`` so that the demand equals the group's cores,
``sum(c / (w + c * a)) = cores``, and waiting parts are not slowed. Pure CPU-bound calls
therefore get ``min(1, cores / running)`` of a core each, and a call that mostly waits
loses almost nothing beside one that computes; a misjudged share has a cost. Containers
given different ``cpu.weight`` (:meth:`SimulatedContainer.set_cpu_weight`, each write
costing ``weight_s``) share their group by weight instead (:func:`weighted_speeds`).

Pausing a container (preemption) freezes its call's progress; each pause and each resume
takes ``pause_s / 2`` (the engine's latency), during which the call still runs (and shares
its core with whatever was given it) or stays frozen.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass

from containers.backend import ContainerSpec, HttpResult, LogLine
from containers.cgroups import DEFAULT_CPU_WEIGHT, check_cpu_weight
from containers.cpu import CpuTimes
from whisk.protocol.json import loads

SIM_DURATION = "__sim_duration_s"
SIM_CPU = "__sim_cpu_s"


@dataclass(slots=True)
class _Job:
    remaining: float  # fraction of the call still to do (1 -> 0)
    cpu: float  # CPU seconds the whole call needs
    wait: float  # seconds the whole call waits (not on the CPU)
    group: frozenset[int]
    done: asyncio.Future[None]
    jid: int = 0
    weight: int = DEFAULT_CPU_WEIGHT  # its container's cgroup cpu.weight
    outside: bool = False  # the engine's work, beside the calls' group (see SimulatedCpu)


def stretch(jobs: list[_Job], cores: int) -> float:
    """The CPU stretch factor ``a >= 1`` of one group: ``sum(c / (w + c a)) = cores``.

    Newton's method: the left side, ``sum 1 / (x + a)`` with ``x = w / c``, is convex and
    decreasing in ``a``; we start left of the root, at Jensen's bound ``n / cores - mean x``
    (exact when the x are equal), so every step stays left of it and the error falls
    quadratically (a few steps, where bisection took a hundred passes over the calls)."""
    parts = [(j.cpu, j.wait) for j in jobs if j.cpu > 0]
    demand = sum(c / (w + c) for c, w in parts)
    if demand <= cores:
        return 1.0
    if all(w == 0 for _, w in parts):
        return demand / cores  # pure CPU-bound calls: exact processor sharing
    xs = [w / c for c, w in parts]
    a = max(1.0, len(xs) / cores - sum(xs) / len(xs))
    for _ in range(200):
        excess, slope = -float(cores), 0.0
        for x in xs:
            d = 1.0 / (x + a)
            excess += d
            slope -= d * d
        step = excess / slope  # <= 0: excess >= 0 left of the root
        a -= step
        if -step <= 1e-12 * a:
            break
    return a


def weighted_speeds(jobs: list[_Job], cores: int) -> list[float]:
    """The CPU speed (share of a core while it computes) of each job of one group whose
    containers have different ``cpu.weight``: weighted water-filling, as CFS with one
    cgroup per container shares cores, ``s_i = min(1, λ weight_i)`` with ``λ`` such that
    the calls' CPU use, ``sum c / (w + c / s)``, equals the cores (every call at full
    speed if it fits). A weight-1 call beside weight-10000 ones still gets its
    ``1 / total`` of a core: CFS is not a strict priority, and neither is this."""
    full = sum(j.cpu / (j.wait + j.cpu) for j in jobs if j.cpu > 0)
    if full <= cores:
        return [1.0] * len(jobs)
    if all(j.wait == 0 for j in jobs):  # CPU-bound: exact, capping the heaviest in turn
        order = sorted(range(len(jobs)), key=lambda i: -jobs[i].weight)
        rest, level = float(sum(j.weight for j in jobs)), 0.0
        for capped, i in enumerate(order):
            level = (cores - capped) / rest
            if level * jobs[i].weight <= 1.0:
                break
            rest -= jobs[i].weight
        return [min(1.0, level * j.weight) for j in jobs]

    def used(level: float) -> float:
        total = 0.0
        for j in jobs:
            if j.cpu > 0:
                speed = min(1.0, level * j.weight)
                total += j.cpu / (j.wait + j.cpu / speed)
        return total

    lo, hi = 0.0, 1.0 / min(j.weight for j in jobs)  # used(hi) = full > cores
    for _ in range(100):
        mid = (lo + hi) / 2
        if used(mid) > cores:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-13 * hi:
            break
    return [min(1.0, hi * j.weight) for j in jobs]


class SimulatedCpu:
    """Processor sharing within each group of cores (groups are assumed not to overlap),
    weighted by the containers' ``cpu.weight`` where they differ.

    Work *outside* the calls (a container engine's, creating a container) is a job that
    weighs as much as the calls beside it together: the calls' cgroups sit in one group of
    the default weight, as does each engine process, so the kernel shares the cores between
    the group and each such process alike, whatever the calls' own weights."""

    def __init__(self) -> None:
        self._jobs: dict[int, _Job] = {}
        self._held: dict[int, _Job] = {}  # frozen (paused containers)
        self._ids = itertools.count()
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._due: list[int] = []  # the calls the pending timer finishes
        self._rates_now: dict[int, float] = {}  # of the calls in ``_jobs`` as they are
        self.busy_core_seconds = 0.0

    def _rates(self) -> dict[int, float]:
        """Fraction of its work each call does per second."""
        groups: dict[frozenset[int], list[_Job]] = {}
        for job in self._jobs.values():
            groups.setdefault(job.group, []).append(job)
        for jobs in groups.values():
            if any(j.outside for j in jobs):
                calls = sum(j.weight for j in jobs if not j.outside) or DEFAULT_CPU_WEIGHT
                for j in jobs:
                    if j.outside:
                        j.weight = calls
        # No more calls than cores: their demand fits (each needs at most one core).
        factor: dict[frozenset[int], float] = {}
        rates: dict[int, float] = {}
        for g, jobs in groups.items():
            if len(jobs) <= len(g) or len({j.weight for j in jobs}) == 1:
                factor[g] = 1.0 if len(jobs) <= len(g) else stretch(jobs, len(g))
            else:  # weighted: each its own stretch (1 / speed)
                for j, speed in zip(jobs, weighted_speeds(jobs, len(g)), strict=True):
                    rates[j.jid] = 1.0 / (j.wait + j.cpu / speed)
        for jid, job in self._jobs.items():
            if jid not in rates:
                rates[jid] = 1.0 / (job.wait + job.cpu * factor[job.group])
        return rates

    def _advance(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        elapsed, self._last = now - self._last, now
        if elapsed <= 0:
            return
        # The rates set by the last _reschedule: every change of the running calls
        # advances first and reschedules after, so they are the rates since ``_last``.
        for jid, rate in self._rates_now.items():
            job = self._jobs[jid]
            job.remaining -= elapsed * rate
            self.busy_core_seconds += elapsed * rate * job.cpu

    def _reschedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """Finish the calls that are done and set the timer for the next to finish.

        Completion is decided on time, not on the float left in ``remaining``: the calls
        whose finish time is the timer's are finished when it fires, even if the clock's
        resolution at that value made the step smaller than their rate says (late in a
        long trace ``remaining / rate`` may be below one ulp of the clock, so the tick
        would run at the same time and nothing would ever progress)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._due = []
        for jid in [j for j, job in self._jobs.items() if job.remaining <= 1e-12]:
            self._jobs.pop(jid).done.set_result(None)
        self._rates_now = rates = self._rates()
        if not self._jobs:
            return
        left = {j: self._jobs[j].remaining / r for j, r in rates.items()}
        delay = min(left.values())
        # Calls due within a nanosecond of the first finish together (no extra event).
        self._due = [j for j, t in left.items() if t <= delay + 1e-9]
        self._timer = loop.call_at(loop.time() + delay, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._advance(loop)
        for jid in self._due:  # their time has come, whatever float is left
            job = self._jobs.get(jid)
            if job is not None:
                job.remaining = 0.0
        self._reschedule(loop)

    def submit(
        self,
        work_s: float,
        cores: frozenset[int],
        cpu_s: float | None = None,
        weight: int = DEFAULT_CPU_WEIGHT,
        outside: bool = False,
    ) -> _Job:
        """Start a call of ``work_s`` seconds at full speed, ``cpu_s`` of them on the CPU
        (all by default), in a container of that ``cpu.weight`` (``outside``: the engine's
        work, weighed as the calls beside it); await it with :meth:`wait`."""
        work_s = max(0.0, work_s)
        cpu = work_s if cpu_s is None else min(max(0.0, cpu_s), work_s)
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        job = _Job(1.0, cpu, work_s - cpu, cores, done, next(self._ids), weight, outside)
        if work_s == 0:
            job.remaining = 0.0
            done.set_result(None)
            return job
        self._advance(loop)
        self._jobs[job.jid] = job
        self._reschedule(loop)
        return job

    async def wait(self, job: _Job) -> None:
        """Until the submitted call is done; cancelled, it stops using the CPU."""
        try:
            await job.done
        finally:
            self._held.pop(job.jid, None)
            if job.jid in self._jobs:  # cancelled (timeout): stop charging the CPU for it
                loop = asyncio.get_running_loop()
                self._advance(loop)
                del self._jobs[job.jid]
                self._reschedule(loop)

    async def run(self, work_s: float, cores: frozenset[int], cpu_s: float | None = None) -> None:
        """A call of ``work_s`` seconds at full speed, ``cpu_s`` of them on the CPU."""
        await self.wait(self.submit(work_s, cores, cpu_s))

    def engine_group(self, cores: frozenset[int]) -> frozenset[int]:
        """Where the engine's work runs among ``cores``: beside calls that share them all,
        else on the core with the fewest calls (the kernel's choice for a new task), so
        that groups never overlap."""
        groups = [j.group for j in self._jobs.values()]
        if cores in groups or not groups:
            return cores
        return frozenset({min(sorted(cores), key=lambda c: groups.count(frozenset({c})))})

    def hold(self, job: _Job) -> None:
        """Freeze a submitted call (its container is paused): it makes no progress and
        uses no CPU until :meth:`release`."""
        if job.jid in self._jobs:
            loop = asyncio.get_running_loop()
            self._advance(loop)
            del self._jobs[job.jid]
            self._held[job.jid] = job
            self._reschedule(loop)

    def release(self, job: _Job) -> None:
        if self._held.pop(job.jid, None) is not None:
            loop = asyncio.get_running_loop()
            self._advance(loop)
            self._jobs[job.jid] = job
            self._reschedule(loop)

    def move(self, job: _Job, cores: frozenset[int]) -> None:
        """The call's container was given other cores (a resume elsewhere)."""
        if job.jid in self._jobs:
            loop = asyncio.get_running_loop()
            self._advance(loop)
            job.group = cores
            self._reschedule(loop)
        else:
            job.group = cores

    def reweigh(self, job: _Job, weight: int) -> None:
        """The call's container was given another ``cpu.weight``."""
        if job.jid in self._jobs and job.weight != weight:
            loop = asyncio.get_running_loop()
            self._advance(loop)
            job.weight = weight
            self._reschedule(loop)
        else:
            job.weight = weight

    def done(self, job: _Job, loop: asyncio.AbstractEventLoop) -> float:
        """The fraction of the call done by now (its CPU and waiting parts interleave
        evenly, so that much of each)."""
        if job.jid in self._jobs:
            self._advance(loop)
        return 1.0 - max(0.0, job.remaining)


class SimulatedContainer:
    def __init__(self, backend: SimulatedBackend, spec: ContainerSpec) -> None:
        self.name = spec.name
        self._backend = backend
        self._cores: frozenset[int] = frozenset({0})
        self._weight = DEFAULT_CPU_WEIGHT  # its cgroup's cpu.weight: kept from call to call
        self._cpu = CpuTimes(0.0)  # as of the end of the last /run
        self._running: tuple[_Job, float] | None = None  # the call in /run, since when
        self._paused_at: float | None = None
        self._paused_s = 0.0  # of the call in /run: frozen time is no wait for the CPU

    async def init(self, body: bytes, timeout_s: float) -> HttpResult:
        if self._backend.init_s:
            await asyncio.sleep(self._backend.init_s)
        return HttpResult(200, b'{"ok":true}', self._backend.init_s)

    async def run(self, body: bytes, timeout_s: float) -> HttpResult:
        value = loads(body).get("value") or {}
        if not isinstance(value, dict):
            value = {}
        work = float(value.get(SIM_DURATION, 0.0))
        cpu = min(work, float(value.get(SIM_CPU, work)))
        loop = asyncio.get_running_loop()
        started = loop.time()
        job = self._backend.cpu.submit(work, self._cores, cpu, self._weight)
        self._running = (job, started)
        self._paused_s = 0.0
        try:
            async with asyncio.timeout(timeout_s):
                await self._backend.cpu.wait(job)
        finally:
            self._running = None
        # Time beyond the call's own is time its CPU part waited for the shared core.
        waited = max(0.0, loop.time() - started - work - self._paused_s)
        self._cpu = CpuTimes(self._cpu.used + max(0.0, cpu), self._cpu.waited + waited)
        return HttpResult(200, b'{"ok":true}', work)

    async def assign_cores(self, cores: frozenset[int]) -> None:
        self._cores = cores
        if self._running is not None:
            self._backend.cpu.move(self._running[0], cores)

    async def set_cpu_weight(self, weight: int) -> None:
        """A cgroup write: ``weight_s`` of the invoker's time, then the call's share
        changes."""
        check_cpu_weight(weight)
        if self._backend.weight_s:
            await asyncio.sleep(self._backend.weight_s)
        self._weight = weight
        if self._running is not None:
            self._backend.cpu.reweigh(self._running[0], weight)

    async def cpu_times(self) -> CpuTimes | None:
        """Counters as a real container's: during /run, the CPU the call has used so far
        and the time it has waited for the shared core."""
        if self._running is None:
            return self._cpu
        job, started = self._running
        loop = asyncio.get_running_loop()
        done = self._backend.cpu.done(job, loop)
        now = loop.time()
        frozen = self._paused_s + (now - self._paused_at if self._paused_at is not None else 0.0)
        elapsed = now - started - frozen
        waited = max(0.0, elapsed - done * (job.cpu + job.wait))
        return CpuTimes(self._cpu.used + done * job.cpu, self._cpu.waited + waited)

    async def read_logs(
        self, limit_bytes: int, wait_for_sentinels: bool
    ) -> tuple[list[LogLine], bool]:
        return [], True

    async def pause(self) -> None:
        if self._backend.pause_s:
            await asyncio.sleep(self._backend.pause_s / 2)
        if self._running is not None:
            self._backend.cpu.hold(self._running[0])
            self._paused_at = asyncio.get_running_loop().time()

    async def resume(self) -> None:
        if self._backend.pause_s:
            await asyncio.sleep(self._backend.pause_s / 2)
        if self._running is not None:
            self._backend.cpu.release(self._running[0])
        if self._paused_at is not None:
            self._paused_s += asyncio.get_running_loop().time() - self._paused_at
            self._paused_at = None

    async def was_oom_killed(self) -> bool:
        return False

    async def memory_usage(self) -> int | None:
        footprint = self._backend.footprint_mb
        return None if footprint is None else footprint << 20

    async def destroy(self) -> None:
        self._backend.live -= 1


class SimulatedBackend:
    """Containers cost ``cold_start_s`` to create (``create_cpu_s`` of it the engine's CPU
    on ``engine_cores``, beside the calls: it then takes longer while they load them),
    ``init_s`` to initialise,
    ``pause_s`` to pause and resume and ``weight_s`` to set a ``cpu.weight`` (a write to
    the container's cgroup, of the order of 30 µs); an idle one is measured using
    ``footprint_mb`` of memory (None: not measurable, so the pool counts it at its limit)."""

    name = "simulated"
    weights_among_calls = True  # the simulated CPU shares among the calls only

    def __init__(
        self,
        cold_start_s: float = 0.0,
        create_cpu_s: float = 0.0,
        engine_cores: frozenset[int] = frozenset({0}),
        init_s: float = 0.0,
        pause_s: float = 0.0,
        weight_s: float = 0.0,
        footprint_mb: int | None = None,
    ) -> None:
        self.cold_start_s = cold_start_s
        self.create_cpu_s = create_cpu_s
        self.engine_cores = engine_cores
        self.init_s = init_s
        self.pause_s = pause_s
        self.weight_s = weight_s
        self.footprint_mb = footprint_mb
        self.cpu = SimulatedCpu()
        self.created = 0
        self.live = 0

    def supports(self, kind: str) -> bool:
        return True

    async def start(self) -> None:
        pass

    async def create(self, spec: ContainerSpec) -> SimulatedContainer:
        if self.create_cpu_s:
            cores = self.cpu.engine_group(self.engine_cores)
            work = max(self.cold_start_s, self.create_cpu_s)
            await self.cpu.wait(self.cpu.submit(work, cores, self.create_cpu_s, outside=True))
        elif self.cold_start_s:
            await asyncio.sleep(self.cold_start_s)
        self.created += 1
        self.live += 1
        return SimulatedContainer(self, spec)

    def share_socket(self, path: str) -> None:
        """Simulated containers reach nothing."""

    async def remove_leftovers(self) -> int:
        return 0

    async def close(self) -> None:
        pass
