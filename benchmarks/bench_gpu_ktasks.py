"""kTasks vs eTasks vs whole GPU actions: throughput as closed-loop clients grow (issue 30).

The KaaS paper's throughput experiment, live on virtual devices with real worker processes.
Every client is its own function with its own complex GEMM weights W (distinct, so distinct
cache keys) and sends its next request as soon as the last returns, each request Y = X · W on
a fresh X (real/imaginary pairs). Three ways to run it, each on a fresh pool:

- ``ktask``: a kTask (``gpu.kaas.examples.cgemm``), W a constant kept resident by the shared
  per-device executors; X put in the data layer by key, Y read back by key;
- ``etask``: the same product as a TorchScript module under the Exclusive policy (the KaaS
  eTask baseline: a device runs one function's worker; a switch cold-starts a new one);
- ``lalb``: the same module as a whole GPU action's model under LALB (the pool's default way),
  the **baseline**: the ratios printed are each way's throughput over LALB's at the same point,
  measured in the same run.

Clients go from 1 to 4x the device count. Each point starts with one request per client
(not counted: models and constants loaded, Exclusive's workers started), then runs for
``--seconds``; throughput is requests per second over that span.

    .venv/bin/python benchmarks/bench_gpu_ktasks.py                  # ~2 minutes
    .venv/bin/python benchmarks/bench_gpu_ktasks.py --seconds 10 --size 256
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch
from prometheus_client import CollectorRegistry

from gpu.config import GpuConfig
from gpu.hosttier import content_key
from gpu.kaas import examples
from gpu.kaas.spec import TensorSpec
from gpu.pool import GpuPool
from gpu.stats import percentile

WAYS = ("ktask", "etask", "lalb")
POLICY = {"ktask": "lalbo3", "etask": "exclusive", "lalb": "lalb"}


class CGemm(torch.nn.Module):
    """Y = X · W in complex arithmetic on real/imaginary pairs (as the ``cgemm`` built-in)."""

    def __init__(self, wr: torch.Tensor, wi: torch.Tensor) -> None:
        super().__init__()
        self.wr = torch.nn.Parameter(wr, requires_grad=False)
        self.wi = torch.nn.Parameter(wi, requires_grad=False)

    def forward(self, xr: torch.Tensor, xi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return xr @ self.wr - xi @ self.wi, xr @ self.wi + xi @ self.wr


def weights(client: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + client)
    return (
        rng.standard_normal((k, n)).astype(np.float32),
        rng.standard_normal((k, n)).astype(np.float32),
    )


def module_bytes(wr: np.ndarray, wi: np.ndarray) -> bytes:
    m = torch.jit.script(CGemm(torch.from_numpy(wr), torch.from_numpy(wi)))
    buf = io.BytesIO()
    torch.jit.save(m, buf)
    return buf.getvalue()


async def prepare(pool: GpuPool, way: str, clients: int, m: int, k: int, n: int) -> list[Any]:
    """Per client: its kTask document (W put as constants), or its registered model key."""
    out: list[Any] = []
    for c in range(clients):
        wr, wi = weights(c, k, n)
        if way == "ktask":
            for part, w in (("re", wr), ("im", wi)):
                pool.put(f"c{c}/W/{part}", w.tobytes(), TensorSpec((k, n), "float32"))
            out.append(examples.cgemm(m, k, n, weights="W", x="X", y="Y"))  # under c{c}/
        else:
            data = module_bytes(wr, wi)
            key = content_key(data)
            await pool.register(key, data)
            out.append(key)
    return out


async def point(
    pool: GpuPool, way: str, jobs: list[Any], clients: int, seconds: float, m: int, k: int
) -> dict[str, Any]:
    lat: list[float] = []
    rng = np.random.default_rng(7)
    xr, xi = (rng.standard_normal((m, k)).astype(np.float32) for _ in range(2))
    spec = TensorSpec((m, k), "float32")
    x = io.BytesIO()
    torch.save({"args": (torch.from_numpy(xr), torch.from_numpy(xi)), "kwargs": {}}, x)
    payload = x.getvalue()

    async def client(c: int, until: float) -> None:
        while True:
            s = time.perf_counter()
            if way == "ktask":
                pool.put(f"c{c}/X/re", xr.tobytes(), spec)
                pool.put(f"c{c}/X/im", xi.tobytes(), spec)
                reply = await pool.ktask(jobs[c], {}, namespace=f"c{c}", function=f"client-{c}")
                for out in reply["outputs"].values():
                    pool.get(f"c{c}/{out['key']}")  # the namespace's keys, as an operator
            else:
                await pool.infer(jobs[c], payload, function=f"client-{c}")
            lat.append(time.perf_counter() - s)
            if time.perf_counter() >= until:
                return

    await asyncio.gather(*(client(c, 0.0) for c in range(clients)))  # one each: warm
    lat.clear()
    t0 = time.perf_counter()
    await asyncio.gather(*(client(c, t0 + seconds) for c in range(clients)))
    span = time.perf_counter() - t0
    lat.sort()
    return {
        "throughput": len(lat) / span,
        "p50": percentile(lat, 50) if lat else float("nan"),
        "p90": percentile(lat, 90) if lat else float("nan"),
    }


async def run(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    res: dict[str, list[dict[str, Any]]] = {}
    m, k, n = args.rows, args.size, args.size
    for way in WAYS:
        cfg = GpuConfig(
            devices=f"virtual:{args.devices}", memory_mb=args.device_mb, policy=POLICY[way]
        )
        async with GpuPool(cfg, registry=CollectorRegistry()) as pool:
            jobs = await prepare(pool, way, max(args.clients), m, k, n)
            res[way] = []
            for clients in args.clients:
                r = await point(pool, way, jobs, clients, args.seconds, m, k)
                res[way].append({"clients": clients, **r})
                print(
                    f"  {way:>5} clients={clients:3d} thr={r['throughput']:8.2f}/s "
                    f"p50={r['p50'] * 1e3:8.1f}ms p90={r['p90'] * 1e3:8.1f}ms",
                    flush=True,
                )
    return res


def report(res: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    mib = 2 * args.size * args.size * 4 / 2**20
    print(
        f"\n== closed-loop clients, cGEMM {args.rows}x{args.size} . {args.size}x{args.size} "
        f"(W {mib:.1f} MiB per client), {args.devices} virtual devices, {args.seconds:g} s "
        "per point; baseline: whole GPU actions under LALB (lalb), same run"
    )
    head = " ".join(f"{w + ' thr/s  p50 ms  p90 ms':>27}" for w in WAYS)
    print(f"{'clients':>7} {head}   ktask/lalb  etask/lalb")
    for i, c in enumerate(r["clients"] for r in res["lalb"]):
        cells = [
            f"{res[w][i]['throughput']:11.2f} {res[w][i]['p50'] * 1e3:7.1f} "
            f"{res[w][i]['p90'] * 1e3:7.1f}"
            for w in WAYS
        ]
        base = max(1e-9, res["lalb"][i]["throughput"])
        mark = "  <- more clients than devices" if c == args.devices + 1 else ""
        print(
            f"{c:>7} " + " ".join(f"{cell:>27}" for cell in cells)
            + f"   {res['ktask'][i]['throughput'] / base:9.2f}x"
            + f"  {res['etask'][i]['throughput'] / base:9.3f}x{mark}"
        )  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--device-mb", type=int, default=256)
    ap.add_argument("--size", type=int, default=256, help="K = N of the cGEMM (W is K x N)")
    ap.add_argument("--rows", type=int, default=64, help="M: rows of X per request")
    ap.add_argument("--seconds", type=float, default=4.0, help="seconds per point")
    ap.add_argument("--clients", type=int, nargs="+", default=None)
    args = ap.parse_args()
    if args.clients is None:
        d = args.devices
        args.clients = sorted({1, d, d + 1, 2 * d, 4 * d})
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch.jit's deprecation
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")  # the workers' jit.load
    res = asyncio.run(run(args))
    report(res, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
