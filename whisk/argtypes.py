"""argparse ``type=`` callables for the CLI's numeric options and input files.

A negative intensity, a ``nan`` window or zero cores would otherwise reach the simulators and
end in a traceback, or worse in a silently empty run. As ``type=`` callables they make argparse
answer with its usage line and one line naming the option and the problem, exit status 2.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

N = TypeVar("N", int, float)


def _bounded(kind: type[N], low: N, strict: bool) -> Callable[[str], N]:
    """A parser of ``kind`` numbers that are finite and > ``low`` (``strict``) or >= ``low``."""
    sign = ">" if strict else ">="
    what = "an integer" if kind is int else "a number"

    def parse(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"must be {sign} {low:g}, not {text}")
        return value

    parse.__name__ = what  # argparse's fallback message names the type by it
    return parse


positive_float = _bounded(float, 0.0, strict=True)
nonnegative_float = _bounded(float, 0.0, strict=False)
positive_int = _bounded(int, 0, strict=True)
nonnegative_int = _bounded(int, 0, strict=False)


def input_file(text: str) -> Path:
    """A file to read: missing, a directory or unreadable is an argument error, not a traceback."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(
            f"{text}: no such file" if not path.exists() else f"{text}: not a file"
        )
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: not readable")
    return path


def input_dir(text: str) -> Path:
    """A directory to read from."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such directory")
    return path
