"""Response-time and stretch statistics, per policy and per function."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Outcome:
    function: str
    response_s: float
    processing_s: float  # p for the stretch: the function's idle (one-core) time

    @property
    def stretch(self) -> float:
        return self.response_s / self.processing_s if self.processing_s > 0 else math.inf


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100] (numpy's default method); the one
    definition every report and benchmark of the project uses."""
    if not values:
        return math.nan
    if any(a > b for a, b in itertools.pairwise(values)):
        values = sorted(values)
    pos = (len(values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def describe(values: Iterable[float], prefix: str) -> dict[str, float]:
    v = sorted(values)
    return {
        f"mean_{prefix}": sum(v) / len(v) if v else math.nan,
        f"p25_{prefix}": percentile(v, 25),
        f"p50_{prefix}": percentile(v, 50),
        f"p75_{prefix}": percentile(v, 75),
        f"p95_{prefix}": percentile(v, 95),
        f"p99_{prefix}": percentile(v, 99),
        f"max_{prefix}": v[-1] if v else math.nan,
    }


def summarize(outcomes: Sequence[Outcome]) -> dict[str, object]:
    per_fn: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        per_fn[o.function].append(o)
    return {
        "calls": len(outcomes),
        **describe((o.response_s for o in outcomes), "response_s"),
        **describe((o.stretch for o in outcomes), "stretch"),
        "per_function": {
            fn: {
                "calls": len(os_),
                "mean_response_s": sum(o.response_s for o in os_) / len(os_),
                "max_response_s": max(o.response_s for o in os_),
                "mean_stretch": sum(o.stretch for o in os_) / len(os_),
            }
            for fn, os_ in sorted(per_fn.items())
        },
    }
