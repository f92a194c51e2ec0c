"""Capacity: the fewest cores on which each policy answers the load of N cores as well as the
``openwhisk`` baseline (our imitation of the stock invoker) does on all N — the paper's
"3 machines beat 4", in the simulator with the SeBS mix (measured CPU shares).

    python benchmarks/bench_capacity.py                    # N = 4, 8, 16; I = 120; seeds 1-3
    python benchmarks/bench_capacity.py --cores 4 --seeds 1 --plot docs/img/capacity.png

For each N the trace is the paper's generator for N cores at intensity I; the baseline runs
it on N cores; each policy (with and without ``--preempt``) runs the same trace on c cores,
and c is the fewest for which its mean and p75 response times (means over the seeds) are at
most the baseline's. Found by bisection (fewer cores never answer faster here).
"""

from __future__ import annotations

import argparse
import logging
import statistics
from collections.abc import Callable

from invoker.simulate import SimulationSettings, simulate
from invoker.workloads import SEBS_CPU_SHARE, uniform_workload

VARIANTS = (("fifo", False), ("sept", False), ("sept", True), ("fc", False), ("fc", True))


def fewest(ok: Callable[[int], bool], n: int) -> int | None:
    """The smallest c in 1..n with ok(c), assuming ok is monotone; None if not even n."""
    if not ok(n):
        return None
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def capacity(n: int, args: argparse.Namespace) -> dict[str, int | None]:
    """The fewest cores per variant that match the baseline on ``n`` (None: not even n)."""
    traces = [
        uniform_workload(args.intensity, n, seed, args.window, cpu_share=SEBS_CPU_SHARE)
        for seed in range(1, args.seeds + 1)
    ]

    def run(policy: str, cores: int, preempt: bool) -> tuple[float, float]:
        settings = SimulationSettings(
            cores=cores, cold_start_s=args.cold_start, preempt=preempt, pause_s=args.pause_cost
        )
        results = [simulate(t, policy, settings) for t in traces]
        return (
            statistics.mean(r["mean_response_s"] for r in results),
            statistics.mean(r["p75_response_s"] for r in results),
        )

    base_mean, base_p75 = run("openwhisk", n, False)
    print(f"N = {n}: openwhisk on {n} cores: mean R {base_mean:.2f} s, p75 R {base_p75:.2f} s")
    found: dict[str, int | None] = {}
    for policy, preempt in VARIANTS:
        label = f"{policy}{' --preempt' if preempt else ''}"

        def ok(c: int, policy: str = policy, preempt: bool = preempt) -> bool:
            mean, p75 = run(policy, c, preempt)
            return mean <= base_mean and p75 <= base_p75

        c = found[label] = fewest(ok, n)
        shown = f"{c} cores ({c / n:.2f} N)" if c else f"more than {n} cores"
        print(f"  {label:<15} matches it on {shown}", flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, action="append", help="N (default 4 8 16)")
    parser.add_argument("--intensity", type=float, default=120.0)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..S")
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--cold-start", type=float, default=0.5)
    parser.add_argument("--pause-cost", type=float, default=0.01)
    parser.add_argument("--plot", help="write a bar chart (PNG) here (needs matplotlib)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    sizes = args.cores or [4, 8, 16]
    print(
        f"SeBS mix, I = {args.intensity:g}, seeds 1-{args.seeds}, window {args.window:g} s, "
        f"cold start {args.cold_start:g} s, pause {args.pause_cost:g} s"
    )
    table = {n: capacity(n, args) for n in sizes}
    if args.plot:
        plot(table, args.intensity, args.plot)
        print(f"plot: {args.plot}")


def plot(table: dict[int, dict[str, int | None]], intensity: float, path: str) -> None:
    """Bars of cores needed / N per variant; a variant that needs more than N is hatched."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(table)
    labels = [f"{p}{' --preempt' if q else ''}" for p, q in VARIANTS]
    fig, ax = plt.subplots(figsize=(7.5, 3.5))
    width = 0.8 / len(sizes)
    for i, n in enumerate(sizes):
        xs = [x + i * width for x in range(len(labels))]
        found = [table[n][label] for label in labels]
        bars = ax.bar(xs, [(c or n) / n for c in found], width, label=f"N = {n}")
        for bar, c in zip(bars, found, strict=True):
            if c is None:
                bar.set_hatch("//")
                ax.text(bar.get_x() + width / 2, 1.02, "> N", ha="center", fontsize=7)
    ax.axhline(1.0, color="grey", lw=0.8)
    ticks = [x + width * (len(sizes) - 1) / 2 for x in range(len(labels))]
    ax.set_xticks(ticks, [label.replace(" --", "\n+") for label in labels])
    ax.set_ylabel("cores needed / N")
    ax.set_ylim(0, 1.15)
    ax.set_title(f"Cores to match openwhisk on N cores (SeBS mix, I = {intensity:g})")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
