"""The Azure Functions loaders on the committed sample (tests/data/azure-sample: synthetic
values in the exact format of Azure/AzurePublicDataset, made by its make_sample.py)."""

import csv
import itertools
import statistics
from collections import Counter
from pathlib import Path

import pytest

from invoker.azure import (
    Durations,
    SliceSpec,
    draw_slice,
    memory_limit_mb,
    offered_load,
    read_azure2019,
    read_azure2021,
)
from invoker.simulate import SimulationSettings, simulate

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "azure-sample"
DAY1 = "anon.d01.csv"


def test_2019_files_are_joined_on_owner_app_and_function():
    functions = read_azure2019(SAMPLE)
    assert len(functions) == 80
    with open(SAMPLE / f"invocations_per_function_md.{DAY1}", newline="") as f:
        rows = {r["HashFunction"]: r for r in csv.DictReader(f)}
    with open(SAMPLE / f"function_durations_percentiles.{DAY1}", newline="") as f:
        durations = {r["HashFunction"]: r for r in csv.DictReader(f)}
    with open(SAMPLE / f"app_memory_percentiles.{DAY1}", newline="") as f:
        memory = {(r["HashOwner"], r["HashApp"]): r for r in csv.DictReader(f)}
    for fn in functions:
        row = rows[fn.function]
        assert fn.trigger == row["Trigger"] and fn.app == row["HashApp"]
        assert fn.per_minute == tuple(int(row[str(m)]) for m in range(1, 1441))
        assert fn.durations.points_ms[3] == float(durations[fn.function]["percentile_Average_50"])
        assert fn.memory_mb == float(memory[(fn.owner, fn.app)]["AverageAllocatedMb"])
    assert len({fn.name for fn in functions}) == 80  # action names are unique


def test_durations_are_drawn_between_the_percentiles():
    d = Durations(100.0, (1.0, 2.0, 10.0, 20.0, 40.0, 400.0, 1000.0))
    assert d.draw(0.0) == 0.001 and d.draw(1.0) == 1.0
    assert d.draw(0.5) == pytest.approx(0.020)
    assert d.draw(0.375) == pytest.approx(0.015)  # halfway from p25 to p50
    assert d.draw(0.995) == pytest.approx(0.7)  # halfway from p99 to p100


def test_a_slice_keeps_each_minutes_calls_and_is_seeded():
    functions = read_azure2019(SAMPLE)
    spec = SliceSpec(functions=20, start_minute=600, minutes=10, seed=3)
    calls = draw_slice(functions, spec)
    assert calls == draw_slice(functions, spec)  # the same seed, the same slice
    assert calls != draw_slice(functions, SliceSpec(functions=20, start_minute=600, seed=4))
    by_name = {f.name: f for f in functions}
    names = {c.function for c in calls}
    assert len(names) == 20
    counts = Counter((c.function, int(c.arrival_s // 60)) for c in calls)
    for name in names:
        f = by_name[name]
        for m in range(10):
            assert counts[(name, m)] == f.per_minute[600 + m]
        durations = [c.duration_s for c in calls if c.function == name]
        lo, hi = f.durations.points_ms[0] / 1000, f.durations.points_ms[-1] / 1000
        assert all(lo - 1e-9 <= d <= min(hi, spec.max_duration_s) + 1e-9 for d in durations)
        assert {c.memory_mb for c in calls if c.function == name} == {memory_limit_mb(f.memory_mb)}
    assert [c.arrival_s for c in calls] == sorted(c.arrival_s for c in calls)
    assert calls[0].arrival_s >= 0 and calls[-1].arrival_s < 600


def test_a_slice_draws_durations_from_the_percentiles():
    # Over a day, a busy function's drawn durations have the dataset's median and p99.
    functions = read_azure2019(SAMPLE)
    calls = draw_slice(functions, SliceSpec(functions=80, minutes=1440, max_duration_s=1e6))
    busiest = max(functions, key=lambda f: sum(f.per_minute))
    mine = sorted(c.duration_s for c in calls if c.function == busiest.name)
    assert len(mine) == sum(busiest.per_minute) > 10_000
    points = [p / 1000 for p in busiest.durations.points_ms]
    assert statistics.median(mine) == pytest.approx(points[3], rel=0.05)
    # The share of draws below each percentile is that percentile (the p99-p100 segment is
    # too steep to compare values there).
    for q, point in ((0.25, points[2]), (0.75, points[4]), (0.99, points[5])):
        below = sum(1 for d in mine if d <= point) / len(mine)
        assert below == pytest.approx(q, abs=0.01)


def test_the_duration_cap_spread_and_time_scale():
    functions = read_azure2019(SAMPLE)
    capped = draw_slice(functions, SliceSpec(functions=30, minutes=30, max_duration_s=5.0))
    assert max(c.duration_s for c in capped) == 5.0
    spec = SliceSpec(functions=30, minutes=30, max_duration_s=5.0, spread="even")
    even = draw_slice(functions, spec)
    name = Counter(c.function for c in even).most_common(1)[0][0]
    minute0 = [c.arrival_s for c in even if c.function == name and c.arrival_s < 60]
    gaps = {round(b - a, 6) for a, b in itertools.pairwise(minute0)}
    assert len(gaps) == 1  # evenly spaced in the minute
    half = draw_slice(functions, SliceSpec(functions=30, minutes=30, time_scale=0.5))
    full = draw_slice(functions, SliceSpec(functions=30, minutes=30))
    assert [c.arrival_s for c in half] == [c.arrival_s / 2 for c in full]
    with pytest.raises(ValueError, match=r"only \d+ functions have calls"):
        draw_slice(functions, SliceSpec(functions=81, minutes=1440))
    with pytest.raises(ValueError, match="within the day"):
        SliceSpec(start_minute=1435, minutes=10)


def test_bad_2019_input_is_named(tmp_path):
    for name in ("invocations_per_function_md", "app_memory_percentiles"):
        (tmp_path / f"{name}.{DAY1}").write_bytes((SAMPLE / f"{name}.{DAY1}").read_bytes())
    text = (SAMPLE / f"function_durations_percentiles.{DAY1}").read_text().splitlines()
    cells = text[1].split(",")
    cells[-1] = "0"  # p100 below p99
    (tmp_path / f"function_durations_percentiles.{DAY1}").write_text(
        "\n".join([text[0], ",".join(cells)]) + "\n"
    )
    with pytest.raises(ValueError, match="line 2: duration percentiles decrease"):
        read_azure2019(tmp_path)
    with pytest.raises(ValueError, match="cannot read"):
        read_azure2019(tmp_path, day=2)


def test_2021_calls_arrive_at_end_minus_duration():
    path = SAMPLE / "AzureFunctionsInvocationTraceForTwoWeeksJan2021.txt"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    calls = read_azure2021(path)
    assert len(calls) == len(rows)
    first = min(float(r["end_timestamp"]) - float(r["duration"]) for r in rows)
    row = rows[100]
    arrival = float(row["end_timestamp"]) - float(row["duration"]) - first
    name = f"az-{row['app'][:6]}-{row['func'][:8]}"
    assert any(
        c.function == name and c.arrival_s == pytest.approx(arrival, abs=1e-6) for c in calls
    )
    window = read_azure2021(path, start_s=600, window_s=300, max_duration_s=2.0, time_scale=0.5)
    assert window and all(0 <= c.arrival_s < 150 for c in window)
    assert max(c.duration_s for c in window) <= 2.0
    assert len(window) == sum(
        1 for r in rows if 600 <= float(r["end_timestamp"]) - float(r["duration"]) - first < 900
    )


def test_a_slice_runs_in_the_simulator():
    calls = draw_slice(read_azure2019(SAMPLE), SliceSpec(functions=10, start_minute=60, seed=2))
    load = offered_load(calls, 2, 600)
    r = simulate(calls, "fc", SimulationSettings(cores=2))
    assert r["calls"] == len(calls) > 50 and load > 0
    assert r["mean_response_s"] >= statistics.mean(c.duration_s for c in calls) - 1e-6
