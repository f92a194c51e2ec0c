"""The soak run (docs/reliability.md): ``ow-invoker run`` for a chosen time at a steady mixed
load (cold starts, evictions, errors, timeouts, oversized results), on a real Kafka and
CouchDB-API server started on the benchmark ports; every resource sampled every few seconds,
and the run fails (exit 1) when one grows without bound after the warm-up, or when a call
is lost, answered twice or not recorded. Writes samples.jsonl, report.txt and soak.png.

    python benchmarks/soak.py --minutes 60 [--rate 20] [--out .state/soak]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from common import ROOT, kafka_and_couchdb  # also puts the project on sys.path

from harness.soak import run_soak, write


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=20.0, help="calls per second")
    parser.add_argument("--cores", type=int, default=2, help="action cores")
    parser.add_argument("--warmup-s", type=float, default=120.0)
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=ROOT / ".state" / "soak")
    args = parser.parse_args()
    with kafka_and_couchdb() as (kafka, couch), tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        result = asyncio.run(
            run_soak(
                kafka,
                couch,
                Path(d),
                minutes=args.minutes,
                rate=args.rate,
                sample_s=args.sample_s,
                warmup_s=args.warmup_s,
                cores=args.cores,
            )
        )
    write(result, args.out)
    print(f"soak: {args.minutes:g} min at {args.rate:g} calls/s on {args.cores} action cores")
    print(result.report())
    print(f"samples, report and plot in {args.out}")
    sys.exit(0 if result.healthy() else 1)


if __name__ == "__main__":
    main()
