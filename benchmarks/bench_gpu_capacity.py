"""The GPU pool's capacity: the highest request rate each policy sustains with its p99 latency
under a bound, per working set, in the simulator with the H200 profile — a figure that does
not depend on how long the run is (LB's queue never settles in the paper's setting, so "its
latency" grows with the run).

    python benchmarks/bench_gpu_capacity.py                  # W = 15 25 35, p99 <= 10 s
    python benchmarks/bench_gpu_capacity.py --miss-cost host-tier --bound 0.5

For each policy and working set, the rate is found by bisection on a log scale between
``--low`` and ``--high`` requests per minute (Poisson arrivals for ``--duration`` seconds,
then drained; 12 GPUs with 0.6 GB of model memory each, the paper's setting; a miss starts a
GPU process as in the paper, or with ``--miss-cost host-tier`` copies the weights from pinned
host memory as this pool does). Prints each capacity and its ratio to LB's.
"""

from __future__ import annotations

import argparse
import math

from gpu.simulator import SimConfig, simulate_open

POLICIES = ("lb", "lalb", "lalbo3", "cfs-affinity")


def capacity(cfg: dict, policy: str, bound: float, low: float, high: float, steps: int) -> float:
    """The highest rate (requests/min) in [low, high] with p99 <= bound; 0 if not even low."""

    def ok(rate: float) -> bool:
        run = SimConfig.for_profile("h200", policy=policy, rate_per_min=rate, **cfg)
        return simulate_open(run)["p99_latency_s"] <= bound

    if not ok(low):
        return 0.0
    if ok(high):
        return high
    lo, hi = math.log(low), math.log(high)
    for _ in range(steps):
        mid = (lo + hi) / 2
        if ok(math.exp(mid)):
            lo = mid
        else:
            hi = mid
    return math.exp(lo)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--working-set", type=int, action="append", help="default 15 25 35")
    parser.add_argument("--bound", type=float, default=10.0, help="p99 latency bound, seconds")
    parser.add_argument(
        "--miss-cost", choices=["cold-process", "host-tier"], default="cold-process"
    )
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of arrivals")
    parser.add_argument("--low", type=float, default=10.0)
    parser.add_argument("--high", type=float, default=20000.0)
    parser.add_argument("--steps", type=int, default=10, help="bisection steps")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sets = args.working_set or [15, 25, 35]
    print(
        f"H200 profile, 12 GPUs x 0.6 GB, batch 8, {args.miss_cost} misses, {args.duration:g} s of "
        f"Poisson arrivals, seed {args.seed}: highest rate (requests/min) with p99 <= "
        f"{args.bound:g} s"
    )
    print(f"{'W':>4} " + " ".join(f"{p:>13}" for p in POLICIES) + "   LALB+O3 / LB")
    for w in sets:
        cfg = {
            "working_set": w,
            "duration_s": args.duration,
            "seed": args.seed,
            "miss_cost": args.miss_cost,
        }
        caps = {p: capacity(cfg, p, args.bound, args.low, args.high, args.steps) for p in POLICIES}
        ratio = caps["lalbo3"] / caps["lb"] if caps["lb"] else math.inf
        print(f"{w:4d} " + " ".join(f"{caps[p]:13.0f}" for p in POLICIES) + f"   {ratio:.1f}x")


if __name__ == "__main__":
    main()
