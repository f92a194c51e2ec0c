"""Live GPU pool on virtual devices: hit vs miss latency, then LB vs LALB vs LALB+O3.

Real worker processes and real torch models (MLPs of chosen sizes) on CPU-backed virtual
devices. Part 1 times one model's miss (host tier → device copy) against its hit. Part 2
replays one seeded Poisson arrival sequence over a mixed working set against a fresh pool per
policy and prints latency, miss ratio and the ratios to LB. Requests enter through
``GpuPool.infer`` (the socket adds ~1 ms per call, printed separately).

With ``--gpu`` the devices are the machine's real GPUs (found through NVML), each given a model
budget of ``--device-mb`` (part 1: two of its models) so that the same working set overflows it.

    .venv/bin/python benchmarks/bench_gpu_pool.py              # ~2 minutes on 2 vCPUs
    python3 benchmarks/bench_gpu_pool.py --gpu --rate 100      # on a GPU machine
"""

from __future__ import annotations

import argparse
import asyncio
import io
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from prometheus_client import CollectorRegistry

from gpu import client, testmodels
from gpu.config import GpuConfig
from gpu.devices import budget_fraction
from gpu.hosttier import content_key
from gpu.pool import GpuPool
from gpu.stats import percentile


def call_bytes(x: torch.Tensor) -> bytes:
    buf = io.BytesIO()
    torch.save({"args": (x,), "kwargs": {}}, buf)
    return buf.getvalue()


def socket_hits(address: str, model: torch.nn.Module, args: argparse.Namespace) -> list[float]:
    client.install(address)
    try:
        data = testmodels.model_bytes(model)
        remote = client._remote(data, lambda: data)
        xs = torch.randn(args.batch, 512)
        remote(xs)
        out = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            remote(xs)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        client.uninstall()


def pool_config(args: argparse.Namespace, devices: int, memory_mb: float, policy: str) -> GpuConfig:
    """``devices`` virtual devices of ``memory_mb``, or with ``--gpu`` every GPU at that budget."""
    if not args.gpu:
        return GpuConfig(devices=f"virtual:{devices}", memory_mb=int(memory_mb), policy=policy)
    fraction = budget_fraction(int(memory_mb * 2**20))
    return GpuConfig(devices="nvml", memory_fraction=fraction, policy=policy)


async def hit_vs_miss(args: argparse.Namespace) -> None:
    cfg = pool_config(args, 1, args.size_mb * 2 + 8, "lalb")
    async with GpuPool(cfg, registry=CollectorRegistry()) as pool:
        big = [testmodels.mlp(args.size_mb, seed=i) for i in range(3)]
        keys = []
        for m in big:
            data = testmodels.model_bytes(m)
            keys.append(content_key(data))
            await pool.register(keys[-1], data)
        x = call_bytes(torch.randn(args.batch, 512))
        miss, hit, up, inf = [], [], [], []
        for i in range(args.repeats):
            k = keys[i % 3]  # the third model evicts the oldest: every first call misses
            r = await pool.infer(k, x)
            assert not r.hit
            miss.append(r.latency_s)
            up.append(r.upload_s)
            r = await pool.infer(k, x)
            assert r.hit
            hit.append(r.latency_s)
            inf.append(r.infer_s)
        # the same hit through the Unix socket, as an action sees it (a thread: the client
        # is synchronous and the pool's loop must keep running)
        sock = await asyncio.to_thread(socket_hits, pool.address, big[0], args)
    med = statistics.median
    print(f"== hit vs miss: {args.size_mb} MiB MLP, batch {args.batch}, median of {args.repeats}")
    print(f"miss latency {med(miss) * 1e3:7.1f} ms  (upload {med(up) * 1e3:.1f} ms)")
    print(f"hit  latency {med(hit) * 1e3:7.1f} ms  (inference {med(inf) * 1e3:.1f} ms)")
    print(f"hit via socket {med(sock) * 1e3:5.1f} ms;  miss/hit = {med(miss) / med(hit):.1f}x")


async def workload(args: argparse.Namespace, policy: str) -> dict:
    rng = random.Random(args.seed)
    sizes = [
        args.min_mb + i * (args.max_mb - args.min_mb) / (args.models - 1)
        for i in range(args.models)
    ]
    cfg = pool_config(args, args.devices, args.device_mb, policy)
    async with GpuPool(cfg, registry=CollectorRegistry()) as pool:
        keys = []
        for i, mb in enumerate(sizes):
            data = testmodels.model_bytes(testmodels.mlp(mb, seed=100 + i))
            keys.append(content_key(data))
            await pool.register(keys[-1], data)
        x = call_bytes(torch.randn(args.batch, 512))
        t_start = time.perf_counter()
        t, jobs = 0.0, []
        for _ in range(args.requests):
            t += rng.expovariate(args.rate)
            delay = t - (time.perf_counter() - t_start)
            if delay > 0:
                await asyncio.sleep(delay)
            jobs.append(asyncio.create_task(pool.infer(rng.choice(keys), x, function="bench")))
        res = await asyncio.gather(*jobs)
        lat = sorted(r.latency_s for r in res)
        s = pool.stats.summary(pool.clock.now())
        return {
            "policy": policy,
            "mean": statistics.fmean(lat),
            "p50": percentile(lat, 50),
            "p99": percentile(lat, 99),
            "miss": s["miss_ratio"],
            "false": s["false_miss_ratio"],
            "busy": s["busy"],
        }


async def main_async(args: argparse.Namespace) -> None:
    await hit_vs_miss(args)
    devices = "every GPU" if args.gpu else f"{args.devices} virtual devices"
    print(
        f"\n== {args.requests} Poisson requests at {args.rate:g}/s over {args.models} models "
        f"({args.min_mb:g}-{args.max_mb:g} MiB), {devices} x "
        f"{args.device_mb} MiB, batch {args.batch}, seed {args.seed}"
    )
    print(f"{'policy':>7} {'mean ms':>8} {'p50 ms':>7} {'p99 ms':>7} {'miss':>6} {'false':>6}"
          f" {'busy':>5}  mean/LB")  # fmt: skip
    base = None
    for policy in args.policy:
        r = await workload(args, policy)
        base = base or r
        print(
            f"{policy:>7} {r['mean'] * 1e3:8.1f} {r['p50'] * 1e3:7.1f} {r['p99'] * 1e3:7.1f} "
            f"{r['miss']:6.3f} {r['false']:6.3f} {r['busy']:5.2f}  {r['mean'] / base['mean']:.2f}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=64, help="part 1 model size")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--devices", type=int, default=3)
    ap.add_argument("--device-mb", type=int, default=128)
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--min-mb", type=float, default=16)
    ap.add_argument("--max-mb", type=float, default=64)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rate", type=float, default=25.0, help="requests per second")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", nargs="+", default=["lb", "lalb", "lalbo3"])
    ap.add_argument("--gpu", action="store_true", help="the real GPUs (NVML), not virtual ones")
    args = ap.parse_args()
    torch.set_num_threads(1)
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
