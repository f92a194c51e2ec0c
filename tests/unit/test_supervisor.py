"""The supervisor's rules on a virtual clock and the one-owner rule for task creation
across the source tree."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from whisk.clock import LoopClock, VirtualTimeLoop
from whisk.supervisor import Supervisor, spawn

ROOT = Path(__file__).resolve().parents[2]


def virtual(main: Callable[[asyncio.AbstractEventLoop], Coroutine[Any, Any, Any]]) -> Any:
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main(loop))
    finally:
        loop.close()


def test_a_failing_loop_is_logged_and_restarted_with_growing_backoff(caplog):
    starts: list[float] = []

    async def main(loop):
        sup = Supervisor(LoopClock(loop), max_failures=3, window_s=30.0, backoff_s=0.5)

        async def flaky() -> None:
            starts.append(loop.time())
            if len(starts) <= 2:
                raise RuntimeError(f"boom {len(starts)}")
            await asyncio.sleep(3600)

        sup.start("flaky", flaky)
        await asyncio.sleep(0.1)
        assert not sup.alive  # waiting to be restarted: the node must not ping
        await asyncio.sleep(10)
        assert sup.alive and sup.failure is None
        assert sup.status()["tasks"]["flaky"]["restarts"] == 2
        await sup.close()

    with caplog.at_level(logging.ERROR, logger="whisk.supervisor"):
        virtual(main)
    assert [round(t - starts[0], 3) for t in starts] == [0.0, 0.5, 1.5]  # back-off 0.5, 1
    failures = [r for r in caplog.records if r.getMessage() == "task flaky failed"]
    assert len(failures) == 2 and all(r.exc_info for r in failures)  # with tracebacks


def test_three_failures_within_the_window_fail_the_node():
    async def main(loop):
        sup = Supervisor(LoopClock(loop), max_failures=3, window_s=30.0, backoff_s=1.0)
        reasons: list[str] = []
        sup.on_failure.append(reasons.append)

        async def broken() -> None:
            raise RuntimeError("always")

        sup.start("dispatch", broken)
        reason = await asyncio.wait_for(sup.wait_failed(), 60)
        assert loop.time() == pytest.approx(3.0)  # failures at 0, 1, 3 (back-off 1, 2)
        assert reasons == [reason] and "dispatch failed 3 times" in reason
        assert not sup.alive and sup.problem() == reason
        await sup.close()

    virtual(main)


def test_failures_spread_wider_than_the_window_do_not_fail_the_node():
    async def main(loop):
        sup = Supervisor(LoopClock(loop), max_failures=3, window_s=30.0, backoff_s=0.5)
        runs = 0

        async def fails_every_20_s() -> None:
            nonlocal runs
            runs += 1
            await asyncio.sleep(20)
            raise RuntimeError("again")

        sup.start("commit", fails_every_20_s)
        await asyncio.sleep(200)
        assert runs >= 9 and sup.failure is None
        await sup.close()

    virtual(main)


def test_a_loop_that_returns_counts_as_failing_and_stop_ends_it_quietly():
    async def main(loop):
        sup = Supervisor(LoopClock(loop), backoff_s=0.1)

        async def returns() -> None:
            return None

        async def forever() -> None:
            await asyncio.sleep(3600)

        sup.start("returns", returns)
        sup.start("forever", forever, critical=False)
        with pytest.raises(ValueError):
            sup.start("forever", forever)
        await sup.wait_failed()
        await sup.stop("forever")
        assert not sup.running("forever") and "forever" not in sup.status()["tasks"]

    virtual(main)


def test_spawned_tasks_log_their_exception(caplog):
    async def main(loop):
        sup = Supervisor(LoopClock(loop))

        async def bad() -> None:
            raise KeyError("lost")

        t1 = sup.spawn(bad(), name="per-call")
        t2 = spawn(bad(), name="detached")
        await asyncio.gather(t1, t2, return_exceptions=True)
        await asyncio.sleep(0)
        assert not sup.spawned

    with caplog.at_level(logging.ERROR, logger="whisk.supervisor"):
        virtual(main)
    logged = {r.getMessage() for r in caplog.records if r.exc_info}
    assert logged == {"task per-call failed", "task detached failed"}


# Task creation outside the supervisor: ruff's banned-api (TID251) covers asyncio.create_task
# and asyncio.ensure_future; a loop's create_task method it cannot see.
ALLOWED = ("whisk/supervisor.py", "tests/", "benchmarks/", "gatling/", "sebs_wrappers/")
TASK_CREATION = re.compile(r"\.create_task\(|\bensure_future\(")


def test_no_task_is_created_outside_the_supervisor():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".venv/", ".state/", ".cache/")) or rel.startswith(ALLOWED):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if TASK_CREATION.search(line.split("#", 1)[0]):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "create tasks through whisk.supervisor:\n" + "\n".join(offenders)
