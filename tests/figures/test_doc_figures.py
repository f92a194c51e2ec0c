"""Figures in the docs that a deterministic command prints (the simulator on a virtual
clock, the committed fuzz corpus) are regenerated here and compared with the text, to the
digits the text shows: a change of the code that moves them fails until the docs follow.
Figures of timed benchmarks carry their date and command instead (docs/testing.md lists
which are which)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import statistics
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from invoker.azure import SliceSpec, draw_slice, read_azure2019
from invoker.simulate import SimulationSettings
from invoker.simulate import simulate as simulate_trace
from invoker.workloads import TraceCall
from ow_invoker.cli import main

ROOT = Path(__file__).resolve().parents[2]
SEBS_120 = "--workload sebs --intensity 120 --cores 4 --seed 1 --cold-start 0.5"
SEBS_CPU_120 = "--workload sebs-cpu --intensity 120 --cores 4 --seed 1 --cold-start 0.5"
IO_CPU = "--workload io-cpu --cores 1 --policy fc --policy fifo --policy openwhisk"
SEBS_150 = "--workload sebs --intensity 150 --cores 4 --seed 1 --policy sept"
TIMES = "\u00d7"  # the docs' multiplication sign


@cache
def simulate(args: str) -> dict[str, dict]:
    """``ow-invoker simulate ARGS --json``, by policy."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["simulate", *args.split(), "--json"]) == 0
    runs = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    return {r["policy"]: r for r in runs}


def doc(name: str) -> str:
    return (ROOT / name).read_text()


def flat(text: str) -> str:
    """Whitespace collapsed, so that a phrase matches across the text's line breaks."""
    return " ".join(text.split())


def table(text: str, header: str) -> dict[str, list[str]]:
    """The rows (first cell -> the other cells, bold marks dropped) of the Markdown table
    whose header row starts with ``header``."""
    lines = text[text.index(header) :].splitlines()
    rows = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def same(value: float, shown: str) -> bool:
    """Whether ``value`` prints as ``shown`` at the digits ``shown`` has."""
    digits = len(shown.partition(".")[2])
    return f"{value:.{digits}f}" == shown


def check_table(rows: dict[str, list[str]], expected: dict[str, list[float]]) -> None:
    """Every documented row against the run of its policy (a run may have more policies)."""
    wrong = [
        (policy, shown, f"{value:.4f}")
        for policy, cells in rows.items()
        for shown, value in zip(cells, expected[policy], strict=True)
        if not same(value, shown)
    ]
    assert not wrong, f"documented / printed: {wrong}"


def fn_mean(run: dict, function: str) -> float:
    return run["per_function"][function]["mean_response_s"]


def test_the_all_cpu_bound_sebs_table_in_policies_md():
    text = doc("docs/policies.md")
    assert f"ow-invoker simulate {SEBS_CPU_120.replace('120', 'I')}" in flat(text)
    runs = simulate(SEBS_CPU_120)
    fifo = runs["fifo"]["mean_response_s"]
    expected = {
        p: [
            r["mean_response_s"],
            r["p50_response_s"],
            r["p95_response_s"],
            r["p99_response_s"],
            r["mean_stretch"],
            r["mean_response_s"] / fifo,
        ]
        for p, r in runs.items()
    }
    check_table(table(text, "| intensity 120 (480 calls) |"), expected)
    fc, ow = runs["fc"], runs["openwhisk"]
    said = (
        f"`fc` {fc['mean_response_s']:.2f} s against `openwhisk` {ow['mean_response_s']:.2f} s "
        f"({fc['mean_response_s'] / ow['mean_response_s']:.2f}{TIMES}, stretch "
        f"{fc['mean_stretch'] / ow['mean_stretch']:.2f}{TIMES}); there `010.sleep` (burning "
        f"its second) answers in {fn_mean(fc, '010.sleep'):.2f} s under `fc`"
    )
    assert said in flat(text)


def test_the_sebs_table_with_measured_shares_in_policies_md():
    text = doc("docs/policies.md")
    assert f"ow-invoker simulate {SEBS_120}" in flat(text)
    runs = simulate(SEBS_120)
    ow = runs["openwhisk"]
    expected = {
        p: [
            r["mean_response_s"],
            r["p50_response_s"],
            r["p95_response_s"],
            r["p99_response_s"],
            r["mean_stretch"],
            r["mean_response_s"] / ow["mean_response_s"],
            r["mean_stretch"] / ow["mean_stretch"],
            fn_mean(r, "010.sleep"),
        ]
        for p, r in runs.items()
    }
    check_table(
        table(text, "| policy | mean R (s) | p50 R | p95 R | p99 R | mean stretch | R / openwhisk"),
        expected,
    )


def test_the_io_cpu_table_in_policies_md():
    text = doc("docs/policies.md")
    assert f"ow-invoker simulate {IO_CPU}" in flat(text)
    runs = simulate(IO_CPU)
    ow = runs["openwhisk"]
    expected = {
        p: [
            r["mean_response_s"],
            r["p95_response_s"],
            r["mean_stretch"],
            r["mean_response_s"] / ow["mean_response_s"],
            r["mean_stretch"] / ow["mean_stretch"],
            fn_mean(r, "sleep"),
            fn_mean(r, "spin"),
        ]
        for p, r in runs.items()
    }
    check_table(table(text, "| policy | mean R (s) | p95 R | mean stretch |"), expected)


def test_the_intensity_150_preemption_figures_in_policies_md():
    text = flat(doc("docs/policies.md"))
    assert f"ow-invoker simulate {SEBS_150} --json" in text
    plain = simulate(SEBS_150)["sept"]
    preempt = simulate(SEBS_150 + " --preempt")["sept"]
    dna = plain["per_function"]["504.dna-visualisation"]
    share = dna["calls"] * dna["mean_response_s"] / (plain["calls"] * plain["mean_response_s"])
    assert (
        f"the {dna['calls']} calls of 504.dna-visualisation (4.7 s each) answer in "
        f"{dna['mean_response_s']:.2f} s on average, against {plain['mean_response_s']:.2f} s "
        f"over all {plain['calls']} calls: {share * 100:.0f} % of the total response time"
    ) in text
    moved = ", ".join(
        f"{fn} {fn_mean(plain, fn):.2f} → {fn_mean(preempt, fn):.2f} s"
        for fn in ("110.dynamic-html", "503.graph-bfs")
    )
    assert f"(with `--preempt`, same command: {moved})" in text
    assert f"504's mean goes to {fn_mean(preempt, '504.dna-visualisation'):.2f} s" in text


@pytest.mark.parametrize("name", ["docs/reliability.md"])
def test_the_fuzz_corpus_counts(name):
    from tests.fuzz.run import NAMES

    corpus = ROOT / "tests" / "fuzz" / "corpus"
    seeds = sum(1 for f in corpus.rglob("*") if f.is_file())
    text = flat(doc(name))
    assert f"atheris, {len(NAMES)} targets" in text
    assert re.search(rf"`tests/fuzz/corpus/<target>` \({seeds} seeds:", text), seeds
    assert sorted(p.name for p in corpus.iterdir()) == sorted(NAMES)


def heavy_tail_rows(seed: int, load: str, cores: int) -> tuple[dict[str, list[str]], dict]:
    """The documented rows of one slice of ``benchmarks/bench_heavy_tail.py`` at 32 GB
    (policy -> mean R, p99 R, mean S and their three ratios), and the slice drawn and
    simulated as the benchmark does, by policy."""
    text = doc("docs/policies.md")
    lines = text[text.index("| slice | policy | mean R (s)") :].splitlines()[2:]
    rows = {}
    for line in lines:
        if not line.startswith("|"):
            break  # the table ends
        if not line.startswith(f"| seed {seed}, {load}, {cores} cores"):
            continue
        cells = [c.strip().strip("*").strip("`") for c in line.strip("|").split("|")]
        rows[cells[1]] = cells[2:]
    assert set(rows) == {"openwhisk", "fc", "sept-share", "fc-share", "gittins"}
    functions = read_azure2019(ROOT / "benchmarks" / "data" / "azure2019-invitro-66")
    spec = SliceSpec(functions=16, start_minute=0, minutes=20, max_duration_s=60.0, seed=seed)
    trace = [replace(c, memory_mb=256) for c in draw_slice(functions, spec)]
    settings = SimulationSettings(cores=cores, user_memory_mb=32768)
    return rows, {policy: simulate_trace(trace, policy, settings) for policy in rows}


def test_the_heavy_tail_rows_of_seed_1_in_policies_md():
    """The first slice of ``benchmarks/bench_heavy_tail.py`` (seed 1, 10 cores, 32 GB);
    the others are in test_benchmark_figures (slow)."""
    rows, results = heavy_tail_rows(1, "0.88", 10)
    expected = {
        policy: [r["mean_response_s"], r["p99_response_s"], r["mean_stretch"]]
        for policy, r in results.items()
    }
    check_table({policy: cells[:3] for policy, cells in rows.items()}, expected)


KEEP_ALIVE = (
    "--azure tests/data/azure-sample --functions 66 --minutes 60 --cores 8 --memory-mb 4096 "
    "--cold-start 0.5 --policy fc --policy openwhisk"
)
AHEAD = (
    "--workload sebs --intensity 120 --cores 4 --cold-start 0.5 --memory-mb 4096 "
    "--footprint-mb 25 --no-warmup --policy fc --policy fifo"
)


def test_the_keep_alive_and_create_ahead_figures_in_policies_md():
    text = doc("docs/policies.md")
    assert f"ow-invoker simulate {KEEP_ALIVE} [--footprint-mb 25]" in flat(text)
    assert f"ow-invoker simulate {AHEAD} [--create-ahead 8]" in flat(text)
    sample = KEEP_ALIVE.replace("tests/data", str(ROOT / "tests" / "data"))
    rows = text[text.index("| keep-alive | policy |") :].splitlines()[2:6]
    for row in rows:
        keep_alive, policy, *cells = (c.strip() for c in row.strip("|").split("|"))
        run = simulate(sample + ("" if keep_alive.startswith("limit") else " --footprint-mb 25"))
        r = run[policy]
        keys = ("mean_response_s", "p50_response_s", "p99_response_s", "mean_stretch")
        assert all(same(r[k], shown) for k, shown in zip(keys, cells[:4], strict=True)), row
        assert int(cells[4]) == r["cold_starts"], row
    before, after = simulate(AHEAD), simulate(AHEAD + " --create-ahead 8")
    fc0, fc8 = before["fc"]["mean_response_s"], after["fc"]["mean_response_s"]
    fifo0, fifo8 = before["fifo"]["mean_response_s"], after["fifo"]["mean_response_s"]
    said = (
        f"takes `fc`'s mean response from {fc0:.2f} s to {fc8:.2f} s ({fc8 / fc0:.2f}{TIMES}) "
        f"and `fifo`'s from {fifo0:.2f} s to {fifo8:.2f} s ({fifo8 / fifo0:.2f}{TIMES}), with "
        f"the same cold starts ({after['fc']['cold_starts']} and {after['fifo']['cold_starts']})"
    )
    assert said in flat(text)
    assert [before[p]["cold_starts"] for p in ("fc", "fifo")] == [30, 26]


def test_the_gittins_aged_row_of_seed_2_at_1_12_in_policies_md():
    """``gittins-aged``'s overloaded slice where it changes ``gittins`` most (seed 2, load
    1.12, 24 cores, 32 GB), re-simulated; the rest is in its committed output
    (benchmarks/results/bench_heavy_tail.gittins-aged.txt)."""
    section = doc("docs/policies.md").split("### Aging: `gittins-aged`")[1]
    row = next(
        line
        for line in section.splitlines()
        if line.startswith("| seed 2, 1.12, 24 cores | `gittins-aged` |")
    )
    shown = [c.strip() for c in row.strip("|").split("|")][2:5]
    functions = read_azure2019(ROOT / "benchmarks" / "data" / "azure2019-invitro-66")
    spec = SliceSpec(functions=16, start_minute=0, minutes=20, max_duration_s=60.0, seed=2)
    trace = [replace(c, memory_mb=256) for c in draw_slice(functions, spec)]
    r = simulate_trace(trace, "gittins-aged", SimulationSettings(cores=24, user_memory_mb=32768))
    expected = (r["mean_response_s"], r["p99_response_s"], r["mean_stretch"])
    assert shown == [f"{x:.2f}" for x in expected]


def live_slice(time_scale: float) -> list[TraceCall]:
    """The trace of ``bench_policies_live.py --mix azure --scale 0.12``."""
    functions = read_azure2019(ROOT / "benchmarks" / "data" / "azure2019-invitro-66")
    spec = SliceSpec(8, 1200, 2, max_duration_s=20.0, time_scale=time_scale)
    return [
        TraceCall(c.arrival_s, c.function, c.duration_s * 0.12) for c in draw_slice(functions, spec)
    ]


def test_the_simulator_columns_of_gittins_aged_live_on_one_core_in_policies_md():
    """The live table's simulated columns (bench_policies_live.py --mix azure --scale 0.12:
    the same trace, one core), where a late call gets a quarter of the core
    (policies.attained.partial_weight): the live columns carry their date and output."""
    section = doc("docs/policies.md").split("### Aging: `gittins-aged`")[1].split("\n## ")[0]
    rows = table(section, "| policy | live mean R |")
    trace = live_slice(time_scale=0.5)
    assert set(rows) == {"`openwhisk`", "`fc`", "`gittins`", "`gittins-aged`"}
    for name, cells in rows.items():
        settings = SimulationSettings(cores=1, user_memory_mb=8192)
        r = simulate_trace(trace, name.strip("`"), settings)
        expected = [
            f"{r['mean_response_s']:.2f} s",
            f"{r['p99_response_s']:.2f} s",
            f"{r['mean_stretch']:.1f}",
        ]
        assert cells[3:6] == expected, name


def test_the_simulator_columns_of_the_docker_wait_table_in_policies_md():
    """The simulated columns beside the live Docker runs (bench_policies_live.py --mix azure
    --scale 0.12 --time-scale 0.25 --cores 0,1 --sim-cold-start 0.5 --sim-create-cpu 0.3):
    each creation 0.3 s of the engine's CPU on the two cores, and ``+no-warm-wait`` the
    same policy with the invoker's --no-warm-wait."""
    section = doc("docs/policies.md").split("### Waiting for a warm container")[1]
    rows = table(section.split("\n## ")[0], "| policy | fresh: mean R |")
    trace = live_slice(time_scale=0.25)
    assert len(rows) == 5
    for name, cells in rows.items():
        policy, _, off = name.strip("`").partition("+")
        settings = SimulationSettings(
            cores=2,
            user_memory_mb=8192,
            cold_start_s=0.5,
            create_cpu_s=0.3,
            warm_wait=off != "no-warm-wait",
        )
        r = simulate_trace(trace, policy, settings)
        expected = [
            f"{r['mean_response_s']:.2f} s",
            f"{r['p99_response_s']:.2f} s",
            f"{r['mean_stretch']:.1f}",
        ]
        assert cells[8:11] == expected, name


def small_node_output() -> dict[str, dict[str, list[float]]]:
    """The committed ``bench_heavy_tail_bounds.py --small-node`` output: slice -> policy
    (without its "(simulator)" / "(ideal)") -> its figures and ratios."""
    path = ROOT / "benchmarks" / "results" / "bench_heavy_tail_bounds.small-node.txt"
    printed: dict[str, dict[str, list[float]]] = {}
    for line in path.read_text().splitlines():
        if line.startswith("seed "):
            slice_, policy = line[:24].strip(), line[25:49].strip().rpartition(" (")[0]
            printed.setdefault(slice_, {})[policy] = [float(x) for x in line[49:].split()]
    return printed


def test_the_small_node_table_in_policies_md():
    """The small-node table is what the committed output gives (counts of the 30 runs that
    meet each ratio, geometric means and worst), and one of its rows is what the simulator
    prints now (seed 2 at load 1.1 on one core, where aging costs most)."""
    printed = small_node_output()
    assert len(printed) == 30
    rows = table(doc("docs/policies.md"), f"| policy | mean R ≤ 0.9{TIMES} best |")
    names = {"`gittins`": "gittins", "`gittins-aged`": "gittins-aged"}
    for shown, cells in rows.items():
        runs = [r[names.get(shown, shown.removesuffix(" (ideal)"))] for r in printed.values()]
        counts = [
            sum(r[3] <= 0.9 for r in runs),
            sum(r[4] <= 1.25 for r in runs),
            sum(r[5] <= 1.0 for r in runs),
            sum(r[3] <= 0.9 and r[4] <= 1.25 and r[5] <= 1.0 for r in runs),
            sum(r[6] <= 1.15 for r in runs),
        ]
        assert [int(c) for c in cells[:5]] == counts, shown
        for cell, column in zip(cells[5:], (3, 4), strict=True):
            values = [r[column] for r in runs]
            mean = statistics.geometric_mean(values)
            assert cell == f"{mean:.3f} ({max(values):.2f})", (shown, cell)
    functions = read_azure2019(ROOT / "benchmarks" / "data" / "azure2019-invitro-66")
    spec = SliceSpec(functions=8, start_minute=1200, minutes=10, max_duration_s=20.0, seed=2)
    calls = [replace(c, memory_mb=256) for c in draw_slice(functions, spec)]
    scale = sum(c.duration_s for c in calls) / 600.0 / 1.1
    trace = [replace(c, arrival_s=c.arrival_s * scale) for c in calls]
    r = simulate_trace(trace, "gittins-aged", SimulationSettings(cores=1, user_memory_mb=32768))
    committed = printed["seed 2, 1.10, 1 cores"]["gittins-aged"]
    assert [round(r[k], 2) for k in ("mean_response_s", "p99_response_s", "mean_stretch")] == [
        round(x, 2) for x in committed[:3]
    ]
