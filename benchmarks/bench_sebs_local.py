"""Warm processing times of the packaged SeBS functions, one call at a time on one core.

Runs each zip through its wrapper's ``main(args)`` (no platform) against the local object
store: one cold call, then ``--calls`` warm ones, pinned to one CPU with OMP_NUM_THREADS=1.
Prints the wrapper's ``results_time`` (cold, warm median, warm p95) per function: the table
that docs/workloads.md quotes and the idle medians of the experiment should be close to.

    .venv/bin/python benchmarks/bench_sebs_local.py [BENCH ...] [--calls 10] [--cpu 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from sebs_wrappers import catalog, inputs, localrun, packaging
from sebs_wrappers.objstore import LocalServices


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
            print(f"{'benchmark':24} {'cold ms':>9} {'warm p50':>9} {'warm p95':>9}  (cpu {cpu})")
            for bench in catalog.resolve(args.benchmarks):
                pkg = packaging.build(bench, root / "zips")
                prep = inputs.prepare(bench, services, root / "data", args.size)
                call = {**prep.params, **services.storage.action_params()}
                res = localrun.run_zip(
                    pkg.path, [dict(call) for _ in range(args.calls + 1)], cpu=cpu
                )
                ms = [r["results_time"] / 1e3 for r in res]
                warm = sorted(ms[1:])
                p95 = warm[min(len(warm) - 1, round(0.95 * (len(warm) - 1)))]
                print(f"{bench.id:24} {ms[0]:9.1f} {statistics.median(warm):9.1f} {p95:9.1f}")
                for prefix in prep.output_prefixes:
                    services.storage.delete_prefix(prefix + "/")


if __name__ == "__main__":
    main()
