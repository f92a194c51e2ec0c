"""Driving the real clients from the e2e tests: the Adobe I/O Runtime CLI and the JS flows
(scripts run with the `openwhisk` npm client)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from front.identities import SYSTEM
from harness.processes import ROOT, Platform


class Cli:
    """`aio runtime ...` against the platform in its own HOME. ``namespace``: the guest's,
    configured as a user would (``runtime deploy`` needs it), with runtime auth on every
    command (not Adobe's deploy service)."""

    def __init__(
        self, argv: list[str], platform: Platform, home: Path, namespace: str | None = None
    ) -> None:
        self.argv = argv
        self.cwd = home
        self.env = {
            **os.environ,
            "NODE_PATH": str(ROOT / ".cache" / "aio" / "node_modules"),
            "AIO_RUNTIME_APIHOST": platform.url,
            "AIO_RUNTIME_AUTH": platform.auth,
            "AIO_CLI_TELEMETRY_OPTOUT": "true",
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
        }
        if namespace is not None:
            self.env |= {"AIO_RUNTIME_NAMESPACE": namespace, "USE_RUNTIME_AUTH": "true"}

    def __call__(self, *args: str, ok: bool = True) -> str:
        p = subprocess.run(
            [*self.argv, "runtime", *args],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if ok:
            assert p.returncode == 0, f"aio runtime {' '.join(args)}:\n{p.stdout}\n{p.stderr}"
        return p.stdout

    def json(self, *args: str) -> Any:
        out = self(*args)
        # Some commands print the entity's name on a line of its own before the JSON.
        starts = [i for i in (out.find("{"), out.find("[")) if i >= 0]
        return json.loads(out[min(starts) :])


def run_node(
    script: Path, platform: Platform, node_modules: Path, timeout_s: float, *args: str
) -> Any:
    """Run one of the JS client flows; what it printed (one JSON document)."""
    p = subprocess.run(
        ["node", str(script), *args],
        env={
            **os.environ,
            "NODE_PATH": str(node_modules),
            "OW_APIHOST": platform.url,
            "OW_AUTH": platform.auth,
            "OW_SYSTEM_AUTH": SYSTEM.authkey["api_key"],
        },
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout)
