"""Run a packaged action zip locally through its SeBS wrapper's ``main(args)``.

This proves a package without any platform: the zip is unpacked into a fresh directory (the
container's cwd, where the wrapper keeps its ``cold_run`` marker) and ``main`` runs in a fresh
interpreter, the way a Python runtime container would run it, once per given argument dict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
import zipfile
from pathlib import Path
from typing import Any

_MARK = "\n__SEBS_RESULTS__"
_RUNNER = f"""
import importlib.util, json, os, sys
sys.path.insert(0, os.getcwd())
spec = importlib.util.spec_from_file_location("__sebs_action__", "__main__.py")
action = importlib.util.module_from_spec(spec)
spec.loader.exec_module(action)
results = []
for args in json.load(sys.stdin):
    os.environ["__OW_ACTIVATION_ID"] = args.pop("__activation_id")
    results.append(action.main(args))
sys.stdout.write({_MARK!r} + json.dumps(results))
"""


def run_zip(
    zip_path: Path,
    calls: list[dict[str, Any]],
    *,
    env: dict[str, str] | None = None,
    timeout_s: float = 300.0,
    workdir: Path | None = None,
    cpu: int | None = None,
) -> list[dict[str, Any]]:
    """Invoke the action in ``zip_path`` once per dict in ``calls`` (same process, in order).

    ``cpu`` pins the process to that core, as the invoker gives each call one core.
    """
    with tempfile.TemporaryDirectory(prefix="sebs-local-") as tmp:
        cwd = workdir or Path(tmp) / "action"
        cwd.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(zip_path) as zf:
            zf.extractall(cwd)
        private_tmp = Path(tmp) / "tmp"
        private_tmp.mkdir()
        payload = [{**c, "__activation_id": uuid.uuid4().hex} for c in calls]
        proc = subprocess.run(
            [sys.executable, "-c", _RUNNER],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=timeout_s,
            env={**os.environ, "TMPDIR": str(private_tmp), **(env or {})},
            preexec_fn=None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu})),
        )
        if _MARK not in proc.stdout:
            raise RuntimeError(
                f"{zip_path.name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        return json.loads(proc.stdout.rsplit(_MARK, 1)[1])
