"""Mutation testing of the pure core and the parsers with mutmut, in a scratch copy of the
tree: mutmut rewrites every function it mutates (under ``mutants/`` of the tree it runs in),
so it never runs in a working checkout.

    python -m tests.mutation.run                        # every mutant (docs/testing.md's table)
    python -m tests.mutation.run --sample 7             # those numbered ...7: a tenth
    python -m tests.mutation.run --module invoker.offsets --module policies.stats

Prints one line per module: mutants, killed, survived, without a covering test, and the kill
rate (killed over killed + survived; a timeout counts as killed). ``--workdir`` keeps the copy
(``mutmut show NAME`` there prints a mutant's diff)."""

from __future__ import annotations

import argparse
import collections
import contextlib
import fnmatch
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The modules of issue 29: the policies, the node scheduler, offsets, the supervisor, the
# wire formats, container placement and the GPU scheduler and cache.
MODULES = (
    "policies",
    "policies.base",
    "policies.builtin",
    "policies.preemption",
    "policies.stats",
    "invoker.scheduler.calls",
    "invoker.scheduler.cores",
    "invoker.scheduler.groups",
    "invoker.scheduler.preemption",
    "invoker.scheduler.node",
    "invoker.offsets",
    "whisk.supervisor",
    "whisk.protocol",
    "whisk.protocol.actions",
    "whisk.protocol.controller",
    "whisk.protocol.errors",
    "whisk.protocol.json",
    "whisk.protocol.limits",
    "whisk.protocol.logs",
    "whisk.protocol.messages",
    "whisk.protocol.records",
    "whisk.protocol.runtime",
    "whisk.protocol.salvage",
    "containers.placement",
    "gpu.scheduler",
    "gpu.cache",
)
# Their unit tests; each mutant runs only those that reach its function. The hypothesis
# fuzzers of the readers are left out (hundreds of examples per mutant, and they check for
# crashes, not answers), but not the one of Invoker._receive, the salvaging reader's only
# unit-level caller.
TESTS = (
    "tests/unit/policies/test_builtin.py",
    "tests/unit/policies/test_stats.py",
    "tests/unit/invoker/test_scheduler.py",
    "tests/unit/containers/test_cpu.py",
    "tests/unit/policies/test_preemption.py",
    "tests/unit/invoker/test_nodeview.py",
    "tests/unit/invoker/test_offsets.py",
    "tests/unit/whisk/test_supervisor.py",
    "tests/unit/whisk/protocol/test_messages.py",
    "tests/unit/whisk/protocol/test_actions.py",
    "tests/unit/whisk/protocol/test_runtime.py",
    "tests/unit/whisk/protocol/test_records.py",
    "tests/unit/whisk/protocol/test_json.py",
    "tests/unit/whisk/protocol/test_limits.py",
    "tests/unit/whisk/protocol/test_logs.py",
    "tests/unit/whisk/protocol/test_controller.py",
    "tests/unit/whisk/protocol/test_salvage.py",
    "tests/unit/containers/test_placement.py",
    "tests/unit/containers/test_pool.py",
    "tests/unit/containers/test_logfile.py",
    "tests/unit/invoker/test_activation.py",
    "tests/unit/invoker/test_service_fuzz.py",
    "tests/unit/gpu/test_scheduler.py",
    "tests/unit/gpu/test_simulator.py",
)
# Whole simulations (seconds each, for every mutant of the scheduler they reach): the unit
# tests beside them are the ones meant to catch a broken rule.
SLOW = (
    "tests/unit/policies/test_preemption.py::test_simulate_with_preempt_runs_the_same_code_and_shows_the_gain",
    "tests/unit/policies/test_preemption.py::test_enough_pauses_per_call_to_gain_at_high_load",
)
COPIED = (
    "policies", "invoker", "whisk", "containers", "gpu", "front", "ow_invoker", "harness",
    "tests",
)  # fmt: skip
SOURCES = ("policies", "invoker", "whisk", "containers", "gpu")


@dataclass
class Tally:
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    untested: int = 0

    @property
    def rate(self) -> float | None:
        judged = self.killed + self.survived
        return self.killed / judged if judged else None


def path_of(module: str) -> str:
    """``policies.stats`` -> ``policies/stats.py``; a package -> its ``__init__.py``."""
    base = module.replace(".", "/")
    return f"{base}/__init__.py" if (ROOT / base).is_dir() else f"{base}.py"


def prepare(workdir: Path, modules: list[str]) -> None:
    """Copy the tree mutmut needs into ``workdir`` and configure it there."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "mutants", ".state")
    for name in COPIED:
        shutil.copytree(ROOT / name, workdir / name, ignore=skip, dirs_exist_ok=True)
    pyproject = (ROOT / "pyproject.toml").read_text()
    config = "\n".join(
        [
            "",
            "[tool.mutmut]",
            f"source_paths = {list(SOURCES)!r}",
            f"only_mutate = {[path_of(m) for m in modules]!r}",
            f"also_copy = {[n for n in COPIED if n not in SOURCES]!r}",
            "pytest_add_cli_args = "
            + repr(["-p", "no:cacheprovider", "-q", *(f"--deselect={s}" for s in SLOW)]),
            f"pytest_add_cli_args_test_selection = {list(TESTS)!r}",
            "",
        ]
    )
    (workdir / "pyproject.toml").write_text(pyproject + config.replace("'", '"'))


def run(workdir: Path, samples: dict[str, str], timeout_s: float = 3600) -> dict[str, Tally]:
    """Run mutmut on each module's mutants whose number matches its glob in ``samples``
    (``"*"``: every one; ``"7"``: those ending in 7; ``"[13579]7"``: a twentieth)."""
    modules = list(samples)
    prepare(workdir, modules)
    patterns = [f"{m}.x*__mutmut_{'*' if s == '*' else '*' + s}" for m, s in samples.items()]
    mutmut = [sys.executable, "-m", "mutmut"]
    # mutmut's pytest sessions (hundreds, in-process and forked) are this tool's, not a test
    # run of their own: no host guard (tests/hostguard.py) each, their temporary directories
    # in the scratch copy.
    temproot = workdir / "pytest-tmp"
    temproot.mkdir(exist_ok=True)
    env = {**os.environ, "PYTEST_DEBUG_TEMPROOT": str(temproot)}
    env.setdefault("OW_TEST_SESSION", "mutation")
    # In a session of its own: its forked workers go with it if it runs too long.
    proc = subprocess.Popen(
        [*mutmut, "run", *patterns],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode != 0:
        raise RuntimeError(f"mutmut run failed ({proc.returncode}):\n{out[-3000:]}")
    results = subprocess.run(
        [*mutmut, "results", "--all", "true"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return tally(results, samples)


def tally(results: str, samples: dict[str, str]) -> dict[str, Tally]:
    """Per module, from ``mutmut results --all true`` lines (``name: status``), counting the
    sampled mutants only (mutmut lists the others as not checked)."""
    line = re.compile(r"\s*(\S+?)\.x[_ǁ]\S*__mutmut_(\d+): (.+)$")
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for text in results.splitlines():
        match = line.match(text)
        if match is None or match.group(1) not in samples:
            continue
        module, number, status = match.groups()
        if fnmatch.fnmatch(number, "*" + samples[module].lstrip("*")):
            counts[module][status.strip()] += 1
    out = {}
    for module in samples:
        c = counts[module]
        out[module] = Tally(
            mutants=sum(c.values()),
            killed=c["killed"] + c["timeout"],
            survived=c["survived"],
            untested=c["no tests"],
        )
    return out


def table(tallies: dict[str, Tally]) -> str:
    rows = [
        "| module | mutants | killed | survived | no test | kill rate |",
        "|---|---|---|---|---|---|",
    ]
    for module, t in tallies.items():
        rate = f"{100 * t.rate:.1f} %" if t.rate is not None else "—"
        rows.append(
            f"| `{module}` | {t.mutants} | {t.killed} | {t.survived} | {t.untested} | {rate} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.mutation.run", description=__doc__)
    p.add_argument("--module", action="append", choices=MODULES, help="default: all of them")
    p.add_argument("--sample", help="only the mutants whose number ends so (7: a tenth)")
    p.add_argument("--workdir", type=Path, help="the scratch copy (default: a new temp dir)")
    args = p.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ow-mutation-"))
    workdir.mkdir(parents=True, exist_ok=True)
    samples = dict.fromkeys(args.module or MODULES, args.sample or "*")
    print(table(run(workdir, samples)))
    print(f"(scratch copy: {workdir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
