"""KaaS experiment: shared executors (LALB+O3, CFS-Affinity) vs Exclusive workers vs clients.

Closed-loop clients, each its own function with its own model, send their next request as
soon as the last returns (the KaaS paper's throughput experiment). Part 1 runs it live on
virtual devices with real worker processes, where an Exclusive switch really kills the worker
and cold-starts a new one (process start + ``import torch`` + ``torch.load``); part 2 runs it
in the simulator with the cold-start time measured in part 1. Clients go from 1 to 8x the
device count. Printed: throughput, p50/p90 latency, Exclusive's collapse relative to the
shared executors, and the GPU-time share per client (Jain's index) each policy achieves.

    .venv/bin/python benchmarks/bench_gpu_kaas.py                 # ~2 minutes
    .venv/bin/python benchmarks/bench_gpu_kaas.py --full          # ~14 minutes (docs/gpu.md)
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from prometheus_client import CollectorRegistry

from gpu import testmodels
from gpu.config import GpuConfig
from gpu.hosttier import content_key
from gpu.model_table import COLD_PROCESS_S, MODEL_TABLE, ModelCost
from gpu.pool import GpuPool
from gpu.simulator import SimConfig, simulate_closed
from gpu.stats import percentile

POLICIES = ("lalbo3", "cfs-affinity", "exclusive")


def jain(shares: list[float]) -> float:
    return sum(shares) ** 2 / (len(shares) * sum(s * s for s in shares)) if shares else 1.0


async def live_point(pool: GpuPool, keys: list[str], clients: int, seconds: float) -> dict:
    x = io.BytesIO()
    torch.save({"args": (torch.randn(4, 512),), "kwargs": {}}, x)
    payload = x.getvalue()
    lat: list[float] = []
    gpu: Counter = Counter()
    colds: list[float] = []
    t0 = time.perf_counter()
    end = t0 + seconds

    async def client(i: int) -> None:
        key = keys[i % len(keys)]
        while time.perf_counter() < end:
            r = await pool.infer(key, payload, function=f"client-{i}")
            lat.append(r.latency_s)
            gpu[i] += r.upload_s + r.infer_s
            if r.cold_start:
                colds.append(r.upload_s)

    await asyncio.gather(*(client(i) for i in range(clients)))
    span = time.perf_counter() - t0
    lat.sort()
    total = sum(gpu.values()) or 1.0
    return {
        "clients": clients,
        "throughput": len(lat) / span,
        "p50": percentile(lat, 50),
        "p90": percentile(lat, 90),
        "jain": jain([gpu[i] / total for i in range(clients)]),
        "colds": colds,
    }


async def live(args: argparse.Namespace) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """The sweep over replicas of one model (distinct weights), then one fairness point."""
    out: dict[str, list[dict]] = {}
    fair: dict[str, dict] = {}
    n_fair = 4 * args.devices
    sizes = [args.replica_mb] * max(args.clients) + [4 + 4 * (i % 4) for i in range(n_fair)]
    for policy in POLICIES:
        cfg = GpuConfig(devices=f"virtual:{args.devices}", memory_mb=args.device_mb, policy=policy)
        async with GpuPool(cfg, registry=CollectorRegistry()) as pool:
            keys = []
            for i, mb in enumerate(sizes):
                data = testmodels.model_bytes(testmodels.mlp(mb, seed=200 + i))
                keys.append(content_key(data))
                await pool.register(keys[-1], data)
            out[policy] = []
            replicas, mixed = keys[: max(args.clients)], keys[max(args.clients) :]
            for n in args.clients:
                r = await live_point(pool, replicas, n, args.seconds)
                out[policy].append(r)
                print(
                    f"  live {policy:>12} clients={n:3d} thr={r['throughput']:7.2f}/s "
                    f"p50={r['p50'] * 1e3:8.1f}ms p90={r['p90'] * 1e3:8.1f}ms "
                    f"jain={r['jain']:.3f} cold_starts={len(r['colds'])}",
                    flush=True,
                )
            fair[policy] = await live_point(pool, mixed, n_fair, args.seconds)
    return out, fair


def sim(
    args: argparse.Namespace,
    cold_process_s: float,
    table: tuple[ModelCost, ...],
    clients: list[int],
) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for policy in POLICIES:
        out[policy] = []
        for n in clients:
            cfg = SimConfig(
                policy=policy,
                gpus=args.sim_gpus,
                gpu_memory_gb=args.sim_gpu_memory_gb,
                duration_s=args.sim_seconds,
                batch=1,
                miss_cost="host-tier",
                cold_process_s=cold_process_s,
                table=table,
            )
            r = simulate_closed(cfg, n)
            out[policy].append(
                {
                    "clients": n,
                    "throughput": r["throughput_rps"],
                    "p50": r["p50_latency_s"],
                    "p90": r["p90_latency_s"],
                    "jain": r.get("jain_fairness", 1.0),
                    "share_min": r.get("gpu_share_min", 1.0),
                    "share_max": r.get("gpu_share_max", 1.0),
                }
            )
    return out


def report(title: str, res: dict[str, list[dict]], devices: int) -> None:
    print(f"\n== {title}")
    print(f"{'clients':>7} " + " ".join(f"{p:>31}" for p in POLICIES) + "   excl/lalbo3 thr  p90")
    print(f"{'':>7} " + " ".join(f"{'thr/s   p50 ms   p90 ms  jain':>31}" for _ in POLICIES))
    for i, n in enumerate(r["clients"] for r in res[POLICIES[0]]):
        cells = []
        for p in POLICIES:
            r = res[p][i]
            cells.append(
                f"{r['throughput']:7.2f} {r['p50'] * 1e3:8.1f} {r['p90'] * 1e3:8.1f} "
                f"{r['jain']:5.3f}"
            )
        e, s = res["exclusive"][i], res["lalbo3"][i]
        mark = "  <- more clients than devices" if n == devices + 1 else ""
        print(
            f"{n:>7} " + " ".join(f"{c:>31}" for c in cells)
            + f"   {e['throughput'] / s['throughput']:8.3f}  {e['p90'] / s['p90']:6.1f}x{mark}"
        )  # fmt: skip
    worst = min(range(len(res["exclusive"])), key=lambda i: _ratio(res, i))
    n = res["exclusive"][worst]["clients"]
    print(
        f"Exclusive at {n} clients: {1 / _ratio(res, worst):.1f}x less throughput than LALB+O3 "
        f"(KaaS: eTasks fall 40-140x after 5 clients on 4 GPUs)"
    )


def _ratio(res: dict[str, list[dict]], i: int) -> float:
    return res["exclusive"][i]["throughput"] / max(1e-9, res["lalbo3"][i]["throughput"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--device-mb", type=int, default=256)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--seconds", type=float, default=5.0, help="live seconds per point")
    ap.add_argument("--sim-gpus", type=int, default=4)
    ap.add_argument("--sim-gpu-memory-gb", type=float, default=2.0)
    ap.add_argument("--sim-clients", type=int, nargs="+", default=[1, 2, 4, 5, 8, 16, 32])
    ap.add_argument("--sim-seconds", type=float, default=300.0)
    ap.add_argument("--sim-model", default="resnet50", help="a gpu/model_table.py row")
    ap.add_argument("--replica-mb", type=float, default=8.0, help="live replica model size")
    ap.add_argument("--skip-live", action="store_true")
    ap.add_argument("--full", action="store_true", help="longer points, clients 1..16 step 1")
    args = ap.parse_args()
    if args.full:
        args.clients = list(range(1, 17))
        args.seconds = 15.0
        args.sim_seconds = 1800.0
    torch.set_num_threads(1)
    cold = COLD_PROCESS_S
    if not args.skip_live:
        print(f"live: {args.devices} virtual devices, {args.seconds:g}s per point", flush=True)
        res, fair = asyncio.run(live(args))
        report(f"live, {args.replica_mb:g} MiB MLP replicas (closed loop)", res, args.devices)
        print(f"\n== live fairness: {4 * args.devices} clients, MLPs of 4-16 MiB (unequal costs)")
        for p, r in fair.items():
            print(
                f"{p:>12}: GPU-time Jain index {r['jain']:.3f}, throughput {r['throughput']:.1f}/s"
            )
        colds = [c for r in res["exclusive"] for c in r["colds"]]
        if colds:
            cold = statistics.median(colds)
            print(f"measured Exclusive cold start (restart + torch.load): median {cold:.2f}s "
                  f"over {len(colds)}")  # fmt: skip
    replica = tuple(m for m in MODEL_TABLE if m.name == args.sim_model)
    res = sim(args, cold, replica, args.sim_clients)
    report(
        f"simulator: {args.sim_model} replicas, {args.sim_gpus} GPUs x "
        f"{args.sim_gpu_memory_gb:g} GB, cold start {cold:.2f}s + model load, "
        f"{args.sim_seconds:g}s per point",
        res,
        args.sim_gpus,
    )
    n_fair = 8 * args.sim_gpus
    fair = sim(args, cold, MODEL_TABLE, [n_fair])
    print(f"\n== simulator fairness: {n_fair} clients over the whole model table (unequal costs)")
    for p, (r,) in fair.items():
        print(
            f"{p:>12}: GPU-time share per client {r['share_min']:.3f}-{r['share_max']:.3f} "
            f"(fair: {1 / n_fair:.3f}), Jain {r['jain']:.3f}, throughput {r['throughput']:.1f}/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
