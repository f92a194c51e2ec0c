"""Response time, stretch and percentiles on hand-made data; tables, report and plots."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from gatling.scenario import Timing
from sebs_wrappers import analysis, report, results
from sebs_wrappers.analysis import CallRow


def row(
    policy: str,
    r: float,
    *,
    action: str = "f",
    ok: bool = True,
    p: float | None = 0.5,
    intensity: float = 60.0,
    init: float | None = None,
) -> CallRow:
    return CallRow(
        policy,
        intensity,
        0,
        0,
        action,
        10.0,
        10.01,
        10.0 + r,
        200 if ok else 502,
        ok,
        init_ms=init,
        idle_median_s=p,
    )


def test_percentile_matches_linear_interpolation() -> None:
    v = [1.0, 2.0, 3.0, 4.0]
    assert analysis.percentile(v, 0) == 1.0
    assert analysis.percentile(v, 100) == 4.0
    assert analysis.percentile(v, 50) == 2.5
    assert analysis.percentile(v, 25) == pytest.approx(1.75)
    assert analysis.percentile(list(map(float, range(101))), 99) == pytest.approx(99.0)
    assert math.isnan(analysis.percentile([], 50))


def test_describe() -> None:
    d = analysis.describe([5.0, 1.0, 3.0])
    assert d == {
        "count": 3,
        "mean": 3.0,
        "q1": 2.0,
        "median": 3.0,
        "q3": 4.0,
        "p95": pytest.approx(4.8),
        "p99": pytest.approx(4.96),
        "max": 5.0,
    }
    assert analysis.describe([])["count"] == 0


def test_response_time_and_stretch() -> None:
    r = row("fifo", 2.0, p=0.5)
    assert r.response_s == pytest.approx(2.0)  # from the scheduled send time, not the sent time
    assert r.stretch == pytest.approx(4.0)
    assert row("fifo", 0.25, p=0.5).stretch == pytest.approx(0.5)  # can be < 1, as in the paper
    assert row("fifo", 1.0, p=None).stretch is None


def test_summaries_exclude_failures_and_count_cold_starts() -> None:
    rows = [
        row("openwhisk", 4.0, init=300),
        row("openwhisk", 8.0),
        row("openwhisk", 1.0, ok=False),
        row("fc", 1.0),
        row("fc", 2.0, init=10),
    ]
    s = analysis.by_policy_intensity(rows)
    ow, fc = s[("openwhisk", 60.0)], s[("fc", 60.0)]
    assert (ow["calls"], ow["failed"], ow["cold"]) == (3, 1, 1)
    assert ow["response"]["mean"] == pytest.approx(6.0)
    assert ow["stretch"]["mean"] == pytest.approx(12.0)
    assert fc["response"]["median"] == pytest.approx(1.5)
    ratios = analysis.ratios(s, "openwhisk")
    assert ratios[("fc", 60.0)]["response"] == pytest.approx(4.0)
    assert ratios[("fc", 60.0)]["stretch"] == pytest.approx(4.0)
    assert ("openwhisk", 60.0) not in ratios


def test_per_function_and_flat_tables(tmp_path: Path) -> None:
    rows = [
        row("fifo", 1.0, action="a"),
        row("fifo", 3.0, action="b"),
        row("fifo", 5.0, action="b"),
    ]
    per_fn = analysis.by_function(rows)
    assert per_fn[("fifo", 60.0, "b")]["response"]["mean"] == pytest.approx(4.0)
    flat = analysis.flat(per_fn, ("policy", "intensity", "action"))
    assert flat[1]["action"] == "b" and flat[1]["response_mean"] == pytest.approx(4.0)
    assert "stretch_p99" in flat[0]
    analysis.write_calls(tmp_path / "calls.csv", rows)
    back = analysis.read_calls(tmp_path / "calls.csv")
    assert [(r.action, r.response_s, r.ok) for r in back] == [
        (r.action, pytest.approx(r.response_s), r.ok) for r in rows
    ]


def test_join_uses_activation_records() -> None:
    timings = [
        Timing(0, "f", 0.0, 0.001, 0.5, 200, "a0"),
        Timing(1, "f", 0.1, 0.101, 0.9, 200, "a1"),
        Timing(2, "f", 0.2, 0.201, 0.3, 502, "", "http 502"),
    ]
    records = {
        0: {
            "duration": 120,
            "annotations": [{"key": "waitTime", "value": 7}, {"key": "initTime", "value": 250}],
            "response": {"success": True, "result": {"is_cold": True, "result": {"result": 1}}},
        },
        1: {
            "duration": 100,
            "annotations": [{"key": "waitTime", "value": 300}],
            "response": {
                "success": True,
                "result": {"result": "Error - invocation failed! Reason: x"},
            },
        },
    }
    rows = results.join("fc", 60.0, 0, timings, records)
    assert (rows[0].ok, rows[0].duration_ms, rows[0].wait_ms, rows[0].init_ms) == (
        True,
        120,
        7,
        250,
    )
    assert rows[0].cold and rows[0].is_cold
    assert not rows[1].ok  # the SeBS wrapper caught an exception
    assert not rows[2].ok and rows[2].error == "http 502"


def test_report_renders_tables_and_figures(tmp_path: Path) -> None:
    rows = [row("openwhisk", 4.0), row("fc", 1.0)]
    summary = analysis.by_policy_intensity(rows)
    fig = tmp_path / "plots" / "x.png"
    text = report.render(
        config={"cores": 2, "policies": ["openwhisk", "fc"]},
        idle={"f": 0.5},
        summary=summary,
        per_function=analysis.by_function(rows),
        ratios=analysis.ratios(summary, "openwhisk"),
        lateness={("fc", 60.0, 0): {"p50_ms": 0.4, "p99_ms": 2.0, "max_ms": 3.0}},
        plots=[("Response time", fig)],
        out_dir=tmp_path,
        baseline="openwhisk",
    )
    assert "| fc | 60 |" in text
    assert "![Response time](plots/x.png)" in text
    assert "Improvement over `openwhisk`" in text
    assert "| f | 500 |" in text  # idle median in ms


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib missing")
def test_outputs_from_raw_files(tmp_path: Path) -> None:
    rows = []
    for policy, scale in (("openwhisk", 4.0), ("fifo", 2.0), ("fc", 1.0)):
        for intensity in (30.0, 60.0):
            for i in range(20):
                rows.append(
                    row(
                        policy,
                        scale * (1 + i / 10) * intensity / 30,
                        action=f"f{i % 3}",
                        intensity=intensity,
                    )
                )
    idle = {"fifo": {"f0": [0.1, 0.2, 0.3], "f1": [0.5], "f2": [1.0]}}
    results.save_raw(
        tmp_path, rows, idle, {("fc", 30.0, 0): {"p50_ms": 1, "p99_ms": 2, "max_ms": 3}}
    )
    (tmp_path / "config.json").write_text('{"policies": ["openwhisk", "fifo", "fc"]}')
    path = results.write_outputs(tmp_path)
    text = path.read_text()
    for png in ("response.png", "stretch.png", "per_function_i60.png", "cdf_i60.png", "means.png"):
        assert (tmp_path / "plots" / png).stat().st_size > 1000
        assert f"plots/{png}" in text
    assert (tmp_path / "summary.csv").read_text().startswith("policy,intensity,calls")
    back = analysis.read_calls(tmp_path / "calls.csv")
    assert {r.idle_median_s for r in back if r.action == "f0"} == {0.2}
