"""Heavy tails: the policies on slices of a real Azure Functions 2019 sample, in the simulator.

    python benchmarks/bench_heavy_tail.py                 # the slices and memories below
    python benchmarks/bench_heavy_tail.py --memory-mb 2048

The sample (``benchmarks/data/azure2019-invitro-66``, see its README) is 66 functions of
the public dataset; each slice is drawn from it with ``invoker.azure.draw_slice`` (seed 1,
durations capped at 60 s) and sized to a node by its core count; every action gets
OpenWhisk's default 256 MB (the sample's apps mostly allocate 2 GB, which would make a
2 GB node run one call at a time). Prints, per slice and user
memory, each policy's mean response R, p99 R and mean stretch S, and the ratios of its mean
R, p99 and S to the better of ``openwhisk`` and ``fc`` in the same run (the goal of issue
27: mean <= 0.8x, stretch <= openwhisk's, p99 <= the better's).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from invoker.azure import SliceSpec, draw_slice, offered_load, read_azure2019
from invoker.simulate import SimulationSettings, simulate

SAMPLE = Path(__file__).parent / "data" / "azure2019-invitro-66"
# (name, cores, slice): loads 0.88 and 1.10 of a 20-minute window of 16 functions.
SLICES = (
    ("A", 10, SliceSpec(functions=16, start_minute=0, minutes=20, max_duration_s=60.0)),
    ("B", 8, SliceSpec(functions=16, start_minute=0, minutes=20, max_duration_s=60.0)),
)
RUNS = (
    ("openwhisk", False),
    ("fc", False),
    ("sept", False),
    ("fc", True),
    ("sept", True),
    ("sept-share", False),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory-mb", type=int, action="append", help="default 32768 2048")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    functions = read_azure2019(SAMPLE)
    for name, cores, spec in SLICES:
        trace = [replace(c, memory_mb=256) for c in draw_slice(functions, spec)]
        span = max(c.arrival_s for c in trace)
        for memory in args.memory_mb or [32768, 2048]:
            print(
                f"slice {name}: {len(trace)} calls, {cores} cores, offered load "
                f"{offered_load(trace, cores, span):.2f}, user memory {memory} MB"
            )
            print(
                f"{'policy':<16} {'mean R':>8} {'p99 R':>8} {'mean S':>8} "
                f"{'R/best':>7} {'p99/best':>8} {'S/ow':>6}"
            )
            results = {}
            for policy, preempt in RUNS:
                label = policy + ("+preempt" if preempt else "")
                settings = SimulationSettings(cores=cores, user_memory_mb=memory, preempt=preempt)
                results[label] = simulate(trace, policy, settings)
            ow, fc = results["openwhisk"], results["fc"]
            best = min(ow, fc, key=lambda r: r["mean_response_s"])
            best_p99 = min(ow["p99_response_s"], fc["p99_response_s"])
            for label, r in results.items():
                print(
                    f"{label:<16} {r['mean_response_s']:8.2f} {r['p99_response_s']:8.2f} "
                    f"{r['mean_stretch']:8.2f} "
                    f"{r['mean_response_s'] / best['mean_response_s']:7.2f} "
                    f"{r['p99_response_s'] / best_p99:8.2f} "
                    f"{r['mean_stretch'] / ow['mean_stretch']:6.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
