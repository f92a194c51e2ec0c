"""Preemption in the simulator: the paper's generator with the SeBS mix (measured CPU shares),
each policy with and without ``--preempt``, over several seeds and intensities.

    python benchmarks/bench_preemption.py                   # 4 cores, seeds 1-10, I = 60..150
    python benchmarks/bench_preemption.py --seeds 3 --intensity 120
    python benchmarks/bench_preemption.py --policy gittins-aged   # fc and the ones named

Prints, per intensity, the mean over seeds of each policy's mean response R, p99 R and mean
stretch S, and the ratio of preemptive SEPT's (and FC's) mean R to SEPT's (FC's) in the same
runs, and of ``sept-share``'s, ``fc-share``'s and ``gittins``'s to FC's. The simulator runs
the service's own scheduler (``ow-invoker simulate``); pauses cost ``--pause-cost`` seconds
(default 0.01 s, about a ``docker pause`` + unpause). ``--policy`` (repeatable, any
registered policy) runs ``fc`` and those instead of the list, each one's ratio to FC's.
"""

from __future__ import annotations

import argparse
import logging
import statistics

from invoker.simulate import SimulationSettings, simulate
from invoker.workloads import SEBS_CPU_SHARE, uniform_workload
from policies import POLICY_NAMES

RUNS = (
    ("fifo", False),
    ("sept", False),
    ("sept", True),
    ("fc", False),
    ("fc", True),
    ("sept-share", False),  # its own rule; "ratio" is to FC's mean R
    ("fc-share", False),  # likewise
    ("gittins", False),  # likewise: it orders the CPU, not a queue
)
TO_FC = ("sept-share", "fc-share", "gittins")  # their ratio is to FC's mean R


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=10, help="seeds 1..N")
    parser.add_argument("--intensity", type=float, action="append", help="default 60 90 120 150")
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--pause-cost", type=float, default=0.01)
    parser.add_argument("--policy", action="append", choices=POLICY_NAMES)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    intensities = args.intensity or [60.0, 90.0, 120.0, 150.0]
    runs: tuple[tuple[str, bool], ...] = RUNS
    to_fc: tuple[str, ...] = TO_FC
    if args.policy:
        to_fc = tuple(p for p in args.policy if p != "fc")
        runs = (("fc", False), *((p, False) for p in to_fc))
    print(
        f"SeBS mix, {args.cores} cores, seeds 1-{args.seeds}, window {args.window:g} s, "
        f"pause {args.pause_cost:g} s; means over seeds"
    )
    print(
        f"{'I':>5} {'policy':<13} {'mean R':>8} {'p99 R':>8} {'mean S':>8} {'paused':>7} "
        f"{'R / no preempt (*-share, gittins: / fc)':>15}"
    )
    for intensity in intensities:
        rows: dict[tuple[str, bool], list[dict]] = {run: [] for run in runs}
        for seed in range(1, args.seeds + 1):
            trace = uniform_workload(
                intensity, args.cores, seed, args.window, cpu_share=SEBS_CPU_SHARE
            )
            for policy, preempt in runs:
                settings = SimulationSettings(
                    cores=args.cores, preempt=preempt, pause_s=args.pause_cost
                )
                rows[policy, preempt].append(simulate(trace, policy, settings))
        for policy, preempt in runs:
            results = rows[policy, preempt]
            ratio = ""
            if preempt or policy in to_fc:
                base = rows["fc", False] if policy in to_fc else rows[policy, False]
                pairs = zip(results, base, strict=True)
                r = statistics.mean(a["mean_response_s"] / b["mean_response_s"] for a, b in pairs)
                ratio = f"{r:.3f}"
            label = f"{policy}{' --preempt' if preempt else ''}"
            print(
                f"{intensity:5g} {label:<13} "
                f"{statistics.mean(x['mean_response_s'] for x in results):8.2f} "
                f"{statistics.mean(x['p99_response_s'] for x in results):8.2f} "
                f"{statistics.mean(x['mean_stretch'] for x in results):8.2f} "
                f"{statistics.mean(x['preemptions'] for x in results):7.1f} {ratio:>15}",
                flush=True,
            )


if __name__ == "__main__":
    main()
