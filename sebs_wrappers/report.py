"""The experiment's Markdown report: configuration, idle medians, summary tables, ratios to
the baseline, per-function tables, client send lateness, and the plots embedded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _f(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e6:
            return str(int(v))
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.{digits}g}"
    return str(v)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_f(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def render(
    *,
    config: dict[str, Any],
    idle: dict[str, float],
    summary: dict[tuple, dict[str, Any]],
    per_function: dict[tuple, dict[str, Any]],
    ratios: dict[tuple, dict[str, float]],
    lateness: dict[tuple, dict[str, float]],
    plots: Sequence[tuple[str, Path]],
    out_dir: Path,
    baseline: str,
    notes: Sequence[str] = (),
    policies: Sequence[str] = (),
) -> str:
    order = {p: i for i, p in enumerate(policies)}

    def pkey(policy: str) -> tuple[int, str]:
        return (order.get(policy, len(order)), policy)

    lines = ["# Node-level call scheduling: experiment report", ""]
    lines += [
        "Protocol of *call-scheduling-faas* at our scale: for each policy a fresh platform, the "
        "SeBS functions deployed and warmed, idle medians measured one call at a time, then the "
        "same uniform call sequences replayed open-loop. R = reply time - scheduled send time; "
        "S = R / idle median of the function. Failed calls are counted, not averaged.",
        "",
        "## Configuration",
        "",
    ]
    lines += _table(["setting", "value"], [(k, _cfg(v)) for k, v in config.items()])
    for note in notes:
        lines += [f"> {note}", ""]

    lines += ["## Idle medians (p, one call at a time, warm)", ""]
    lines += _table(["function", "p [ms]"], [(a, 1e3 * p) for a, p in sorted(idle.items())])

    lines += ["## Response time and stretch per policy and intensity", ""]
    header = ["policy", "I", "calls", "failed", "cold"]
    header += [f"R {s}" for s in ("mean", "q1", "median", "q3", "p95", "p99")]
    header += [f"S {s}" for s in ("mean", "median", "p95", "p99")]
    header += ["duration [ms]", "waitTime [ms]"]
    rows = []
    for (policy, intensity), s in sorted(
        summary.items(), key=lambda kv: (kv[0][1], pkey(kv[0][0]))
    ):
        r, st = s["response"], s["stretch"]
        rows.append(
            [policy, intensity, s["calls"], s["failed"], s["cold"]]
            + [r[k] for k in ("mean", "q1", "median", "q3", "p95", "p99")]
            + [st[k] for k in ("mean", "median", "p95", "p99")]
            + [s["duration_ms"], s["wait_ms"]]
        )
    lines += [
        "R in seconds. duration and waitTime: means from the activation records (the "
        "platform's processing time and queueing); a duration well above the idle median "
        "means the cores were contended.",
        "",
        *_table(header, rows),
    ]

    if ratios:
        lines += [
            f"## Improvement over `{baseline}` (baseline mean ÷ policy mean; > 1 is better)",
            "",
        ]
        lines += _table(
            ["policy", "I", "mean R ratio", "mean S ratio"],
            [
                (p, i, v["response"], v["stretch"])
                for (p, i), v in sorted(ratios.items(), key=lambda kv: (kv[0][1], pkey(kv[0][0])))
            ],
        )

    if per_function:
        top = max(k[1] for k in per_function)
        lines += [f"## Per function at intensity {top:g}", ""]
        per_rows = [
            (
                p,
                a,
                s["calls"],
                s["failed"],
                s["response"]["mean"],
                s["response"]["median"],
                s["response"]["p95"],
                s["stretch"]["mean"],
                s["stretch"]["median"],
            )
            for (p, i, a), s in sorted(
                per_function.items(), key=lambda kv: (kv[0][2], pkey(kv[0][0]))
            )
            if i == top
        ]
        lines += _table(
            [
                "policy",
                "function",
                "calls",
                "failed",
                "R mean",
                "R median",
                "R p95",
                "S mean",
                "S median",
            ],
            per_rows,
        )

    if lateness:
        lines += ["## Client send lateness (sent - scheduled)", ""]
        lines += _table(
            ["policy", "I", "rep", "p50 [ms]", "p99 [ms]", "max [ms]"],
            [
                (k[0], k[1], k[2], v["p50_ms"], v["p99_ms"], v["max_ms"])
                for k, v in sorted(lateness.items(), key=lambda kv: tuple(map(str, kv[0])))
            ],
        )

    lines += ["## Figures", ""]
    for title, path in plots:
        rel = path.relative_to(out_dir) if path.is_relative_to(out_dir) else path
        lines += [f"### {title}", "", f"![{title}]({rel.as_posix()})", ""]
    return "\n".join(lines)


def _cfg(v: Any) -> str:
    if isinstance(v, list | tuple):
        return ", ".join(str(x) for x in v)
    return str(v)
