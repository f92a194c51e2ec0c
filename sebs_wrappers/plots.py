"""Figures in the style of the paper: response-time and stretch distributions per policy and
intensity (its Figs. 3 and 4), per-function means, CDFs and means against intensity.

Matplotlib with the non-interactive Agg backend; every function writes one PNG and returns its
path.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sebs_wrappers.analysis import CallRow

_LABEL = {"response": "response time R [s]", "stretch": "stretch S = R / p"}


MISSING = (
    "plots skipped: matplotlib is not installed. The CSV, JSON and report files are "
    "complete; for the figures install the experiments extra (pip install -e '.[experiments]') "
    "and re-run with --report-only DIR."
)


def available() -> bool:
    """Whether matplotlib can be imported (it comes with the ``experiments`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _values(row: CallRow, metric: str) -> float | None:
    return row.response_s if metric == "response" else row.stretch


def _positive(values: list[float]) -> list[float]:
    """Log axes cannot show zero; clamp at a microsecond."""
    return [max(v, 1e-6) for v in values]


def distributions(
    rows: Sequence[CallRow],
    metric: str,
    policies: Sequence[str],
    intensities: Sequence[float],
    path: Path,
) -> Path:
    """Box plots per policy, one panel per intensity; boxes q1-q3, whiskers p5-p95, ^ = mean."""
    plt = _plt()
    data: dict[tuple[str, float], list[float]] = defaultdict(list)
    for r in rows:
        v = _values(r, metric)
        if r.ok and v is not None:
            data[(r.policy, r.intensity)].append(v)
    fig, axes = plt.subplots(
        1,
        len(intensities),
        figsize=(2.2 + 1.1 * len(policies) * len(intensities), 4),
        squeeze=False,
        sharey=True,
    )
    for ax, intensity in zip(axes[0], intensities, strict=True):
        series = [_positive(data.get((p, intensity), [])) or [float("nan")] for p in policies]
        ax.boxplot(
            series,
            tick_labels=list(policies),
            whis=(5, 95),
            showfliers=False,
            showmeans=True,
            meanprops={"marker": "^", "markerfacecolor": "black", "markeredgecolor": "black"},
        )
        ax.set_yscale("log")
        ax.set_title(f"intensity {intensity:g}")
        ax.tick_params(axis="x", labelrotation=45)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0][0].set_ylabel(_LABEL[metric])
    fig.tight_layout()
    return _save(fig, path)


def per_function(
    rows: Sequence[CallRow],
    policies: Sequence[str],
    intensity: float,
    path: Path,
) -> Path:
    """Mean response time and mean stretch of each function, bars grouped by policy."""
    plt = _plt()
    sums: dict[str, dict[tuple[str, str], list[float]]] = {
        "response": defaultdict(list),
        "stretch": defaultdict(list),
    }
    actions: list[str] = []
    for r in rows:
        if r.intensity != intensity or not r.ok:
            continue
        if r.action not in actions:
            actions.append(r.action)
        sums["response"][(r.policy, r.action)].append(r.response_s)
        if r.stretch is not None:
            sums["stretch"][(r.policy, r.action)].append(r.stretch)
    actions.sort()
    fig, axes = plt.subplots(
        2, 1, figsize=(max(6, 0.9 * len(actions) * max(1, len(policies)) / 2), 7)
    )
    width = 0.8 / max(1, len(policies))
    for ax, metric in zip(axes, ("response", "stretch"), strict=True):
        for i, policy in enumerate(policies):
            means = [_mean(sums[metric].get((policy, a), [])) for a in actions]
            xs = [j + (i - (len(policies) - 1) / 2) * width for j in range(len(actions))]
            ax.bar(xs, [max(m, 1e-6) for m in means], width, label=policy)
        ax.set_yscale("log")
        ax.set_xticks(range(len(actions)))
        ax.set_xticklabels([a.removeprefix("sebs-") for a in actions], rotation=30, ha="right")
        ax.set_ylabel("mean " + _LABEL[metric])
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0].set_title(f"per function, intensity {intensity:g}")
    axes[0].legend(ncol=min(6, len(policies)), fontsize="small")
    fig.tight_layout()
    return _save(fig, path)


def cdf(rows: Sequence[CallRow], policies: Sequence[str], intensity: float, path: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 4))
    for policy in policies:
        v = sorted(
            r.response_s for r in rows if r.ok and r.policy == policy and r.intensity == intensity
        )
        if v:
            ax.step(
                _positive(v), [(i + 1) / len(v) for i in range(len(v))], where="post", label=policy
            )
    ax.set_xscale("log")
    ax.set_xlabel(_LABEL["response"])
    ax.set_ylabel("fraction of calls")
    ax.set_title(f"response-time CDF, intensity {intensity:g}")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return _save(fig, path)


def means_vs_intensity(
    summary: dict[tuple, dict[str, Any]], policies: Sequence[str], path: Path
) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric in zip(axes, ("response", "stretch"), strict=True):
        for policy in policies:
            pts = sorted((k[1], s[metric]["mean"]) for k, s in summary.items() if k[0] == policy)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=policy)
        ax.set_yscale("log")
        ax.set_xlabel("core-level intensity [calls / core / min]")
        ax.set_ylabel("mean " + _LABEL[metric])
        ax.grid(which="both", alpha=0.3)
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    return _save(fig, path)


def _mean(v: list[float]) -> float:
    return sum(v) / len(v) if v else 0.0


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
