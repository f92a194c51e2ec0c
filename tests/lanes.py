"""Lanes: how the whole suite shares the machine when pytest-xdist runs it (``-n``,
``--dist loadgroup``, as ``scripts/test.sh`` does).

The integration tier's tests share services that some of them stop, kill and restart (the
chaos and fault tests), and most of their time is waiting on those services and on child
processes, not CPU. So each lane below runs its tests one after another in one worker, with
its own services on ports of its own (``service_slot``): a test never sees another lane's
faults. The tests in no lane (the unit tier, the figures tier: CPU only, no service) go to
whichever worker is free, beside the lanes' waiting. Without ``-n`` nothing changes.

A new test folder of the integration tier needs no entry: it falls in the last lane."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

INTEGRATION = "tests/integration/"

# (lane, the integration folders and files it runs, the first match wins), of about equal
# times (docs/testing.md has them): the network faults, processes killed and drains, with
# the GPU pool's tests; the rest of the invoker's end-to-end tests with the soak, the image
# and the operations guide; everything else (the backends, the front and its clients, the
# tools). The longest lane is the suite's critical path: keep them even.
LANES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "faults",
        (
            "invoker/test_chaos.py",
            "invoker/test_faults.py",
            "invoker/test_drain.py",
            "invoker/test_takeover.py",
            "invoker/test_overload.py",
            "gpu/",
        ),
    ),
    ("invoker", ("invoker/", "deploy/", "docs/")),
    ("platform", ("",)),  # every other integration folder, a new one too
)


def lane_of(nodeid: str) -> str | None:
    """The lane that runs ``nodeid``; None for a test any worker may run."""
    if not nodeid.startswith(INTEGRATION):
        return None
    rest = nodeid.removeprefix(INTEGRATION)
    for lane, paths in LANES:
        if any(rest.startswith(path) for path in paths):
            return lane
    return None


# Tests that make the same simulations, in the order they run in one worker: the later one
# reads the earlier one's runs from the session's cache (``OW_SIMULATION_CACHE``) instead of
# making them again beside it (the bounds table's ``openwhisk``, ``fc`` and ``gittins`` runs
# at 32 GB are the heavy-tail table's).
FIGURES = "tests/figures/test_benchmark_figures.py::"
SHARED_SIMULATIONS = {
    f"{FIGURES}test_the_heavy_tail_tables_in_policies_md": "heavy-tail simulations",
    f"{FIGURES}test_the_ideal_bounds_tables_in_policies_md": "heavy-tail simulations",
}


def scope_of(nodeid: str) -> str:
    """What one worker runs as a whole: a lane, tests that share simulations, or the test
    alone."""
    return lane_of(nodeid) or SHARED_SIMULATIONS.get(nodeid, nodeid)


class LaneScheduling(LoadScopeScheduling):
    """xdist's scheduling by scope, with a lane as the scope of its tests and every other
    test a scope of its own. (xdist's own ``xdist_group`` marks are lost on pytest 9.2,
    whose node ids no longer take xdist's suffix.)"""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    """The lanes for ``--dist loadgroup``; xdist's own scheduling otherwise."""
    return LaneScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


# Each tier's and lane's tests' time (setup, call and teardown), summed: what docs/testing.md
# quotes, from the end of every run.
_seconds: Counter[str] = Counter()
_tests: Counter[str] = Counter()


def part_of(nodeid: str) -> str:
    """``unit``, ``figures``, or ``integration/<lane>``."""
    lane = lane_of(nodeid)
    if lane:
        return f"integration/{lane}"
    top, tier, *rest = (*nodeid.split("/"), "")
    return tier if top == "tests" and rest else "other"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[part_of(report.nodeid)] += report.duration
    if report.when == "call" or (report.when == "setup" and report.skipped):
        _tests[part_of(report.nodeid)] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _tests:
        terminalreporter.section("time by tier and lane (the tests' own, summed)")
        for part in sorted(_tests):
            minutes = _seconds[part] / 60
            terminalreporter.write_line(f"  {part:<22} {minutes:6.1f} min  {_tests[part]:5d} tests")
