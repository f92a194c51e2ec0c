"""The figures of the deterministic benchmarks (the node and GPU simulators on a virtual
clock), rerun by their committed commands and compared with the docs at the digits shown.

Each benchmark's whole table is checked: together about ten minutes of one core, so they
are marked slow: CI runs them, ``scripts/test.sh --fast`` does not (docs/testing.md lists
every figure and how it is checked).

kTasks on the virtual clock (``gpu.kaas.simulated``): the production queue and constant
cache with timed devices, exact to the event; and the simulator's part of
``benchmarks/bench_gpu_ktasks.py`` against the figures docs/gpu.md shows."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from invoker.azure import SliceSpec, draw_slice, read_azure2019
from invoker.simulate import SimulationSettings, simulate
from tests.figures.test_doc_figures import TIMES, check_table, doc, flat, same

# Minutes each on an idle core; a loaded machine (a CI neighbour) can triple that.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


ROOT = Path(__file__).resolve().parents[2]

NUMBER = re.compile(r"\d+(?:\.\d+)?")

EN_DASH = "\u2013"


def bench(script: str, *args: str) -> str:
    """What ``python benchmarks/SCRIPT ARGS`` prints."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=1500,
    ).stdout


def block_after(text: str, command: str) -> list[str]:
    """The non-empty lines of the fenced block that follow ``$ COMMAND`` in ``text``."""
    start = text.index(f"$ {command}\n") + len(command) + 3
    return [line for line in text[start : text.index("```", start)].splitlines() if line]


def numbers(cell: str) -> list[str]:
    return NUMBER.findall(cell)


def check_rows(documented: list[str], printed: list[float]) -> None:
    """Every number of a documented row against the benchmark's, at the digits shown."""
    shown = [n for cell in documented for n in numbers(cell)]
    assert len(shown) == len(printed), (documented, printed)
    wrong = [(s, f"{v:.4f}") for s, v in zip(shown, printed, strict=True) if not same(v, s)]
    assert not wrong, f"documented / printed: {wrong} in {documented}"


def doc_row(text: str, header: str, first: str) -> list[str]:
    """The cells after the first of the row starting ``| FIRST |`` of the table under
    ``header``."""
    lines = text[text.index(header) :].splitlines()
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == first:
            return cells[1:]
    raise AssertionError(f"no row {first!r} under {header!r}")


def test_the_gpu_simulator_reproduction_in_gpu_md_is_what_it_prints():
    command = ".venv/bin/python benchmarks/bench_gpu_sim.py"
    printed = [line for line in bench("bench_gpu_sim.py").splitlines() if line]
    assert block_after(doc("docs/gpu.md"), command) == printed


def test_the_gpu_capacity_table_in_gpu_md_is_what_it_prints():
    command = ".venv/bin/python benchmarks/bench_gpu_capacity.py --steps 8"
    printed = [line for line in bench("bench_gpu_capacity.py", "--steps", "8").splitlines()]
    documented = block_after(doc("docs/gpu.md"), command)
    assert documented == printed[-len(documented) :]
    assert len(documented) == 4  # the header and W = 15, 25, 35


def preemption_runs(intensity: str) -> dict[str, list[float]]:
    """``bench_preemption.py --intensity I``'s rows: policy -> R, p99, S, pauses[, ratio]."""
    runs = {}
    for line in bench("bench_preemption.py", "--intensity", intensity).splitlines():
        if line.split()[:1] == [intensity]:
            policy = re.match(r"\s*\S+ (\S+(?: --preempt)?)", line)
            assert policy is not None
            tail = line[policy.end() :]
            runs[policy.group(1)] = [float(n) for n in tail.split()]
    return runs


@pytest.mark.parametrize("intensity", ["60", "90", "120", "150"])
def test_the_preemption_tables_in_policies_md(intensity):
    runs = preemption_runs(intensity)
    text = doc("docs/policies.md")

    def rps(policy: str) -> list[float]:
        return runs[policy][:3]

    check_rows(
        doc_row(text, "| I | FIFO mean R / p99 / S |", intensity),
        rps("fifo")
        + rps("sept")
        + rps("sept --preempt")
        + runs["sept --preempt"][4:5]
        + rps("fc")
        + rps("fc --preempt")
        + runs["fc --preempt"][4:5],
    )
    readme = re.search(
        rf"preemptive SEPT's mean response (.+){TIMES} SEPT's at I = 60 / 90 / 120 / 150, "
        r"mean stretch ÷(.+); SEPT's p99",
        flat(doc("README.md")),
    )
    assert readme is not None
    at = ["60", "90", "120", "150"].index(intensity)
    assert same(runs["sept --preempt"][4], readme[1].split(f"{TIMES} / ")[at])
    assert same(runs["sept"][2] / runs["sept --preempt"][2], readme[2].split(" / ")[at])
    share, overdue, gittins = runs["sept-share"], runs["fc-share"], runs["gittins"]
    check_rows(
        doc_row(text, "| I | `fc` mean R / p99 / S | `sept-share` R vs `fc` |", intensity),
        [*rps("fc"), share[4], share[1], share[2], overdue[4], overdue[1], overdue[2]],
    )
    check_rows(
        doc_row(text, "| I | `gittins` R vs `fc` |", intensity),
        [gittins[4], gittins[1], gittins[2]],
    )


def test_the_capacity_table_in_policies_md():
    printed = bench("bench_capacity.py")
    text = doc("docs/policies.md")
    blocks = re.split(r"^N = ", printed, flags=re.M)[1:]
    said: list[str] = []  # the README's "3 of 4, 6 of 8, 9-10 of 16" (an en dash)
    assert [b.split(":")[0] for b in blocks] == ["4", "8", "16"]
    for block in blocks:
        n = block.split(":")[0]
        baseline = re.search(r"mean R ([\d.]+) s, p75 R ([\d.]+) s", block)
        assert baseline is not None
        fewest = []
        for label in ("fifo", "sept", "sept --preempt", "fc", "fc --preempt"):
            found = re.search(rf"^\s+{label}\s+matches it on (more than )?(\d+) cores", block, re.M)
            assert found is not None, (n, label)
            fewest.append(("> " if found.group(1) else "") + found.group(2))
        row = doc_row(text, "| N | `openwhisk` on N cores: mean / p75 R |", n)
        check_rows(row[:1], [float(baseline.group(1)), float(baseline.group(2))])
        assert [cell.replace("**", "").split(" (")[0] for cell in row[1:]] == fewest, n
        counts = sorted({int(fewest[1]), int(fewest[3])})  # SEPT's and FC's
        said.append(EN_DASH.join(map(str, counts)) + f" of {n}")
    readme = flat(doc("README.md"))
    assert f"with {', '.join(said)} cores" in readme


HEAVY_TAIL_POLICIES = (
    "openwhisk",
    "fc",
    "sept",
    "sept+preempt",
    "sept-share",
    "fc-share",
    "gittins",
)

Figures = dict[str, list[float]]  # policy -> a row's figures

Cells = dict[str, list[str]]  # policy -> a row's numbers as printed


def heavy_tail_output() -> tuple[dict[str, Figures], dict[str, Cells]]:
    """``bench_heavy_tail.py``'s rows by slice ("seed S, L.LL, N cores", with ", 2048 MB"
    at 2 GB): each policy's six figures; and by memory ("32768", "2048"): each policy's
    geometric means and worst ratios, as printed."""
    slices: dict[str, Figures] = {}
    means: dict[str, Cells] = {}
    into_slice: Figures | None = None
    into_means: Cells | None = None
    for line in bench("bench_heavy_tail.py").splitlines():
        cells = line.split()
        if head := re.match(r"slice seed (\d+), load ([\d.]+), (\d+) MB: \d+ calls on (\d+)", line):
            name = f"seed {head[1]}, {head[2]}, {head[4]} cores"
            name += "" if head[3] == "32768" else f", {head[3]} MB"
            into_slice, into_means = slices.setdefault(name, {}), None
        elif mean := re.match(r"(\d+) MB, over \d+ runs: geometric mean", line):
            into_slice, into_means = None, means.setdefault(mean[1], {})
        elif cells and cells[0] in HEAVY_TAIL_POLICIES:
            if into_slice is not None:
                into_slice[cells[0]] = [float(x) for x in cells[1:]]
            elif into_means is not None:
                into_means[cells[0]] = NUMBER.findall(line)
    return slices, means


def test_the_heavy_tail_tables_in_policies_md():
    """The geometric means of every run at both memories, and the three slices printed in
    full (seed 1 at 0.88 is also in test_doc_figures, in the fast tier)."""
    slices, means = heavy_tail_output()
    assert len(slices) == 20 and set(means) == {"32768", "2048"}
    text = doc("docs/policies.md")
    for policy in HEAVY_TAIL_POLICIES:
        row = doc_row(text, "| policy | R / best, 32 GB |", f"`{policy}`")
        shown = [n for cell in row for n in numbers(cell)]
        printed = means["32768"][policy] + means["2048"][policy]
        assert shown == printed, policy
    readme = flat(doc("README.md"))
    for policy, words in [
        ("sept-share", "`sept-share`"),
        ("fc-share", "`fc-share` (overdue calls share a core)"),
        (
            "gittins",
            "`gittins` (the CPU of calls that all run, by cgroup weights, to the highest "
            "Gittins index)",
        ),
    ]:
        mean, _, p99, _, stretch, _ = (float(x) for x in means["32768"][policy])
        said = f"mean R {mean:.2f}{TIMES}, p99 {p99:.2f}{TIMES}, stretch {stretch:.2f}{TIMES}"
        assert f"{words} {said}" in readme
    documented = 0
    for name, runs in slices.items():
        rows = {}
        for line in text[text.index("| slice | policy | mean R (s)") :].splitlines()[2:]:
            if not line.startswith("|"):
                break
            cells = [c.strip().strip("*").strip("`") for c in line.strip("|").split("|")]
            if cells[0] == name:
                rows[cells[1]] = cells[2:]
        if rows:
            documented += 1
            check_table(rows, runs)
    assert documented == 3


def bounds_output(*args: str) -> dict[str, dict[str, list[float]]]:
    """``bench_heavy_tail_bounds.py ARGS``' rows by slice, then by policy or model (its
    name without "(simulator)" or "(ideal)"): the numbers printed."""
    printed: dict[str, dict[str, list[float]]] = {}
    for line in bench("bench_heavy_tail_bounds.py", *args).splitlines():
        found = re.match(r"(seed \d+, [\d.]+, \d+ cores)\s+(\S+) \(\w+\)\s+(.*)", line)
        if found:
            printed.setdefault(found[1], {})[found[2]] = [float(x) for x in found[3].split()]
    return printed


def test_the_ideal_bounds_tables_in_policies_md():
    """``bench_heavy_tail_bounds.py``: every slice of the bounds table (the better
    baseline's mean and p99, LAS's mean, Gittins-past's, Gittins' and SRPT's mean and p99,
    as ratios to them), issue 40's table (``gittins``' figures, its ratios and its mean
    over Gittins-past's) and ``gittins-aged``'s distance to Gittins-past."""
    printed = bounds_output("--policy", "gittins", "--policy", "gittins-aged")
    assert len(printed) == 10
    text = doc("docs/policies.md")
    for name, rows in printed.items():
        ow, fc = rows["openwhisk"], rows["fc"]
        check_rows(
            doc_row(text, "| slice | best mean R | best p99 R | LAS R / best |", name),
            [
                min(ow[0], fc[0]),
                min(ow[1], fc[1]),
                rows["LAS"][3],
                *rows["Gittins-past"][3:5],
                *rows["Gittins"][3:5],
                *rows["SRPT"][3:5],
            ],
        )
        check_rows(
            doc_row(text, "| slice | `gittins` mean R | p99 R | mean S | R / best |", name),
            rows["gittins"],
        )
        check_rows(
            doc_row(text, "| slice | Gittins-past mean R (s) |", name),
            [rows["Gittins-past"][0], rows["gittins"][-1], rows["gittins-aged"][-1]],
        )
    # The model's LAS against the simulator's las (the gittins mechanism by attained service).
    functions = read_azure2019(ROOT / "benchmarks" / "data" / "azure2019-invitro-66")
    spec = SliceSpec(functions=16, start_minute=0, minutes=20, max_duration_s=60.0, seed=1)
    trace = [replace(c, memory_mb=256) for c in draw_slice(functions, spec)]
    las = simulate(trace, "las", SimulationSettings(cores=10, user_memory_mb=32768))
    model = printed["seed 1, 0.88, 10 cores"]["LAS"][0]
    said = f"(seed 1 at 0.88: {model:.2f} s and {las['mean_response_s']:.2f} s)"
    assert said in flat(text), said


def test_the_ideal_queue_at_2_gb_in_policies_md():
    """``bench_heavy_tail_bounds.py --memory-mb 2048`` on seed 1 (the other seeds' rows come
    from the committed output): the run-to-end model's FIFO is the simulator's ``openwhisk``
    to the digit, SJF-aged trades some of SJF's mean for a lower p99, and the documented rows
    are what it prints."""
    args = ("--seeds", "1", "--memory-mb", "2048", "--policy", "gittins")
    printed = bounds_output(*args, "--policy", "gittins-aged")
    assert len(printed) == 2
    text = doc("docs/policies.md")
    for name, rows in printed.items():
        assert rows["FIFO"] == rows["openwhisk"], name
        aged, sjf = rows["SJF-aged"], rows["SJF"]
        assert aged[1] < sjf[1] and aged[0] >= sjf[0], name
        check_rows(
            doc_row(text, "| slice | `openwhisk` (= FIFO) mean R (s) |", name),
            [
                *rows["openwhisk"][:2],
                *rows["SJF"][3:5],
                *rows["SJF-aged"][3:5],
                *rows["gittins"][3:5],
                *rows["gittins-aged"][3:5],
            ],
        )


def doc_sim_rows(clients: list[int]) -> list[str]:
    text = (ROOT / "docs/gpu.md").read_text()
    start = text.index("$ .venv/bin/python benchmarks/bench_gpu_ktasks.py --plot")
    block = text[start : text.index("```", start)]
    sim = block[block.index("== simulator") : block.index("== closed-loop")].splitlines()
    return [sim[0], sim[1]] + [ln for ln in sim if ln.split()[:1] in [[str(c)] for c in clients]]


@pytest.mark.slow
def test_the_simulator_table_in_gpu_md_is_what_the_benchmark_prints():
    """Two points of the documented run (5 clients: one past the devices; 16: the W's beyond
    device memory), rerun: the simulator is deterministic, so every digit must match."""
    out = subprocess.run(
        [sys.executable, "benchmarks/bench_gpu_ktasks.py", "--only", "sim", "--sim-clients",
         "5", "16"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=300,
    ).stdout  # fmt: skip
    printed = [ln for ln in out.splitlines() if ln]
    assert printed == doc_sim_rows([5, 16])
