"""Response time and stretch statistics, per policy and intensity and per function.

Response time ``R = c - r``: reply received minus the call's scheduled send time (the client
side, as in the paper). Stretch ``S = R / p`` with ``p`` the function's idle median, the median
response time of warm calls made one at a time on an idle platform. Failed calls are counted,
never averaged in.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from whisk.summary import percentile

STAT_KEYS = ("count", "mean", "q1", "median", "q3", "p95", "p99", "max")


@dataclass
class CallRow:
    """One measured call, joined with its activation record."""

    policy: str
    intensity: float
    repetition: int
    seq: int
    action: str
    scheduled_s: float
    sent_s: float
    done_s: float
    status: int
    ok: bool
    activation_id: str = ""
    duration_ms: float | None = None
    wait_ms: float | None = None
    init_ms: float | None = None
    is_cold: bool | None = None
    idle_median_s: float | None = None
    error: str = ""

    @property
    def response_s(self) -> float:
        return self.done_s - self.scheduled_s

    @property
    def stretch(self) -> float | None:
        if not self.idle_median_s:
            return None
        return self.response_s / self.idle_median_s

    @property
    def cold(self) -> bool:
        return bool(self.is_cold) or bool(self.init_ms)


def describe(values: Iterable[float]) -> dict[str, float]:
    v = sorted(values)
    if not v:
        return {k: (0 if k == "count" else math.nan) for k in STAT_KEYS}
    return {
        "count": len(v),
        "mean": statistics.fmean(v),
        "q1": percentile(v, 25),
        "median": percentile(v, 50),
        "q3": percentile(v, 75),
        "p95": percentile(v, 95),
        "p99": percentile(v, 99),
        "max": v[-1],
    }


def idle_medians(samples: dict[str, list[float]]) -> dict[str, float]:
    """Median of each function's idle response times (seconds)."""
    return {a: statistics.median(v) for a, v in samples.items() if v}


def summarize(
    rows: Sequence[CallRow], key: Callable[[CallRow], tuple]
) -> dict[tuple, dict[str, Any]]:
    """Statistics of R and S for each group of rows sharing ``key(row)``."""
    groups: dict[tuple, list[CallRow]] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    out: dict[tuple, dict[str, Any]] = {}
    for k, group in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        good = [r for r in group if r.ok]
        stretches = [s for r in good if (s := r.stretch) is not None]
        out[k] = {
            "calls": len(group),
            "failed": len(group) - len(good),
            "cold": sum(r.cold for r in good),
            "duration_ms": _mean([r.duration_ms for r in good if r.duration_ms is not None]),
            "wait_ms": _mean([r.wait_ms for r in good if r.wait_ms is not None]),
            "response": describe(r.response_s for r in good),
            "stretch": describe(stretches),
        }
    return out


def by_policy_intensity(rows: Sequence[CallRow]) -> dict[tuple, dict[str, Any]]:
    return summarize(rows, lambda r: (r.policy, r.intensity))


def by_function(rows: Sequence[CallRow]) -> dict[tuple, dict[str, Any]]:
    return summarize(rows, lambda r: (r.policy, r.intensity, r.action))


def ratios(summary: dict[tuple, dict[str, Any]], baseline: str) -> dict[tuple, dict[str, float]]:
    """baseline / policy for mean R and mean S at each intensity (> 1: better than baseline)."""
    out: dict[tuple, dict[str, float]] = {}
    for (policy, intensity), s in summary.items():
        base = summary.get((baseline, intensity))
        if base is None or policy == baseline:
            continue
        out[(policy, intensity)] = {
            metric: _safe_div(base[metric]["mean"], s[metric]["mean"])
            for metric in ("response", "stretch")
        }
    return out


def _mean(v: list[float]) -> float:
    return statistics.fmean(v) if v else math.nan


def _safe_div(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) and not math.isnan(a) else math.nan


def flat(summary: dict[tuple, dict[str, Any]], key_names: Sequence[str]) -> list[dict[str, Any]]:
    """Summary rows as flat dicts (``response_mean``, ``stretch_p99`` ...) for CSV/JSON."""
    rows = []
    for k, s in summary.items():
        row: dict[str, Any] = dict(zip(key_names, k, strict=True))
        row.update(calls=s["calls"], failed=s["failed"], cold=s["cold"])
        row.update(duration_mean_ms=s["duration_ms"], wait_mean_ms=s["wait_ms"])
        for metric in ("response", "stretch"):
            for stat, value in s[metric].items():
                if stat != "count":
                    row[f"{metric}_{stat}"] = value
        rows.append(row)
    return rows


CALL_COLUMNS = [f.name for f in fields(CallRow)] + ["response_s", "stretch"]


def write_calls(path: Path, rows: Iterable[CallRow]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, CALL_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({**asdict(r), "response_s": r.response_s, "stretch": r.stretch})


def read_calls(path: Path) -> list[CallRow]:
    def opt(v: str) -> float | None:
        return float(v) if v not in ("", "None") else None

    out = []
    with path.open(newline="") as f:
        for d in csv.DictReader(f):
            out.append(
                CallRow(
                    policy=d["policy"],
                    intensity=float(d["intensity"]),
                    repetition=int(d["repetition"]),
                    seq=int(d["seq"]),
                    action=d["action"],
                    scheduled_s=float(d["scheduled_s"]),
                    sent_s=float(d["sent_s"]),
                    done_s=float(d["done_s"]),
                    status=int(d["status"]),
                    ok=d["ok"] == "True",
                    activation_id=d["activation_id"],
                    duration_ms=opt(d["duration_ms"]),
                    wait_ms=opt(d["wait_ms"]),
                    init_ms=opt(d["init_ms"]),
                    is_cold=None if d["is_cold"] in ("", "None") else d["is_cold"] == "True",
                    idle_median_s=opt(d["idle_median_s"]),
                    error=d.get("error", ""),
                )
            )
    return out


def write_table(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not rows:
        path.write_text("")
        return
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
