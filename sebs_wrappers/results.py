"""Experiment results on disk: raw per-call rows, idle samples, activation records, and the
derived tables, plots and report (re-creatable from the raw files with ``--report-only``).

Layout of an output directory::

    config.json  calls.csv  idle.csv  lateness.json      raw measurements
    summary.csv  per_function.csv  summary.json         statistics
    plots/*.png  report.md                              figures and the report
    scenarios/i<I>-r<R>.jsonl  runs/<policy>/i<I>-r<R>/{timings.csv,records.jsonl}
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from gatling.scenario import Timing
from sebs_wrappers import analysis, plots, report
from sebs_wrappers.analysis import CallRow
from sebs_wrappers.labels import baseline_label
from whisk.client import annotation


async def collect_records(ow: Any, res: Any, concurrency: int = 16) -> dict[int, dict]:
    """Activation records for every replied call: from the replies, else GET /activations."""
    records = dict(res.records)
    sem = asyncio.Semaphore(concurrency)

    async def fetch(t: Timing) -> None:
        async with sem:
            rec = await ow.wait_activation(t.activation_id, timeout_s=30.0)
        if rec is not None:
            records[t.seq] = rec

    await asyncio.gather(
        *(fetch(t) for t in res.timings if t.activation_id and t.seq not in records)
    )
    return records


def save_records(path: Path, records: dict[int, dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for seq in sorted(records):
            f.write(json.dumps({"seq": seq, "record": records[seq]}) + "\n")


def record_ok(record: dict) -> bool:
    """Successful activation whose SeBS wrapper did not report a caught exception."""
    response = record.get("response") or {}
    if not response.get("success", response.get("statusCode") == 0):
        return False
    result = response.get("result")
    inner = result.get("result") if isinstance(result, dict) else None
    return not (isinstance(inner, str) and inner.startswith("Error"))


def join(
    policy: str, intensity: float, rep: int, timings: list[Timing], records: dict[int, dict]
) -> list[CallRow]:
    rows = []
    for t in timings:
        rec = records.get(t.seq)
        ok = t.status in (200, 202) and (record_ok(rec) if rec else t.status == 200)
        result = ((rec or {}).get("response") or {}).get("result")
        rows.append(
            CallRow(
                policy=policy,
                intensity=intensity,
                repetition=rep,
                seq=t.seq,
                action=t.action,
                scheduled_s=t.scheduled_s,
                sent_s=t.sent_s,
                done_s=t.done_s,
                status=t.status,
                ok=ok,
                activation_id=t.activation_id,
                duration_ms=_num(rec.get("duration")) if rec else None,
                wait_ms=_num(annotation(rec, "waitTime")) if rec else None,
                init_ms=_num(annotation(rec, "initTime")) if rec else None,
                is_cold=result.get("is_cold") if isinstance(result, dict) else None,
                error=t.error,
            )
        )
    return rows


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) else None


def save_raw(
    out: Path,
    rows: list[CallRow],
    idle: dict[str, dict[str, list[float]]],
    lateness: dict[tuple, dict[str, float]],
) -> None:
    """Write what was measured so far (after every policy, so a crash keeps the rest)."""
    analysis.write_calls(out / "calls.csv", rows)
    with (out / "idle.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", "action", "response_s"])
        for policy, per_action in idle.items():
            for action, values in per_action.items():
                w.writerows([policy, action, f"{v:.6f}"] for v in values)
    (out / "lateness.json").write_text(
        json.dumps([{"key": list(k), **v} for k, v in lateness.items()], indent=1)
    )


def load_raw(
    out: Path,
) -> tuple[list[CallRow], dict[str, dict[str, list[float]]], dict[tuple, dict[str, float]]]:
    """What ``save_raw`` wrote: rows, idle samples by policy and action, lateness."""
    rows = analysis.read_calls(out / "calls.csv")
    idle: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    if (out / "idle.csv").exists():
        with (out / "idle.csv").open(newline="") as f:
            for r in csv.DictReader(f):
                idle[r["policy"]][r["action"]].append(float(r["response_s"]))
    lateness: dict[tuple, dict[str, float]] = {}
    if (out / "lateness.json").exists():
        for item in json.loads((out / "lateness.json").read_text()):
            lateness[tuple(item.pop("key"))] = item
    return rows, {p: dict(v) for p, v in idle.items()}, lateness


def read_idle(path: Path) -> dict[str, list[float]]:
    """Idle samples per action, pooled over policies (an idle platform schedules nothing)."""
    samples: dict[str, list[float]] = defaultdict(list)
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            samples[r["action"]].append(float(r["response_s"]))
    return dict(samples)


def write_outputs(out: Path) -> Path:
    """Statistics, plots and report from the raw files in ``out``; returns the report path."""
    config = json.loads((out / "config.json").read_text()) if (out / "config.json").exists() else {}
    rows = analysis.read_calls(out / "calls.csv")
    idle = analysis.idle_medians(read_idle(out / "idle.csv"))
    for r in rows:
        r.idle_median_s = idle.get(r.action)
    analysis.write_calls(out / "calls.csv", rows)
    _, _, lateness = load_raw(out)

    policies = _ordered(config.get("policies"), [r.policy for r in rows])
    intensities = sorted({r.intensity for r in rows})
    summary = analysis.by_policy_intensity(rows)
    per_fn = analysis.by_function(rows)
    baseline = baseline_label(policies)  # e.g. openwhisk@2 when FC on 1 core faces it
    ratios = analysis.ratios(summary, baseline)
    analysis.write_table(out / "summary.csv", analysis.flat(summary, ("policy", "intensity")))
    analysis.write_table(
        out / "per_function.csv", analysis.flat(per_fn, ("policy", "intensity", "action"))
    )
    (out / "summary.json").write_text(
        json.dumps(
            _clean(
                {
                    "idle_median_s": idle,
                    "summary": analysis.flat(summary, ("policy", "intensity")),
                    "ratios_vs_baseline": [
                        {"policy": p, "intensity": i, **v} for (p, i), v in ratios.items()
                    ],
                    "lateness_ms": [{"key": list(k), **v} for k, v in lateness.items()],
                }
            ),
            indent=1,
        )
    )

    figures: list[tuple[str, Path]] = []
    notes = []
    if rows and not plots.available():
        print(plots.MISSING, file=sys.stderr)
        notes.append(plots.MISSING)
    elif rows:
        pdir = out / "plots"
        figures.append(
            (
                "Response time per policy and intensity",
                plots.distributions(rows, "response", policies, intensities, pdir / "response.png"),
            )
        )
        figures.append(
            (
                "Stretch per policy and intensity",
                plots.distributions(rows, "stretch", policies, intensities, pdir / "stretch.png"),
            )
        )
        top = intensities[-1]
        figures.append(
            (
                f"Per-function means at intensity {top:g}",
                plots.per_function(rows, policies, top, pdir / f"per_function_i{top:g}.png"),
            )
        )
        figures.append(
            (
                f"Response-time CDF at intensity {top:g}",
                plots.cdf(rows, policies, top, pdir / f"cdf_i{top:g}.png"),
            )
        )
        if len(intensities) > 1:
            figures.append(
                (
                    "Mean response time and stretch against intensity",
                    plots.means_vs_intensity(summary, policies, pdir / "means.png"),
                )
            )
    if config.get("short"):
        notes.append("Short (CI) configuration: too few calls for conclusions; see docs.")
    text = report.render(
        config=config,
        idle=idle,
        summary=summary,
        per_function=per_fn,
        ratios=ratios,
        lateness=lateness,
        plots=figures,
        out_dir=out,
        baseline=baseline,
        notes=notes,
        policies=policies,
    )
    path = out / "report.md"
    path.write_text(text)
    return path


def _ordered(preferred: list[str] | None, seen: list[str]) -> list[str]:
    present = list(dict.fromkeys(seen))
    order = [p for p in (preferred or []) if p in present]
    return order + [p for p in present if p not in order]


def _clean(v: Any) -> Any:
    """JSON has no NaN: empty statistics become null."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v
