"""Discrete-event runs of the GPU pool: the real dispatcher, scheduler and cache on virtual time.

Only the leaf is swapped: ``SimBackend`` sleeps for the model table's upload and inference
times instead of talking to device workers. Everything else is the production code, driven by
an asyncio ``VirtualTimeLoop`` that jumps to the next timer when idle.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from gpu.dispatcher import Dispatcher, JobResult
from gpu.estimates import DeviceTypePrior, Estimator
from gpu.kaas import examples
from gpu.kaas.format import parse
from gpu.kaas.simulated import SimKaas, SimRun
from gpu.model_table import COLD_PROCESS_S, MODEL_TABLE, PCIE_PINNED_BW, PROFILES, ModelCost
from gpu.policies import DEFAULT_AFFINITY_PENALTY, DEFAULT_O3_LIMIT, make_scheduler
from gpu.scheduler import DeviceSlot, Dispatch, Request
from gpu.stats import PoolStats, percentile
from whisk.clock import Clock, LoopClock, VirtualTimeLoop
from whisk.supervisor import child

MissCost = Literal["cold-process", "host-tier"]

T = TypeVar("T")


@dataclass
class SimBackend:
    """Timed stand-in for the device workers.

    ``host-tier``: a miss is a copy of the weights over PCIe from pinned host memory (this
    pool's design). ``cold-process``: a miss starts a GPU process that imports the framework
    and deserialises the model before the copy (the LALB paper's GPU Manager, and what the
    Exclusive policy pays on every switch).
    """

    costs: dict[str, ModelCost]
    miss_cost: MissCost = "cold-process"
    pcie_bw: float = PCIE_PINNED_BW
    cold_process_s: float = COLD_PROCESS_S

    def copy_s(self, m: ModelCost) -> float:
        return m.upload_s or m.size_bytes / self.pcie_bw

    def cold_s(self, m: ModelCost) -> float:
        return self.cold_process_s + m.load_s + self.copy_s(m)

    async def execute(self, dispatch: Dispatch) -> JobResult:
        m = self.costs[dispatch.request.model]
        if dispatch.cold_start or (not dispatch.hit and self.miss_cost == "cold-process"):
            upload = self.cold_s(m)
        elif not dispatch.hit:
            upload = self.copy_s(m)
        else:
            upload = 0.0
        infer = m.infer_s * max(1, dispatch.request.batch)
        if upload:
            await asyncio.sleep(upload)
        await asyncio.sleep(infer)
        return JobResult(None, upload, infer)


@dataclass
class SimConfig:
    policy: str = "lalbo3"
    gpus: int = 12
    gpu_memory_gb: float = 0.6
    working_set: int = 15
    rate_per_min: float = 325.0
    duration_s: float = 1800.0
    seed: int = 1
    o3_limit: int = DEFAULT_O3_LIMIT
    zipf: float = 0.0
    batch: int = 8
    miss_cost: MissCost = "cold-process"
    affinity_penalty: float = DEFAULT_AFFINITY_PENALTY
    cold_process_s: float = COLD_PROCESS_S  # process start + framework import
    table: Sequence[ModelCost] = field(default_factory=lambda: MODEL_TABLE)
    pcie_bw: float = PCIE_PINNED_BW

    @classmethod
    def for_profile(cls, profile: str, **kw: Any) -> SimConfig:
        """A run on one of ``model_table.PROFILES`` (``cpu``: this machine, ``h200``)."""
        p = PROFILES[profile]
        return cls(table=p.table, pcie_bw=p.pcie_bw, cold_process_s=p.cold_process_s, **kw)


def working_set(cfg: SimConfig) -> dict[str, ModelCost]:
    """``W`` distinct models; past the table's end its rows repeat under new ids."""
    out: dict[str, ModelCost] = {}
    for i in range(cfg.working_set):
        base = cfg.table[i % len(cfg.table)]
        key = f"{base.name}#{i // len(cfg.table)}" if i >= len(cfg.table) else base.name
        out[key] = replace(base, name=key)
    return out


def _popularity(keys: list[str], s: float, rng: random.Random) -> list[float]:
    order = keys[:]
    rng.shuffle(order)  # popularity independent of size
    rank = {k: i + 1 for i, k in enumerate(order)}
    return [1.0 / rank[k] ** s for k in keys]


def _new_run(cfg: SimConfig, clock: Clock) -> tuple[Dispatcher, PoolStats, dict[str, ModelCost]]:
    costs = working_set(cfg)
    cap = int(cfg.gpu_memory_gb * 1e9)
    slots = [DeviceSlot(i, cap, "sim") for i in range(cfg.gpus)]
    est = Estimator(priors={"sim": DeviceTypePrior(copy_bw=cfg.pcie_bw, compute_bw=cfg.pcie_bw)})
    sched = make_scheduler(
        cfg.policy,
        slots,
        clock,
        estimator=est,
        o3_limit=cfg.o3_limit,
        affinity_penalty=cfg.affinity_penalty,
    )
    stats = PoolStats(cfg.gpus, start=clock.now())
    backend = SimBackend(costs, cfg.miss_cost, cfg.pcie_bw, cfg.cold_process_s)
    return Dispatcher(sched, backend, clock, stats=stats), stats, costs


def run_virtual(make: Callable[[Clock], Coroutine[Any, Any, T]]) -> T:
    """Run ``make(clock)`` to its end on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(make(LoopClock(loop)))
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def simulate_open(cfg: SimConfig) -> dict:
    """Poisson arrivals at ``rate_per_min`` for ``duration_s``, then drain; one summary."""

    async def run(clock: Clock) -> dict:
        disp, stats, costs = _new_run(cfg, clock)
        rng = random.Random(cfg.seed)
        keys = list(costs)
        weights = _popularity(keys, cfg.zipf, rng)
        jobs: list[asyncio.Task] = []
        rate = cfg.rate_per_min / 60.0
        t = 0.0
        while True:
            t += rng.expovariate(rate)
            if t >= cfg.duration_s:
                break
            await asyncio.sleep(max(0.0, t - (clock.now() - stats.start)))
            key = rng.choices(keys, weights)[0]
            req = Request(key, costs[key].size_bytes, cfg.batch, f"fn-{key}", clock.now())
            jobs.append(child(disp.submit(req)))
        await asyncio.gather(*jobs)
        return _summary(cfg, stats, clock.now(), disp)

    return run_virtual(run)


def simulate_closed(
    cfg: SimConfig, clients: int, think_s: float = 0.0, *, warm: bool = False
) -> dict:
    """``clients`` closed-loop clients, each its own function with its own model (KaaS's
    throughput experiment): each sends its next request as soon as the last one returns.
    ``warm``: one request per client first, not counted in throughput and latencies (models
    loaded, Exclusive's workers started), then ``duration_s`` from there, as the live runs."""

    async def run(clock: Clock) -> dict:
        base = SimConfig(**{**cfg.__dict__, "working_set": clients})
        disp, stats, costs = _new_run(base, clock)
        keys = list(costs)

        async def client(i: int, end: float) -> None:
            key = keys[i]
            while True:
                req = Request(key, costs[key].size_bytes, cfg.batch, f"client-{i}", clock.now())
                await disp.submit(req)
                if think_s:
                    await asyncio.sleep(think_s)
                if clock.now() >= end:
                    return

        t0, skip = stats.start, 0
        if warm:
            await asyncio.gather(*(client(i, t0) for i in range(clients)))
            t0, skip = clock.now(), len(stats.latencies)  # in completion order
        await asyncio.gather(*(client(i, t0 + cfg.duration_s) for i in range(clients)))
        out = _summary(base, stats, clock.now(), disp)
        out["clients"] = clients
        if warm:
            lat = sorted(stats.latencies[skip:])
            out["throughput_rps"] = len(lat) / max(1e-9, clock.now() - t0)
            out["p50_latency_s"] = percentile(lat, 50)
            out["p90_latency_s"] = percentile(lat, 90)
            out["p99_latency_s"] = percentile(lat, 99)
        return out

    return run_virtual(run)


@dataclass(frozen=True)
class KTaskSimConfig:
    """The kTask side of the throughput experiment: each client its own cGEMM weights W
    (``size`` x ``size`` complex, the constants), a request Y = X . W on ``rows`` rows."""

    devices: int = 4
    constant_budget: int = 350_000_000  # bytes of constants per device
    size: int = 3578  # K = N
    rows: int = 64  # M
    kernel_s: float = 0.00381
    copy_bytes_per_s: float = PCIE_PINNED_BW
    duration_s: float = 10.0

    @property
    def weight_bytes(self) -> int:
        return 2 * self.size * self.size * 4


def simulate_ktasks_closed(cfg: KTaskSimConfig, clients: int, *, warm: bool = False) -> dict:
    """``clients`` closed-loop clients sending kTasks through the production queue and
    constant cache (``gpu.kaas.simulated``), as ``simulate_closed`` sends model requests;
    ``warm`` as there (each client's constants copied once before the counted span)."""

    async def run(clock: Clock) -> dict:
        sim = SimKaas(
            cfg.devices,
            cfg.constant_budget,
            clock,
            kernel_s=cfg.kernel_s,
            copy_bytes_per_s=cfg.copy_bytes_per_s,
        )
        runs: list[SimRun] = []
        tasks = []
        for c in range(clients):
            doc = examples.cgemm(
                cfg.rows, cfg.size, cfg.size, weights=f"c{c}/W", x=f"c{c}/X", y=f"c{c}/Y"
            )
            tasks.append(parse(doc))
            sim.put(f"c{c}/W/re")
            sim.put(f"c{c}/W/im")

        async def client(c: int, end: float) -> None:
            while True:
                sim.put(f"c{c}/X/re")
                sim.put(f"c{c}/X/im")
                runs.append(await sim.run(tasks[c], f"client-{c}"))
                if clock.now() >= end:
                    return

        t0 = clock.now()
        if warm:
            await asyncio.gather(*(client(c, t0) for c in range(clients)))
            t0 = clock.now()
            runs.clear()
        cache = sim.constants
        counts = cache.hits, cache.misses, cache.evictions
        await asyncio.gather(*(client(i, t0 + cfg.duration_s) for i in range(clients)))
        lat = sorted(r.finished - r.submitted for r in runs)
        return {
            "clients": clients,
            "requests": len(runs),
            "throughput_rps": len(runs) / max(1e-9, clock.now() - t0),
            "p50_latency_s": percentile(lat, 50),
            "p90_latency_s": percentile(lat, 90),
            "constant_hits": cache.hits - counts[0],
            "constant_misses": cache.misses - counts[1],
            "constant_evictions": cache.evictions - counts[2],
            "copy_s": sum(r.copy_s for r in runs),
            "failures": sim.failures,
        }

    return run_virtual(run)


def _summary(cfg: SimConfig, stats: PoolStats, end: float, disp: Dispatcher) -> dict:
    out: dict[str, Any] = {
        "policy": disp.scheduler.name,
        "o3_limit": cfg.o3_limit if cfg.policy == "lalbo3" else 0,
        "gpus": cfg.gpus,
        "gpu_memory_gb": cfg.gpu_memory_gb,
        "working_set": cfg.working_set,
        "rate_per_min": cfg.rate_per_min,
        "batch": cfg.batch,
        "miss_cost": cfg.miss_cost,
        "seed": cfg.seed,
    }
    out.update(stats.summary(end))
    share = stats.gpu_share()
    if share:
        vals = list(share.values())
        out["gpu_share_min"] = min(vals)
        out["gpu_share_max"] = max(vals)
        out["jain_fairness"] = sum(vals) ** 2 / (len(vals) * sum(v * v for v in vals))
    return out
