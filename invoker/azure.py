"""The public Azure Functions traces as simulator and replay input.

Two formats of Azure/AzurePublicDataset (cite: Shahrad et al., "Serverless in the Wild:
Characterizing and Optimizing the Serverless Workload at a Large Cloud Provider", USENIX
ATC 2020, for 2019; Zhang et al., "Faster and Cheaper Serverless Computing on Harvested
Resources", SOSP 2021, for 2021):

- **2019** (``azurefunctions-dataset2019``): per day, invocations per function per minute
  (``invocations_per_function_md.anon.dNN.csv``: ``HashOwner,HashApp,HashFunction,Trigger,
  1..1440``), duration percentiles per function (``function_durations_percentiles.anon.
  dNN.csv``, milliseconds, of 30-second averages) and allocated memory percentiles per app
  (``app_memory_percentiles.anon.dNN.csv``). It has no single call, so a node-sized slice
  is *drawn* from it (:func:`draw_slice`, seeded, documented in ``docs/policies.md``).
- **2021** (``AzureFunctionsInvocationTraceForTwoWeeksJan2021``): one row per call,
  ``app,func,end_timestamp,duration`` in seconds; a call arrived at end - duration.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from invoker.workloads import TraceCall

MINUTES = 1440
PERCENTILES = (0.0, 0.01, 0.25, 0.50, 0.75, 0.99, 1.0)
_DURATION_POINTS = tuple(f"percentile_Average_{p}" for p in (0, 1, 25, 50, 75, 99, 100))
_KEY = ("HashOwner", "HashApp", "HashFunction")
Spread = Literal["uniform", "even"]


@dataclass(frozen=True, slots=True)
class Durations:
    """A function's execution times over a day (ms): the dataset's weighted percentiles."""

    average_ms: float
    points_ms: tuple[float, ...]  # at PERCENTILES

    def draw(self, u: float) -> float:
        """The duration (seconds) at quantile ``u`` in [0, 1]: linear between the known
        percentiles, the dataset's only description of the distribution."""
        i = min(bisect.bisect_right(PERCENTILES, u), len(PERCENTILES) - 1)
        lo_q, hi_q = PERCENTILES[i - 1], PERCENTILES[i]
        lo, hi = self.points_ms[i - 1], self.points_ms[i]
        f = 0.0 if hi_q == lo_q else (u - lo_q) / (hi_q - lo_q)
        return (lo + f * (hi - lo)) / 1000.0


@dataclass(frozen=True, slots=True)
class AzureFunction:
    """One function of the 2019 dataset: its calls per minute, durations and its app's
    memory (the dataset measures memory per app)."""

    owner: str
    app: str
    function: str
    trigger: str
    per_minute: tuple[int, ...]
    durations: Durations
    memory_mb: float | None

    @property
    def name(self) -> str:
        """An action name: the hashes' first characters (unique in practice)."""
        return f"az-{self.app[:6]}-{self.function[:8]}"

    def calls(self, start: int, minutes: int) -> int:
        return sum(self.per_minute[start : start + minutes])


def _rows(path: Path) -> Iterable[tuple[int, dict[str, str]]]:
    try:
        with open(path, newline="") as f:
            yield from enumerate(csv.DictReader(f), start=2)
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror or e}") from None


def _number(row: dict[str, str], field: str, where: str) -> float:
    value = row.get(field)
    try:
        x = float(value) if value not in (None, "") else math.nan
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{where}: {field} is {value!r}, not a non-negative number")
    return x


def read_azure2019(directory: str | Path, day: int = 1) -> list[AzureFunction]:
    """The functions of day ``day`` (1..14) that have both calls and durations, joined on
    (owner, app, function); memory joined on (owner, app) where the day has it."""
    d = Path(directory)
    suffix = f"anon.d{day:02d}.csv"
    durations: dict[tuple[str, ...], Durations] = {}
    path = d / f"function_durations_percentiles.{suffix}"
    for n, row in _rows(path):
        where = f"{path}: line {n}"
        points = tuple(_number(row, f, where) for f in _DURATION_POINTS)
        if any(b < a for a, b in itertools.pairwise(points)):
            raise ValueError(f"{where}: duration percentiles decrease")
        durations[tuple(row.get(k, "") for k in _KEY)] = Durations(
            _number(row, "Average", where), points
        )
    memory: dict[tuple[str, str], float] = {}
    path = d / f"app_memory_percentiles.{suffix}"
    if path.exists():
        for n, row in _rows(path):
            memory[(row["HashOwner"], row["HashApp"])] = _number(
                row, "AverageAllocatedMb", f"{path}: line {n}"
            )
    functions = []
    path = d / f"invocations_per_function_md.{suffix}"
    minute_fields = [str(m) for m in range(1, MINUTES + 1)]
    for n, row in _rows(path):
        where = f"{path}: line {n}"
        if n == 2 and any(f not in row for f in minute_fields):
            raise ValueError(f"{where}: the minute columns 1..{MINUTES} are missing")
        key = tuple(row.get(k, "") for k in _KEY)
        if key not in durations:
            continue  # no durations logged for it that day: nothing to simulate with
        counts = tuple(int(_number(row, f, where)) for f in minute_fields)
        owner, app, function = key
        functions.append(
            AzureFunction(
                owner,
                app,
                function,
                row.get("Trigger", ""),
                counts,
                durations[key],
                memory.get((owner, app)),
            )
        )
    if not functions:
        raise ValueError(f"{d}: no function of day {day} has both calls and durations")
    return functions


@dataclass(frozen=True, slots=True)
class SliceSpec:
    """How to draw a node-sized slice of the 2019 dataset (all choices seeded by ``seed``).

    - ``functions``: how many, drawn uniformly among those with at least ``min_calls``
      calls in the window and a median duration within ``max_duration_s``;
    - ``start_minute``, ``minutes``: the window of the day;
    - ``max_duration_s``: also the cap on each drawn duration (longer draws are cut);
    - ``spread``: where a minute's calls fall in it, ``uniform`` (independent uniform
      times, i.e. Poisson-like) or ``even`` (evenly spaced, first at a random offset);
    - durations are drawn per call by :meth:`Durations.draw` at a uniform quantile;
    - ``time_scale``: arrivals are multiplied by it (0.5 compresses time 2x).
    """

    functions: int = 66
    start_minute: int = 0
    minutes: int = 10
    max_duration_s: float = 600.0
    spread: Spread = "uniform"
    seed: int = 1
    min_calls: int = 1
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.functions < 1 or self.minutes < 1 or self.min_calls < 1:
            raise ValueError("functions, minutes and min_calls must be >= 1")
        if not 0 <= self.start_minute < MINUTES or self.start_minute + self.minutes > MINUTES:
            raise ValueError(f"the window must lie within the day's {MINUTES} minutes")
        if self.max_duration_s <= 0 or self.time_scale <= 0:
            raise ValueError("max_duration_s and time_scale must be positive")
        if self.spread not in ("uniform", "even"):
            raise ValueError("spread is uniform or even")


def memory_limit_mb(allocated_mb: float | None) -> int | None:
    """An action memory limit for an app's average allocation: rounded up to 128 MB,
    between 128 and 2048 MB (the stock limits' range)."""
    if allocated_mb is None:
        return None
    return int(min(2048, max(128, 128 * math.ceil(allocated_mb / 128))))


def draw_slice(functions: list[AzureFunction], spec: SliceSpec) -> list[TraceCall]:
    """The calls of ``spec.functions`` functions over the window, sorted by arrival."""
    rng = random.Random(spec.seed)
    start, minutes = spec.start_minute, spec.minutes
    eligible = [
        f
        for f in sorted(functions, key=lambda f: (f.owner, f.app, f.function))
        if f.calls(start, minutes) >= spec.min_calls
        and f.durations.points_ms[3] / 1000.0 <= spec.max_duration_s
    ]
    if len(eligible) < spec.functions:
        raise ValueError(
            f"only {len(eligible)} functions have calls in minutes {start}..{start + minutes}"
            f" and a median within {spec.max_duration_s:g} s; asked for {spec.functions}"
        )
    chosen = rng.sample(eligible, spec.functions)
    calls = []
    for f in sorted(chosen, key=lambda f: f.name):
        memory = memory_limit_mb(f.memory_mb)
        for m in range(minutes):
            k = f.per_minute[start + m]
            if spec.spread == "even":
                offset = rng.random()
                times = [(m + (i + offset) / k) * 60.0 for i in range(k)]
            else:
                times = [(m + rng.random()) * 60.0 for _ in range(k)]
            for t in times:
                d = min(spec.max_duration_s, f.durations.draw(rng.random()))
                calls.append(TraceCall(t * spec.time_scale, f.name, d, None, memory))
    calls.sort(key=lambda c: (c.arrival_s, c.function))
    return calls


def read_azure2021(
    path: str | Path,
    start_s: float = 0.0,
    window_s: float | None = None,
    max_duration_s: float | None = None,
    time_scale: float = 1.0,
) -> list[TraceCall]:
    """The calls of a 2021 per-invocation file (``app,func,end_timestamp,duration``) that
    arrive in ``[start_s, start_s + window_s)`` counted from the file's first arrival,
    durations cut at ``max_duration_s``; arrivals relative to the window's start, times
    ``time_scale``."""
    path = Path(path)
    raw: list[tuple[float, str, float]] = []
    for n, row in _rows(path):
        where = f"{path}: line {n}"
        app, func = row.get("app") or "", row.get("func") or ""
        if not app or not func:
            raise ValueError(f"{where}: app and func are required")
        end, duration = _number(row, "end_timestamp", where), _number(row, "duration", where)
        raw.append((end - duration, f"az-{app[:6]}-{func[:8]}", duration))
    if not raw:
        raise ValueError(f"{path}: no calls")
    t0 = min(a for a, _, _ in raw) + start_s
    end_s = math.inf if window_s is None else t0 + window_s
    cap = math.inf if max_duration_s is None else max_duration_s
    calls = [
        TraceCall((a - t0) * time_scale, fn, min(d, cap)) for a, fn, d in raw if t0 <= a < end_s
    ]
    calls.sort(key=lambda c: (c.arrival_s, c.function))
    return calls


def offered_load(calls: list[TraceCall], cores: int, window_s: float) -> float:
    """Work offered per core over the window (1.0: the cores exactly busy)."""
    return sum(c.duration_s for c in calls) / (cores * window_s)
