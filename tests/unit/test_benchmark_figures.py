"""The figures of the deterministic benchmarks (the node and GPU simulators on a virtual
clock), rerun by their committed commands and compared with the docs at the digits shown.

A benchmark's whole table takes minutes, so each test reruns the part of it that one command
line can: the GPU simulator's whole output, one working set of the GPU capacity table, two
intensities of the preemption tables, N = 4 of the capacity table and the three heavy-tail
slices printed in full. Marked slow: CI runs them, ``scripts/test.sh --fast`` does not
(docs/testing.md lists every figure and how it is checked)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_doc_figures import check_table, doc, flat, heavy_tail_rows, same

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def bench(script: str, *args: str) -> str:
    """What ``python benchmarks/SCRIPT ARGS`` prints."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
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


def test_the_gpu_capacity_at_working_set_15_in_gpu_md():
    documented = block_after(
        doc("docs/gpu.md"), ".venv/bin/python benchmarks/bench_gpu_capacity.py --steps 8"
    )
    printed = bench("bench_gpu_capacity.py", "--steps", "8", "--working-set", "15").splitlines()
    header, w15 = printed[-2:]
    assert documented[0] == header
    assert documented[1] == w15


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
    share, overdue = runs["sept-share"], runs["fc-share"]
    check_rows(
        doc_row(text, "| I | `fc` mean R / p99 / S | `sept-share` R vs `fc` |", intensity),
        [*rps("fc"), share[4], share[1], share[2], overdue[4], overdue[1], overdue[2]],
    )


def test_the_capacity_of_4_cores_in_policies_md():
    printed = bench("bench_capacity.py", "--cores", "4")
    baseline = re.search(r"mean R ([\d.]+) s, p75 R ([\d.]+) s", printed)
    assert baseline is not None
    fewest = {}
    for label in ("fifo", "sept", "sept --preempt", "fc", "fc --preempt"):
        found = re.search(rf"^\s+{label}\s+matches it on (more than )?(\d+) cores", printed, re.M)
        assert found is not None, label
        fewest[label] = ("> " if found.group(1) else "") + found.group(2)
    row = doc_row(doc("docs/policies.md"), "| N | `openwhisk` on N cores: mean / p75 R |", "4")
    check_rows(row[:1], [float(baseline.group(1)), float(baseline.group(2))])
    assert [cell.strip("*").split(" (")[0].replace("**", "") for cell in row[1:]] == list(
        fewest.values()
    )


@pytest.mark.parametrize(
    ("seed", "load", "cores"), [(1, "1.10", 8), (2, "1.12", 24)], ids=["seed1-1.10", "seed2-1.12"]
)
def test_the_heavy_tail_slices_printed_in_full_in_policies_md(seed, load, cores):
    """The other two slices of the full table (seed 1's first is in test_doc_figures)."""
    rows, results = heavy_tail_rows(seed, load, cores)
    ow, fc = results["openwhisk"], results["fc"]
    best = min(ow["mean_response_s"], fc["mean_response_s"])
    best_p99 = min(ow["p99_response_s"], fc["p99_response_s"])
    check_table(
        rows,
        {
            policy: [
                r["mean_response_s"],
                r["p99_response_s"],
                r["mean_stretch"],
                r["mean_response_s"] / best,
                r["p99_response_s"] / best_p99,
                r["mean_stretch"] / ow["mean_stretch"],
            ]
            for policy, r in results.items()
        },
    )
    assert f"seed {seed}, {load}, {cores} cores" in flat(doc("docs/policies.md"))


def test_the_ideal_bounds_of_seed_1_in_policies_md():
    """``bench_heavy_tail_bounds.py --seeds 1``: the two slices of seed 1 in the bounds
    table (the better baseline's mean and p99, Gittins' and SRPT's ratios to them)."""
    printed: dict[str, dict[str, list[float]]] = {}
    for line in bench("bench_heavy_tail_bounds.py", "--seeds", "1").splitlines():
        found = re.match(r"(seed 1, [\d.]+, \d+ cores)\s+(\S+) \(\w+\)\s+(.*)", line)
        if found:
            printed.setdefault(found[1], {})[found[2]] = [float(x) for x in found[3].split()]
    assert len(printed) == 2
    text = doc("docs/policies.md")
    for name, rows in printed.items():
        ow, fc = rows["openwhisk"], rows["fc"]
        check_rows(
            doc_row(text, "| slice | best mean R | best p99 R | Gittins R / best |", name),
            [min(ow[0], fc[0]), min(ow[1], fc[1]), *rows["Gittins"][3:5], *rows["SRPT"][3:5]],
        )
