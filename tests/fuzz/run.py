"""Coverage-guided fuzzing of the wire-format parsers with atheris (libFuzzer for Python).

    python -m tests.fuzz.run --target activation --runs 1000000
    python -m tests.fuzz.run --target all --runs 1500000     # each target in turn
    python -m tests.fuzz.run --target all --seconds 8        # the bounded run of the tests

Each target (see :mod:`tests.fuzz.targets`) starts from its committed seed corpus in
``tests/fuzz/corpus/<target>`` (read only: new inputs go to ``--workdir``) with the JSON
dictionary ``tests/fuzz/json.dict``. A crash (any exception the parser's contract does not
allow) is written to ``<workdir>/<target>/crash-*`` and makes the exit status non-zero. The
last line printed is a JSON summary: executions, seconds, crashes and coverage per target.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = HERE / "corpus"
DICTIONARY = HERE / "json.dict"
NAMES = (
    "activation",
    "action_document",
    "runtime_init",
    "runtime_run",
    "container_response",
    "ack",
    "ping",
)
MAX_LEN = 8192  # room for 1024 levels of nesting inside a message
_DONE = re.compile(r"Done (\d+) runs in (\d+) second")
_COV = re.compile(r"cov: (\d+) ft: (\d+)")


def fuzz_one(target: str, runs: int, seconds: int, workdir: Path) -> None:
    """Run one target in this process (atheris exits the process when done)."""
    import atheris

    with atheris.instrument_imports(
        include=["whisk.protocol", "containers.runtimes.python_runtime", "tests.fuzz"]
    ):
        from tests.fuzz.targets import TARGETS

    work = workdir / target
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    args = [
        sys.argv[0],
        str(corpus),
        str(CORPUS / target),
        f"-dict={DICTIONARY}",
        f"-max_len={MAX_LEN}",
        f"-artifact_prefix={work}/",
        "-timeout=20",
        "-rss_limit_mb=3072",
        "-print_final_stats=1",
    ]
    if runs:
        args.append(f"-runs={runs}")
    if seconds:
        args.append(f"-max_total_time={seconds}")
    atheris.Setup(args, TARGETS[target])
    atheris.Fuzz()


def fuzz_all(targets: list[str], runs: int, seconds: int, workdir: Path) -> int:
    """Each target in a child process; prints per-target lines and a JSON summary."""
    summary: dict[str, dict[str, int | bool]] = {}
    for target in targets:
        cmd = [sys.executable, "-m", "tests.fuzz.run", "--target", target, "--runs", str(runs)]
        cmd += ["--seconds", str(seconds), "--workdir", str(workdir)]
        log_path = workdir / f"{target}.log"  # written as it goes: follow it with tail -f
        with log_path.open("wb") as out:
            proc = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        log = log_path.read_text(errors="replace")
        done = _DONE.findall(log)
        cov = _COV.findall(log)
        crashes = sorted(p.name for p in (workdir / target).glob("crash-*"))
        summary[target] = {
            "executions": int(done[-1][0]) if done else 0,
            "seconds": int(done[-1][1]) if done else 0,
            "coverage": int(cov[-1][0]) if cov else 0,
            "features": int(cov[-1][1]) if cov else 0,
            "crashes": len(crashes),
            "ok": proc.returncode == 0 and not crashes,
        }
        print(target, summary[target], flush=True)
        if proc.returncode != 0 or crashes:
            print(log[-4000:], file=sys.stderr, flush=True)
    total = sum(int(s["executions"]) for s in summary.values())
    print(json.dumps({"total_executions": total, "targets": summary}), flush=True)
    return 0 if all(s["ok"] for s in summary.values()) else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", required=True, choices=[*NAMES, "all"])
    p.add_argument("--runs", type=int, default=0, help="executions per target (0: no limit)")
    p.add_argument("--seconds", type=int, default=0, help="time per target (0: no limit)")
    p.add_argument("--workdir", type=Path, default=ROOT / ".state" / "fuzz")
    args = p.parse_args(argv)
    if not args.runs and not args.seconds:
        p.error("give --runs and/or --seconds")
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.target == "all":
        return fuzz_all(list(NAMES), args.runs, args.seconds, args.workdir)
    fuzz_one(args.target, args.runs, args.seconds, args.workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
