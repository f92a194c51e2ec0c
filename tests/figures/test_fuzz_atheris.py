"""A bounded coverage-guided run: every atheris target of tests/fuzz for a few seconds, from
the committed seed corpus, must find no crash. (The long run, millions of executions, is
the same command with ``--runs``: see tests/fuzz/run.py and docs/reliability.md.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fuzz.run import NAMES, ROOT

SECONDS = int(os.environ.get("OW_FUZZ_SECONDS", "8"))  # per target: about a minute in all


def test_every_target_runs_without_a_crash(tmp_path: Path) -> None:
    try:
        import atheris  # noqa: F401
    except ImportError as e:
        raise AssertionError("atheris is missing: run scripts/install.sh python") from e
    cmd = [sys.executable, "-m", "tests.fuzz.run", "--target", "all"]
    cmd += ["--seconds", str(SECONDS), "--workdir", str(tmp_path)]
    proc = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=len(NAMES) * (SECONDS + 60)
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    for target in NAMES:
        result = summary["targets"][target]
        assert result["crashes"] == 0, (target, result, list((tmp_path / target).glob("crash-*")))
        assert result["executions"] > 0 and result["coverage"] > 0, (target, result)
