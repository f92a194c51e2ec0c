"""The ``ow-invoker`` command in a child process, as a user runs it: ``python -m ow_invoker``,
and bad traces, numbers and paths as one line and exit status 2."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_python_dash_m():
    out = subprocess.run(
        [sys.executable, "-m", "ow_invoker", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "standalone" in out.stdout


def ow_invoker(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process, on this checkout's code (not an editable install's)."""
    return subprocess.run(
        [sys.executable, "-m", "ow_invoker", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


HEADER = "arrival_s,function,duration_s\n"


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ("0,f,inf\n", "bad.csv: line 2: times must be finite numbers"),
        ("nan,f,1\n", "bad.csv: line 2: times must be finite numbers"),
        ("0,f,-1\n", "bad.csv: line 2: negative time"),
        ("0,f\0,1\n", "bad.csv: line 2: function 'f\\x00' is not an action name"),
        ('0,"f,1\n', "bad.csv: line 2: fewer values than columns"),
        ("0,f,1,2\n", "bad.csv: line 2: cpu_s must be between 0 and duration_s"),
        ("", "bad.csv: the trace has no calls"),
        (None, "bad.csv: cannot read the trace: No such file or directory"),
    ],
)
def test_a_bad_trace_is_one_line_and_exit_status_2(tmp_path, rows, problem):
    if rows is not None:
        header = HEADER if not rows.endswith(",2\n") else HEADER.replace("\n", ",cpu_s\n")
        (tmp_path / "bad.csv").write_text(header + rows)
    out = ow_invoker("simulate", "--trace", "bad.csv", "--policy", "fifo", cwd=tmp_path)
    assert out.returncode == 2, out
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith(f"ow-invoker simulate: {problem}"), out.stderr


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (
            ["simulate", "--workload", "sebs", "--intensity", "-5"],
            "--intensity: must be > 0, not -5",
        ),
        (["simulate", "--workload", "sebs", "--window", "nan"], "--window: 'nan' is not a finite"),
        (["simulate", "--workload", "sebs", "--cores", "0"], "--cores: must be > 0, not 0"),
        (["simulate", "--workload", "sebs", "--cold-start", "-1"], "--cold-start: must be >= 0"),
        (["simulate-gpu", "--rate", "-1"], "--rate: must be > 0, not -1"),
        (["simulate-gpu", "--gpus", "1.5"], "--gpus: '1.5' is not an integer"),
        (["experiment", "--intensities", "60", "-3"], "--intensities: must be > 0, not -3"),
        (["experiment", "--window", "inf"], "--window: 'inf' is not a finite number"),
        (["experiment", "--report-only", "nowhere"], "--report-only: nowhere: no such directory"),
        (["replay", "missing.jsonl"], "argument scenario: missing.jsonl: no such file"),
        (["replay", "s.jsonl", "--timeout", "-1"], "--timeout: must be > 0, not -1"),
        (["sebs", "run-local", "--repeat", "0"], "--repeat: must be > 0, not 0"),
    ],
)
def test_bad_numbers_and_paths_are_argument_errors(tmp_path, args, problem):
    (tmp_path / "s.jsonl").write_text("")
    out = ow_invoker(*args, cwd=tmp_path)
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    last = out.stderr.splitlines()[-1]
    assert last.startswith(
        f"ow-invoker {' '.join(args[:2] if args[0] == 'sebs' else args[:1])}: error: "
    )
    assert problem in last, last


def test_report_only_without_the_raw_files_is_one_line(tmp_path):
    out = ow_invoker("experiment", "--report-only", ".", cwd=tmp_path)
    assert (out.returncode, out.stderr) == (
        2,
        "ow-invoker experiment: .: no calls.csv to analyse\n",
    )
