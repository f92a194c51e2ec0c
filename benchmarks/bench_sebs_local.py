"""Warm processing times of the packaged SeBS functions, one call at a time on one core.

Runs each zip through its wrapper's ``main(args)`` (no platform) against the local object
store: one cold call, then ``--calls`` warm ones, pinned to one CPU with OMP_NUM_THREADS=1.
Prints the wrapper's ``results_time`` (cold, warm median, warm p95) per function: the table
that docs/workloads.md quotes and the idle medians of the experiment should be close to; and
the warm calls' CPU share (CPU time over processing time, from the runner process's rusage:
a run of 1 + ``--calls`` calls minus a run of the cold call alone), which the simulator's
SeBS mix uses (``invoker/workloads.py``).

    .venv/bin/python benchmarks/bench_sebs_local.py [BENCH ...] [--calls 10] [--cpu 1]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
from pathlib import Path

from sebs_wrappers import catalog, inputs, localrun, packaging
from sebs_wrappers.objstore import LocalServices
from whisk.summary import percentile


def children_cpu_s() -> float:
    """CPU time of the reaped child processes (the runners) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="*")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--cpu", type=int, default=None, help="pin to this core (default: last)")
    parser.add_argument("--size", default=None)
    parser.add_argument("--state", type=Path, default=None, help="keep data here (default: temp)")
    args = parser.parse_args()
    import os

    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        root = args.state or Path(tmp)
        with LocalServices(root / "data" / "files") as services:
            print(
                f"{'benchmark':24} {'cold ms':>9} {'warm p50':>9} {'warm p95':>9} "
                f"{'cpu share':>9}  (cpu {cpu})"
            )
            for bench in catalog.resolve(args.benchmarks):
                pkg = packaging.build(bench, root / "zips")
                prep = inputs.prepare(bench, services, root / "data", args.size)
                call = {**prep.params, **services.storage.action_params()}
                c0 = children_cpu_s()
                localrun.run_zip(pkg.path, [dict(call)], cpu=cpu)
                c1 = children_cpu_s()
                res = localrun.run_zip(
                    pkg.path, [dict(call) for _ in range(args.calls + 1)], cpu=cpu
                )
                c2 = children_cpu_s()
                ms = [r["results_time"] / 1e3 for r in res]
                warm = sorted(ms[1:])
                p95 = percentile(warm, 95)
                share = ((c2 - c1) - (c1 - c0)) / max(1e-9, sum(warm) / 1e3)
                print(
                    f"{bench.id:24} {ms[0]:9.1f} {statistics.median(warm):9.1f} {p95:9.1f} "
                    f"{min(1.0, max(0.0, share)):9.2f}"
                )
                for prefix in prep.output_prefixes:
                    services.storage.delete_prefix(prefix + "/")


if __name__ == "__main__":
    main()
