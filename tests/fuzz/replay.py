"""Replay the seed corpus and a fuzzing run's corpus through every target, uninstrumented,
and report the line coverage of the parsers (stdlib ``trace``: no extra dependency).

    python -m tests.fuzz.replay --workdir .state/fuzz-long

Every input must still pass (a regression check), and the figures say how much of each
parser module the corpus reaches.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import trace
import types
from pathlib import Path

from tests.fuzz.run import CORPUS, NAMES, ROOT

# Module, and the functions counted in it (None: all of them).
MODULES: list[tuple[str, frozenset[str] | None]] = [
    ("whisk/protocol/messages.py", None),
    ("whisk/protocol/salvage.py", None),
    ("whisk/protocol/actions.py", None),
    ("whisk/protocol/json.py", None),
    ("whisk/protocol/limits.py", None),
    ("whisk/protocol/runtime.py", None),
    ("whisk/protocol/records.py", None),
    (
        "containers/runtimes/python_runtime.py",
        frozenset(("parse_init", "parse_run", "_body_object", "_env_entry", "_env_text")),
    ),
]


def function_lines(path: Path, names: frozenset[str] | None = None) -> set[int]:
    """Lines of the module's functions (module and class bodies run at import, untraced),
    or of the functions called ``names`` (and what is nested in them)."""
    lines: set[int] = set()

    def walk(code: types.CodeType, counted: bool) -> None:
        counted = counted or names is None or code.co_name in names
        if counted and code.co_flags & inspect.CO_OPTIMIZED:
            # Not the ``def`` line (and decorators): no line event is traced for those.
            body = code.co_firstlineno
            lines.update(n for _, _, n in code.co_lines() if n is not None and n > body)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const, counted and code.co_flags & inspect.CO_OPTIMIZED)

    walk(compile(path.read_text(), str(path), "exec"), False)
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workdir", type=Path, default=ROOT / ".state" / "fuzz")
    args = p.parse_args(argv)
    from tests.fuzz.targets import TARGETS

    tracer = trace.Trace(count=1, trace=0)
    inputs = 0
    for name in NAMES:
        folders = [CORPUS / name, args.workdir / name / "corpus"]
        files = [f for d in folders if d.is_dir() for f in sorted(d.iterdir())]
        for f in files:
            tracer.runfunc(TARGETS[name], f.read_bytes())
        inputs += len(files)
        print(f"{name}: {len(files)} inputs replayed", flush=True)
    counts = tracer.results().counts
    total_hit = total_lines = 0
    for module, names in MODULES:
        path = ROOT / module
        lines = function_lines(path, names)
        hit = {n for (fname, n) in counts if fname == str(path)} & lines
        total_hit += len(hit)
        total_lines += len(lines)
        print(f"{module}: {len(hit)}/{len(lines)} lines ({100 * len(hit) / len(lines):.0f}%)")
    print(f"all: {inputs} inputs, {total_hit}/{total_lines} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
