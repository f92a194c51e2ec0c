"""Call sequences for the simulator and the live experiments: CSV traces and the paper's
generator (calls of a SeBS-like function mix spread uniformly over a window)."""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from pathlib import Path

# One-core warm service times (seconds) of the SeBS functions on a 2-vCPU machine
# (docs/workloads.md, "warm medians"; 010.sleep is given 1 s, 110.dynamic-html its
# mid-size input). Used by `simulate --workload sebs` and the live policy benchmark.
SEBS_MIX: dict[str, float] = {
    "010.sleep": 1.0,
    "110.dynamic-html": 0.02,
    "120.uploader": 0.013,
    "210.thumbnailer": 0.033,
    "220.video-processing": 1.7,
    "311.compression": 0.45,
    "411.image-recognition": 0.115,
    "501.graph-pagerank": 0.4,
    "502.graph-mst": 0.35,
    "503.graph-bfs": 0.3,
    "504.dna-visualisation": 4.7,
}


@dataclass(frozen=True, slots=True)
class TraceCall:
    arrival_s: float
    function: str
    duration_s: float  # one-core service time


def read_trace(path: str | Path) -> list[TraceCall]:
    """Read a CSV with header ``arrival_s,function,duration_s``."""
    calls = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = {"arrival_s", "function", "duration_s"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {', '.join(sorted(missing))}")
        for n, row in enumerate(reader, start=2):
            try:
                call = TraceCall(float(row["arrival_s"]), row["function"], float(row["duration_s"]))
            except (TypeError, ValueError) as e:
                raise ValueError(f"{path}:{n}: {e}") from None
            if call.arrival_s < 0 or call.duration_s < 0 or not call.function:
                raise ValueError(f"{path}:{n}: negative time or empty function")
            calls.append(call)
    return sorted(calls, key=lambda c: c.arrival_s)


def write_trace(calls: list[TraceCall], path: str | Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arrival_s", "function", "duration_s"])
        for c in calls:
            w.writerow([f"{c.arrival_s:.6f}", c.function, f"{c.duration_s:.6f}"])


def uniform_workload(
    intensity: float,
    cores: int,
    seed: int,
    window_s: float = 60.0,
    mix: dict[str, float] | None = None,
) -> list[TraceCall]:
    """The paper's load: N = intensity x cores calls per minute of window, each of a function
    drawn uniformly from the mix, arriving uniformly at random inside the window."""
    mix = mix or SEBS_MIX
    rng = random.Random(seed)
    n = round(intensity * cores * window_s / 60.0)
    names = sorted(mix)
    calls = [
        TraceCall(rng.uniform(0, window_s), fn, mix[fn])
        for fn in (rng.choice(names) for _ in range(n))
    ]
    return sorted(calls, key=lambda c: c.arrival_s)
