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

# (lane, the integration folders and files it runs, the first match wins), of about equal
# times (docs/testing.md has them): the network faults, processes killed and drains; the
# rest of the invoker's end-to-end tests with the soak, the image and the operations guide;
# everything else (the backends, the front and its clients, the GPU pool, the tools).
LANES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "faults",
        (
            "invoker/test_chaos.py",
            "invoker/test_faults.py",
            "invoker/test_drain.py",
            "invoker/test_takeover.py",
            "invoker/test_overload.py",
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


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # In a worker, where the items are collected, xdist keeps ``--dist loadgroup`` here.
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        lane = lane_of(item.nodeid)
        if lane is not None:
            item.add_marker(pytest.mark.xdist_group(lane))
