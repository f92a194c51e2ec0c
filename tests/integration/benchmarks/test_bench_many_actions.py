"""``benchmarks/bench_many_actions.py`` (issue 42's experiment) runs end to end: a short run
through the embedded platform (``ow-invoker standalone``, the process backend) prints a row
for each accounting with answered calls, and their throughput ratio. Its figures are not
checked here (docs/benchmarks.md quotes full runs); that it still measures is."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from harness.processes import ROOT

pytestmark = pytest.mark.services

ROW = re.compile(
    r"^process\s+2 (?P<keep>limit|footprint)\s+\d+\s+(?P<rate>[\d.]+)\s+\d+\s+\d+\s+"
    r"(?P<cold>[\d.]+)%\s+(?P<unanswered>\d+)\s",
    re.M,
)


SHORT_RUN = ("--platform", "embedded", "--actions", "2", "--clients", "4", "--seconds", "3")


def test_the_many_actions_benchmark_measures_both_accountings_on_the_embedded_platform():
    p = subprocess.run(
        [sys.executable, "benchmarks/bench_many_actions.py", *SHORT_RUN],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    rows = {m["keep"]: m for m in ROW.finditer(p.stdout)}
    assert set(rows) == {"limit", "footprint"}, p.stdout
    for row in rows.values():
        # Both actions fit at their limits too: two cold starts among the calls, no call lost.
        assert float(row["rate"]) > 1 and float(row["cold"]) < 50 and row["unanswered"] == "0"
    assert re.search(r"2 footprint / limit throughput: [\d.]+x", p.stdout), p.stdout
