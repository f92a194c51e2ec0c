"""``ow-invoker simulate-gpu``: the GPU pool's scheduler and cache on a virtual clock."""

from __future__ import annotations

import argparse
import json

from whisk.argtypes import nonnegative_float, nonnegative_int, positive_float, positive_int

HELP = "simulate the GPU cache pool (LB, LALB, LALB+O3, CFS-Affinity, Exclusive) on virtual time"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gpu.model_table import PROFILES
    from gpu.policies import DEFAULT_AFFINITY_PENALTY, DEFAULT_O3_LIMIT, POLICIES

    parser.add_argument(
        "--policy",
        nargs="+",
        choices=POLICIES,
        default=["lb", "lalb", "lalbo3"],
        help="one or more policies, each run on the same arrival sequence",
    )
    parser.add_argument(
        "--o3-limit", type=nonnegative_int, default=DEFAULT_O3_LIMIT, help="O3 skip limit"
    )
    parser.add_argument("--gpus", type=positive_int, default=12)
    parser.add_argument(
        "--gpu-memory-gb",
        type=positive_float,
        default=0.6,
        help="model memory per GPU (the paper does not state it; see docs/gpu.md)",
    )
    parser.add_argument("--working-set", type=positive_int, default=15, help="distinct models")
    parser.add_argument("--rate", type=positive_float, default=325.0, help="requests per minute")
    parser.add_argument(
        "--duration", type=positive_float, default=1800.0, help="seconds of arrivals"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=positive_int, default=8, help="inputs per request")
    parser.add_argument(
        "--zipf", type=nonnegative_float, default=0.0, help="model popularity exponent (0: uniform)"
    )
    parser.add_argument(
        "--miss-cost",
        choices=["cold-process", "host-tier"],
        default="cold-process",
        help="cold-process: a miss starts a GPU process (the paper's design); "
        "host-tier: a miss copies weights from pinned host memory (this pool)",
    )
    parser.add_argument(
        "--clients",
        type=nonnegative_int,
        default=0,
        help="closed-loop clients instead of Poisson arrivals (KaaS throughput experiment)",
    )
    parser.add_argument(
        "--affinity-penalty", type=nonnegative_float, default=DEFAULT_AFFINITY_PENALTY
    )
    parser.add_argument(
        "--device-profile",
        choices=sorted(PROFILES),
        default="cpu",
        help="model table and copy costs: cpu (measured on the virtual devices) or h200 "
        "(measured on an NVIDIA H200); see docs/gpu.md",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per policy")


def main(args: argparse.Namespace) -> int:
    from gpu.simulator import SimConfig, simulate_closed, simulate_open

    for policy in args.policy:
        cfg = SimConfig.for_profile(
            args.device_profile,
            policy=policy,
            gpus=args.gpus,
            gpu_memory_gb=args.gpu_memory_gb,
            working_set=args.working_set,
            rate_per_min=args.rate,
            duration_s=args.duration,
            seed=args.seed,
            o3_limit=args.o3_limit,
            zipf=args.zipf,
            batch=args.batch,
            miss_cost=args.miss_cost,
            affinity_penalty=args.affinity_penalty,
        )
        out = simulate_closed(cfg, args.clients) if args.clients else simulate_open(cfg)
        if args.json:
            print(json.dumps(out), flush=True)
        else:
            print(
                f"{out['policy']:>12}  requests={out['requests']:6d}  "
                f"mean={out['mean_latency_s']:9.3f}s  p99={out['p99_latency_s']:9.3f}s  "
                f"miss={out['miss_ratio']:.3f}  false_miss={out['false_miss_ratio']:.3f}  "
                f"dups={out['avg_duplicates']:.2f}  util={out['utilization']:.3f}",
                flush=True,
            )
    return 0
