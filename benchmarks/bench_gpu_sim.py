"""Reproduce the LALB paper's experiment in the simulator and print it beside the paper.

12 GPUs, working sets 15/25/35, 325 requests/minute, LB vs LALB vs LALB+O3 (limit 25), and the
O3 limit swept 0-45 at working set 35. The scheduler, cache, estimator and dispatcher are the
production code (gpu/simulator.py swaps only the device backend); model sizes and times come from
gpu/model_table.py. Each cell is the mean over ``--seeds`` arrival sequences.

    .venv/bin/python benchmarks/bench_gpu_sim.py            # ~1 minute
    .venv/bin/python benchmarks/bench_gpu_sim.py --json     # one JSON object per run
    .venv/bin/python benchmarks/bench_gpu_sim.py --device-profile h200   # H200-measured costs
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu.model_table import PROFILES
from gpu.simulator import SimConfig, simulate_open

# The paper's reported reductions vs LB (Section V; workloads.md / gpu-pool.md).
PAPER = {
    ("lalb", 15, "mean_latency_s"): 97.74,
    ("lalb", 25, "mean_latency_s"): 93.33,
    ("lalb", 35, "mean_latency_s"): 79.43,
    ("lalbo3", 35, "mean_latency_s"): 96.93,
    ("lalb", 15, "miss_ratio"): 94.11,
    ("lalb", 35, "miss_ratio"): 65.21,
    ("lalbo3", 35, "miss_ratio"): 81.15,
    ("lalb", 15, "false_miss_ratio"): 34.38,
    ("lalbo3", 15, "false_miss_ratio"): 35.41,
    ("lalbo3", 35, "false_miss_ratio"): 3.65,
    ("lalb", 15, "avg_duplicates"): 48.96,
    ("lalbo3", 15, "avg_duplicates"): 49.48,
    ("lalb", 35, "avg_duplicates"): 35.32,
    ("lalbo3", 35, "avg_duplicates"): 33.47,
}
PAPER_SWEEP = {"mean_latency_s": 85.1, "miss_ratio": 45.83, "latency_var": 95.93}
METRICS = ("mean_latency_s", "p99_latency_s", "miss_ratio", "false_miss_ratio")
METRICS += ("avg_duplicates", "utilization")


def run(args: argparse.Namespace, **kw) -> dict:
    outs = []
    for seed in range(1, args.seeds + 1):
        cfg = SimConfig.for_profile(
            args.device_profile,
            gpus=args.gpus,
            gpu_memory_gb=args.gpu_memory_gb,
            rate_per_min=args.rate,
            duration_s=args.duration,
            batch=args.batch,
            zipf=args.zipf,
            seed=seed,
            **kw,
        )
        out = simulate_open(cfg)
        if args.json:
            print(json.dumps(out), flush=True)
        outs.append(out)
    mean = {m: statistics.fmean(o[m] for o in outs) for m in METRICS}
    mean["latency_var"] = statistics.fmean(_latency_var(o) for o in outs)
    return mean


def _latency_var(o: dict) -> float:
    return o["p90_latency_s"] - o["p50_latency_s"]  # spread proxy (the simulator keeps no list)


def pct(base: float, x: float) -> float:
    return 100.0 * (base - x) / base if base else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=12)
    ap.add_argument("--gpu-memory-gb", type=float, default=0.6)
    ap.add_argument("--rate", type=float, default=325.0)
    ap.add_argument("--duration", type=float, default=1200.0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--zipf", type=float, default=0.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--device-profile", choices=sorted(PROFILES), default="cpu")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    say = (lambda *a, **k: None) if args.json else print

    for miss_cost in ("cold-process", "host-tier"):
        say(
            f"\n== miss cost: {miss_cost} ({args.gpus} GPUs x {args.gpu_memory_gb} GB, "
            f"{args.rate:g}/min, {args.device_profile} model table)"
        )
        say(
            f"{'W':>3} {'policy':>7} {'mean s':>9} {'p99 s':>9} {'miss':>6} {'false':>6} "
            f"{'dups':>5} {'util':>5} | vs LB: latency, misses, false misses, dups (paper)"
        )
        for w in (15, 25, 35):
            base = None
            for policy in ("lb", "lalb", "lalbo3"):
                r = run(args, policy=policy, working_set=w, miss_cost=miss_cost)
                base = base or r
                line = (
                    f"{w:>3} {policy:>7} {r['mean_latency_s']:9.2f} {r['p99_latency_s']:9.2f} "
                    f"{r['miss_ratio']:6.3f} {r['false_miss_ratio']:6.3f} "
                    f"{r['avg_duplicates']:5.2f} {r['utilization']:5.2f}"
                )
                if policy != "lb":
                    cells = []
                    for m in ("mean_latency_s", "miss_ratio", "false_miss_ratio", "avg_duplicates"):
                        paper = PAPER.get((policy, w, m))
                        ours = pct(base[m], r[m])
                        cells.append(f"{-ours:+.1f}%" + (f" ({-paper:+.1f}%)" if paper else ""))
                    line += " | " + "  ".join(cells)
                say(line)
        if miss_cost == "host-tier":
            break
        say(f"\n== O3 limit sweep at W=35 ({miss_cost})")
        say(f"{'limit':>5} {'mean s':>9} {'miss':>6} {'p90-p50 s':>10}")
        base = None
        for limit in range(0, 50, 5):
            policy = "lalbo3" if limit else "lalb"
            r = run(args, policy=policy, working_set=35, o3_limit=limit, miss_cost=miss_cost)
            base = base or r
            say(f"{limit:>5} {r['mean_latency_s']:9.2f} {r['miss_ratio']:6.3f} "
                f"{r['latency_var']:10.2f}")  # fmt: skip
        say(
            f"limit 45 vs 0: latency -{pct(base['mean_latency_s'], r['mean_latency_s']):.1f}% "
            f"(paper -{PAPER_SWEEP['mean_latency_s']}%), misses "
            f"-{pct(base['miss_ratio'], r['miss_ratio']):.1f}% "
            f"(paper -{PAPER_SWEEP['miss_ratio']}%), spread "
            f"-{pct(base['latency_var'], r['latency_var']):.1f}% "
            f"(paper: variance -{PAPER_SWEEP['latency_var']}%)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
