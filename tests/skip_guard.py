"""Skips the project expects, and no others (a pytest plugin, tests/conftest.py).

A test that skips because a condition is missing (root, cgroups, a service, a tool) passes
green without proving anything: a runner without root would pass the whole suite with no
security test run. ``tests/expected-skips.txt`` lists each skip the project expects, one
line each: a glob of test ids, ``|``, a glob of the reason (``*`` and ``?`` only). With
``OW_TEST_SKIPS=strict`` (``scripts/test.sh`` sets it, so CI has it) any other skip fails
the run; otherwise each is named at the end."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

EXPECTED = Path(__file__).resolve().parent / "expected-skips.txt"


def expected(path: Path = EXPECTED) -> list[tuple[str, str]]:
    """(test id glob, reason glob) pairs; ``#`` starts a comment."""
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            ids, sep, reason = line.partition("|")
            if not sep:
                raise ValueError(f"{path.name}: a line needs 'test id glob | reason glob': {line}")
            out.append((ids.strip(), reason.strip()))
    return out


def is_expected(nodeid: str, reason: str, patterns: list[tuple[str, str]]) -> bool:
    return any(_glob(i).fullmatch(nodeid) and _glob(r).fullmatch(reason) for i, r in patterns)


def _glob(pattern: str) -> re.Pattern[str]:
    """``*`` any text, ``?`` one character, everything else itself: a test id's brackets
    (``test_x[kafka]``) are no character class here, as they would be to fnmatch."""
    return re.compile(re.escape(pattern).replace(r"\*", ".*").replace(r"\?", "."), re.DOTALL)


_unexpected: list[tuple[str, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    if not is_expected(report.nodeid, reason, expected()):
        _unexpected.append((report.nodeid, reason))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _unexpected:
        return
    strict = os.environ.get("OW_TEST_SKIPS") == "strict"
    terminalreporter.section(
        f"skips not in tests/{EXPECTED.name}" + (" (they fail the run)" if strict else ""),
        sep="=",
        red=strict,
    )
    for nodeid, reason in _unexpected:
        terminalreporter.write_line(f"  {nodeid}: {reason}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    strict = os.environ.get("OW_TEST_SKIPS") == "strict"
    if _unexpected and strict and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
