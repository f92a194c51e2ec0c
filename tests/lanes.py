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

import pytest

INTEGRATION = "tests/integration/"

# (lane, the integration folders it runs): about equal times, measured (docs/testing.md).
LANES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("containers", ("containers/",)),
    ("platform", ("",)),  # every other integration folder
)

# Group names on node ids (``::test@lane``, added by xdist), which reports carry.
SUFFIX_SEPARATOR = "@"


def lane_of(nodeid: str) -> str | None:
    """The lane that runs ``nodeid``; None for a test any worker may run."""
    if not nodeid.startswith(INTEGRATION):
        return None
    rest = nodeid.removeprefix(INTEGRATION)
    for lane, folders in LANES:
        if any(rest.startswith(folder) for folder in folders):
            return lane
    return None


def without_lane(nodeid: str) -> str:
    """A report's node id as the test's own (xdist appends ``@<group>``)."""
    test, _, lane = nodeid.rpartition(SUFFIX_SEPARATOR)
    return test if lane in {name for name, _ in LANES} else nodeid


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("dist", "no") != "loadgroup":
        return
    for item in items:
        lane = lane_of(item.nodeid)
        if lane is not None:
            item.add_marker(pytest.mark.xdist_group(lane))
