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

The same experiment runs first in the GPU simulator (``--only sim`` / ``--only live`` for one
part), with a working set that outgrows device memory at the high end: per client a W the size
of a model-table row's weights (``--sim-model``, H200 profile), on ``--sim-devices`` devices
whose memory (``--sim-memory-mb``, the kTasks' constant budget and the models' memory alike)
holds fewer W's than there are clients at 4x the devices. kTasks run through the production
queue, placement and constant cache (``gpu.kaas.simulated``: a run is the copy of the
constants not resident plus the row's measured forward pass as kernel time), eTasks and whole
GPU actions through the production Exclusive and LALB schedulers (``gpu.simulator``, misses
copied from the host tier at the row's measured upload rate, a switch a measured cold start).
``--plot PATH`` draws throughput against clients for both parts.

    .venv/bin/python benchmarks/bench_gpu_ktasks.py                  # ~2.5 minutes
    .venv/bin/python benchmarks/bench_gpu_ktasks.py --seconds 10 --size 256
    .venv/bin/python benchmarks/bench_gpu_ktasks.py --only sim       # ~30 s, deterministic
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
from gpu.model_table import PROFILES, ModelCost
from gpu.pool import GpuPool
from gpu.simulator import KTaskSimConfig, SimConfig, simulate_closed, simulate_ktasks_closed
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


# -- the simulator part (issue 30: the working set beyond device memory) ----------------------

SIM_PROFILE = "h200"


def sim_workload(args: argparse.Namespace) -> tuple[KTaskSimConfig, ModelCost, float]:
    """The kTask side's config, the per-client model of the other two, the cold start: one
    W of the row's bytes (K = N rounded), its forward pass, its measured upload rate."""
    profile = PROFILES[SIM_PROFILE]
    row = next(m for m in profile.table if m.name == args.sim_model)
    size = round((row.size_bytes / 8) ** 0.5)
    cfg = KTaskSimConfig(
        devices=args.sim_devices,
        constant_budget=args.sim_memory_mb * 10**6,
        size=size,
        rows=args.rows,
        kernel_s=row.infer_s,
        copy_bytes_per_s=row.size_bytes / row.upload_s if row.upload_s else profile.pcie_bw,
        duration_s=args.sim_seconds,
    )
    model = ModelCost(f"cgemm-{size}", cfg.weight_bytes, row.infer_s, row.load_s)
    return cfg, model, profile.cold_process_s


def sim_run(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    cfg, model, cold = sim_workload(args)
    res: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
    for clients in args.sim_clients:
        k = simulate_ktasks_closed(cfg, clients, warm=True)
        res["ktask"].append({**k, "miss": k["constant_misses"] / max(1, 2 * k["requests"])})
        for way in ("etask", "lalb"):
            sc = SimConfig(
                policy=POLICY[way],
                gpus=cfg.devices,
                gpu_memory_gb=cfg.constant_budget / 1e9,
                duration_s=cfg.duration_s,
                batch=1,
                miss_cost="host-tier",
                cold_process_s=cold,
                table=(model,),
                pcie_bw=cfg.copy_bytes_per_s,
            )
            r = simulate_closed(sc, clients, warm=True)
            res[way].append({**r, "miss": r["miss_ratio"]})
    for rows in res.values():
        for r in rows:
            r["throughput"], r["p50"], r["p90"] = (
                r["throughput_rps"], r["p50_latency_s"], r["p90_latency_s"]
            )  # fmt: skip
    return res


def sim_report(res: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    cfg, model, cold = sim_workload(args)
    fit = cfg.constant_budget // cfg.weight_bytes
    print(
        f"\n== simulator: closed-loop clients, per client a W of {cfg.size}x{cfg.size} complex "
        f"({cfg.weight_bytes / 1e6:.1f} MB, {args.sim_model}'s weights), {cfg.kernel_s * 1e3:.2f} "
        f"ms per request ({args.sim_model}'s {SIM_PROFILE} forward pass), copies at "
        f"{cfg.copy_bytes_per_s / 1e9:.1f} GB/s, cold start {cold + model.load_s:.2f} s; "
        f"{cfg.devices} devices x {cfg.constant_budget / 1e6:g} MB ({fit} W each, "
        f"{fit * cfg.devices} in all); {cfg.duration_s:g} s per point after one request per "
        "client; baseline: whole GPU actions under LALB (lalb), same run"
    )
    head = " ".join(f"{w + ' thr/s  p50 ms  p90 ms  miss':>33}" for w in WAYS)
    print(f"{'clients':>7} {head}   ktask/lalb  etask/lalb")
    beyond = next((c for c in args.sim_clients if c > fit * cfg.devices), None)
    for i, c in enumerate(r["clients"] for r in res["lalb"]):
        cells = [
            f"{res[w][i]['throughput']:11.2f} {res[w][i]['p50'] * 1e3:7.1f} "
            f"{res[w][i]['p90'] * 1e3:7.1f} {res[w][i]['miss']:5.2f}"
            for w in WAYS
        ]
        base = max(1e-9, res["lalb"][i]["throughput"])
        mark = ""
        if c == cfg.devices + 1:
            mark = "  <- more clients than devices"
        elif c == beyond:
            mark = "  <- W's beyond device memory"
        print(
            f"{c:>7} " + " ".join(f"{cell:>33}" for cell in cells)
            + f"   {res['ktask'][i]['throughput'] / base:9.2f}x"
            + f"  {res['etask'][i]['throughput'] / base:9.3f}x{mark}"
        )  # fmt: skip


Part = tuple[dict[str, list[dict[str, Any]]], int, int | None]
"""A part's results, its device count, how many clients' W fit in all devices (None: all)."""


def plot(parts: dict[str, Part], path: str) -> None:
    """Throughput against clients, one panel per part (simulator, live), log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    label = {"ktask": "kTasks", "etask": "eTasks (Exclusive)", "lalb": "whole GPU actions (LALB)"}
    fig, axes = plt.subplots(1, len(parts), figsize=(5.2 * len(parts), 3.8), squeeze=False)
    for ax, (title, (res, devices, fit)) in zip(axes[0], parts.items(), strict=True):
        for way, marker in zip(WAYS, "os^", strict=True):
            xs = [r["clients"] for r in res[way]]
            ys = [max(r["throughput"], 1e-2) for r in res[way]]
            ax.plot(xs, ys, marker=marker, label=label[way])
        ax.axvline(devices, color="grey", lw=0.8, ls="--")
        xlabel = f"closed-loop clients ({devices} devices: dashed"
        if fit is not None:
            ax.axvline(fit, color="grey", lw=0.8, ls=":")
            xlabel += f"; {fit} W's fit: dotted"
        ax.set_yscale("log")
        ax.set_xlabel(xlabel + ")")
        ax.set_ylabel("requests / s")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", lw=0.3)
    axes[0][0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--device-mb", type=int, default=256)
    ap.add_argument("--size", type=int, default=256, help="K = N of the cGEMM (W is K x N)")
    ap.add_argument("--rows", type=int, default=64, help="M: rows of X per request")
    ap.add_argument("--seconds", type=float, default=4.0, help="seconds per point")
    ap.add_argument("--clients", type=int, nargs="+", default=None)
    ap.add_argument("--only", choices=("sim", "live"), help="run one part (default: both)")
    ap.add_argument("--sim-devices", type=int, default=4)
    ap.add_argument("--sim-model", default="resnet50", help="a gpu/model_table.py H200 row")
    ap.add_argument("--sim-memory-mb", type=int, default=350, help="per simulated device")
    ap.add_argument("--sim-seconds", type=float, default=10.0, help="virtual seconds per point")
    ap.add_argument("--sim-clients", type=int, nargs="+", default=None)
    ap.add_argument("--plot", help="write throughput vs clients here (PNG; matplotlib)")
    args = ap.parse_args()
    if args.clients is None:
        d = args.devices
        args.clients = sorted({1, d, d + 1, 2 * d, 4 * d})
    if args.sim_clients is None:
        d = args.sim_devices
        args.sim_clients = sorted({1, d, d + 1, 2 * d, 3 * d, 4 * d})
    parts: dict[str, Part] = {}
    if args.only != "live":
        sim = sim_run(args)
        sim_report(sim, args)
        cfg, _, _ = sim_workload(args)
        mb = cfg.weight_bytes / 1e6
        fit = cfg.constant_budget // cfg.weight_bytes * cfg.devices
        parts[f"simulator: {args.sim_model}-sized W ({mb:.0f} MB), {SIM_PROFILE}"] = (
            sim,
            args.sim_devices,
            fit,
        )
    if args.only != "sim":
        torch.set_num_threads(1)
        warnings.filterwarnings("ignore", category=FutureWarning)  # torch.jit's deprecation
        os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")  # the workers' jit.load
        res = asyncio.run(run(args))
        report(res, args)
        parts[f"live: {args.devices} virtual (CPU) devices, W {args.size}x{args.size}"] = (
            res,
            args.devices,
            None,
        )
    if args.plot:
        plot(parts, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
