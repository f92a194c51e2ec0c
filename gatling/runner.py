"""Run the Gatling simulation (``gatling/pom.xml``) on a scenario file from Python.

The experiment runner can use Gatling instead of the Python replayer (``--driver gatling``);
both write the same timings CSV. Needs ``mvn`` and Java 17; the first run fills ~/.m2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from gatling.scenario import Timing, read_timings

POM = Path(__file__).with_name("pom.xml")


def mvn_available() -> bool:
    return shutil.which("mvn") is not None and shutil.which("java") is not None


def maven_env() -> dict[str, str]:
    """The environment for ``mvn``: its JVM keeps no perf data (a ``/tmp/hsperfdata_*``
    directory would be left behind; the simulation's forked JVM is told so in the pom)."""
    opts = os.environ.get("MAVEN_OPTS", "")
    return {**os.environ, "MAVEN_OPTS": f"{opts} -XX:-UsePerfData".strip()}


def command(
    scenario: Path, out: Path, apihost: str, auth: str, *, web: bool = False, quiet: bool = True
) -> list[str]:
    return [
        "mvn",
        *(["-q"] if quiet else []),
        "-B",
        "-f",
        str(POM),
        "gatling:test",
        f"-Dscenario={scenario.resolve()}",
        f"-Dout={out.resolve()}",
        f"-Dapihost={apihost}",
        f"-Dauth={auth}",
        f"-Dinvoke={'web' if web else 'rest'}",
    ]


def run(
    scenario: Path,
    out: Path,
    apihost: str,
    auth: str,
    *,
    web: bool = False,
    timeout_s: float = 3600,
    log: Path | None = None,
) -> list[Timing]:
    """Replay ``scenario`` with Gatling and return the timings it wrote to ``out``."""
    if not mvn_available():
        raise RuntimeError("Gatling needs mvn and java on PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    with open(log or os.devnull, "w") as sink:
        proc = subprocess.run(
            command(scenario, out, apihost, auth, web=web),
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
            cwd=POM.parent,
            env=maven_env(),
        )
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"gatling:test failed (exit {proc.returncode}); see {log or 'its log'}")
    return read_timings(out)
