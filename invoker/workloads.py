"""Call sequences for the simulator and the live experiments: CSV traces and the paper's
generator (calls of a SeBS-like function mix spread uniformly over a window)."""

from __future__ import annotations

import csv
import math
import random
import re
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

# CPU share (CPU time / processing time) of the SeBS functions' warm calls; the rest of a
# call's time it waits (here: on the local object store). Measured with
# `benchmarks/bench_sebs_local.py ... --calls 20` on a shared 2-core machine, divided by
# what the CPU-bound 501.graph-pagerank read in the same run (0.72: other work shared the
# core); see docs/policies.md. Functions not listed are CPU-bound (1.0). 110.dynamic-html
# renders its template without I/O (CPU-bound at the default input size).
SEBS_CPU_SHARE: dict[str, float] = {
    "010.sleep": 0.0,
    "120.uploader": 0.1,
    "210.thumbnailer": 0.47,
    "311.compression": 0.65,
}

# The I/O + CPU mix of issue 14: a 1 s sleeping action and a 200 ms CPU-bound action.
IO_CPU_MIX: dict[str, tuple[float, float]] = {"sleep": (1.0, 0.0), "spin": (0.2, 0.2)}


# What the activation protocol accepts as an action name (the simulator invokes them).
_FUNCTION_RE = re.compile(r"[A-Za-z0-9_@.\- ]{1,256}")


@dataclass(frozen=True, slots=True)
class TraceCall:
    arrival_s: float
    function: str
    duration_s: float  # one-core service time
    cpu_s: float | None = None  # CPU time within it (None: all of it, a CPU-bound call)
    memory_mb: int | None = None  # its action's memory limit (None: the simulator's default)


def read_trace(path: str | Path) -> list[TraceCall]:
    """Read a CSV with header ``arrival_s,function,duration_s`` and optionally ``cpu_s``
    (a call's CPU time beside its duration; empty or absent: CPU-bound) and ``memory_mb``
    (its action's memory limit). Anything wrong with it is a ``ValueError`` naming the
    file and line."""
    calls = []
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = {"arrival_s", "function", "duration_s"} - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"missing columns {', '.join(sorted(missing))}")
            for n, row in enumerate(reader, start=2):
                try:
                    calls.append(_trace_call(row))
                except ValueError as e:
                    raise ValueError(f"line {n}: {e}") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read the trace: {e.strerror or e}") from None
    except (ValueError, csv.Error) as e:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"{path}: {e}") from None
    if not calls:
        raise ValueError(f"{path}: the trace has no calls")
    return sorted(calls, key=lambda c: c.arrival_s)


def _trace_call(row: dict[str, str | None]) -> TraceCall:
    values = [row.get(k) for k in ("arrival_s", "function", "duration_s")]
    if None in values:
        raise ValueError("fewer values than columns")
    arrival, function, duration = (str(v) for v in values)
    cpu, memory = row.get("cpu_s"), row.get("memory_mb")
    try:
        times = (float(arrival), float(duration), float(cpu) if cpu else None)
        memory_mb = int(memory) if memory else None
    except ValueError as e:
        raise ValueError(str(e)) from None
    if memory_mb is not None and memory_mb < 1:
        raise ValueError("memory_mb must be positive")
    call = TraceCall(times[0], function, times[1], times[2], memory_mb)
    if not all(math.isfinite(t) for t in times if t is not None):
        raise ValueError("times must be finite numbers (not inf or nan)")
    if call.arrival_s < 0 or call.duration_s < 0:
        raise ValueError("negative time")
    if not _FUNCTION_RE.fullmatch(function):
        raise ValueError(f"function {function!r} is not an action name")
    if call.cpu_s is not None and not 0 <= call.cpu_s <= call.duration_s:
        raise ValueError("cpu_s must be between 0 and duration_s")
    return call


def write_trace(calls: list[TraceCall], path: str | Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arrival_s", "function", "duration_s", "cpu_s", "memory_mb"])
        for c in calls:
            cpu = "" if c.cpu_s is None else f"{c.cpu_s:.6f}"
            memory = "" if c.memory_mb is None else str(c.memory_mb)
            w.writerow([f"{c.arrival_s:.6f}", c.function, f"{c.duration_s:.6f}", cpu, memory])


def uniform_workload(
    intensity: float,
    cores: int,
    seed: int,
    window_s: float = 60.0,
    mix: dict[str, float] | None = None,
    cpu_share: dict[str, float] | None = None,
) -> list[TraceCall]:
    """The paper's load: N = intensity x cores calls per minute of window, each of a function
    drawn uniformly from the mix, arriving uniformly at random inside the window. With
    ``cpu_share``, each call's CPU time is its duration times its function's share (1.0 for
    a function not listed); without, every call is CPU-bound."""
    mix = mix or SEBS_MIX
    rng = random.Random(seed)
    n = round(intensity * cores * window_s / 60.0)
    names = sorted(mix)
    calls = [
        TraceCall(
            rng.uniform(0, window_s),
            fn,
            mix[fn],
            None if cpu_share is None else mix[fn] * cpu_share.get(fn, 1.0),
        )
        for fn in (rng.choice(names) for _ in range(n))
    ]
    return sorted(calls, key=lambda c: c.arrival_s)


def io_cpu_workload(
    rate_per_s: float = 2.0, window_s: float = 40.0, seed: int = 1
) -> list[TraceCall]:
    """Issue 14's mix: each function of :data:`IO_CPU_MIX` called at ``rate_per_s``,
    arrivals uniformly at random inside the window (open loop)."""
    rng = random.Random(seed)
    n = round(rate_per_s * window_s)
    calls = [
        TraceCall(rng.uniform(0, window_s), fn, duration, cpu)
        for fn, (duration, cpu) in IO_CPU_MIX.items()
        for _ in range(n)
    ]
    return sorted(calls, key=lambda c: c.arrival_s)
