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
from whisk.supervisor import Supervisor, child, first_failure, spawn

ROOT = Path(__file__).resolve().parents[3]


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


def test_a_loop_that_returns_counts_as_failing_and_stop_ends_it_quietly(caplog):
    async def main(loop):
        sup = Supervisor(LoopClock(loop), backoff_s=0.1)

        async def returns() -> None:
            return None

        async def forever() -> None:
            await asyncio.sleep(3600)

        sup.start("returns", returns)
        sup.start("forever", forever, critical=False)
        assert "forever" in {t.get_name() for t in asyncio.all_tasks()}
        with pytest.raises(ValueError, match="a task named 'forever' is already running"):
            sup.start("forever", forever)
        await sup.wait_failed()
        await sup.stop("forever")
        assert not sup.running("forever") and "forever" not in sup.status()["tasks"]

    with caplog.at_level(logging.ERROR, logger="whisk.supervisor"):
        virtual(main)
    said = [r.getMessage() for r in caplog.records]
    assert said.count("task returns ended; it should run until stopped") == 3


def test_first_failure_is_the_first_of_several_supervisors_to_fail():
    async def main(loop):
        calm, failing = Supervisor(LoopClock(loop)), Supervisor(LoopClock(loop), backoff_s=1.0)

        async def broken() -> None:
            raise RuntimeError("down")

        failing.start("feed", broken)
        reason = await first_failure(calm, failing)
        assert reason == failing.failure and loop.time() == pytest.approx(3.0)
        await asyncio.sleep(0)
        assert asyncio.all_tasks() == {asyncio.current_task()}  # no wait left behind

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


def test_the_defaults_are_the_documented_rule_and_every_step_is_logged(caplog):
    """Restarts after 0.5 s, then 1 s; the third failure within 30 s fails the node; each
    step logged; a failure callback that raises is logged and the others still run."""

    async def main(loop):
        sup = Supervisor(LoopClock(loop))
        told: list[str] = []

        def bad_callback(reason: str) -> None:
            raise RuntimeError("callback bug")

        sup.on_failure += [bad_callback, told.append]

        async def broken() -> None:
            raise RuntimeError("always")

        sup.start("dispatch", broken)
        reason = await sup.wait_failed()
        assert loop.time() == pytest.approx(1.5)
        assert reason == "task dispatch failed 3 times within 30 s" and told == [reason]

    with caplog.at_level(logging.WARNING, logger="whisk.supervisor"):
        virtual(main)
    said = [r.getMessage() for r in caplog.records]
    assert (
        "restarting task dispatch in 0.5 s" in said and "restarting task dispatch in 1.0 s" in said
    )
    assert "node failed: task dispatch failed 3 times within 30 s" in said
    assert any(r.getMessage() == "failure callback raised" and r.exc_info for r in caplog.records)


def test_status_and_problem_name_the_critical_loops_being_restarted():
    async def main(loop):
        sup = Supervisor(LoopClock(loop), backoff_s=5.0)

        async def broken() -> None:
            raise RuntimeError("down")

        async def forever() -> None:
            await asyncio.sleep(3600)

        sup.start("feed", broken)
        sup.start("ping", broken)
        sup.start("sampler", broken, critical=False)
        sup.start("commit", forever)
        # Running from the start() on, not from when the loop is first scheduled.
        assert sup.alive and sup.running("commit") and sup.problem() is None
        await asyncio.sleep(1)
        assert sup.problem() == "restarting feed, ping"  # not the non-critical sampler
        assert not sup.running("feed") and sup.running("commit") and not sup.running("nope")
        assert sup.status() == {
            "failure": None,
            "tasks": {
                "feed": {"running": False, "restarts": 0, "critical": True},
                "ping": {"running": False, "restarts": 0, "critical": True},
                "sampler": {"running": False, "restarts": 0, "critical": False},
                "commit": {"running": True, "restarts": 0, "critical": True},
            },
            "spawned": 0,
        }
        await sup.stop("feed", "ping", "never-started")  # an unknown name is no error
        assert sup.problem() is None
        await sup.close()

    virtual(main)


def test_the_window_is_inclusive_and_a_long_run_starts_the_back_off_over():
    """Failures at 0, 0.5 and exactly 30 s fail the node; a run that lasted longer than
    the window (not one that lasted just as long) restarts after the first back-off again
    (here on a clock far from 0)."""

    async def main(loop, lives: list[float]) -> list[float]:
        await asyncio.sleep(100)
        sup = Supervisor(LoopClock(loop), max_failures=3, window_s=30.0, backoff_s=0.5)
        starts: list[float] = []

        async def flaky() -> None:
            starts.append(loop.time() - 100)
            await asyncio.sleep(lives[len(starts) - 1])
            raise RuntimeError("again")

        sup.start("flaky", flaky)
        await asyncio.sleep(60)
        failed = sup.failure is not None
        await sup.close()
        return [*starts, failed]

    assert virtual(lambda loop: main(loop, [0, 0, 28.5])) == [0, 0.5, 1.5, True]
    runs = virtual(lambda loop: main(loop, [0, 0, 31, 3600]))
    assert runs == [0, 0.5, 1.5, 1.5 + 31 + 0.5, False]
    runs = virtual(lambda loop: main(loop, [0, 0, 30, 3600]))  # not longer: back-off 2 s
    assert runs == [0, 0.5, 1.5, 1.5 + 30 + 2, False]


def test_close_cancels_and_waits_for_the_short_tasks_and_helpers_keep_their_names():
    async def main(loop):
        sup = Supervisor(LoopClock(loop))
        task = sup.spawn(asyncio.sleep(3600), name="per-call")
        helper = child(asyncio.sleep(0), name="race")
        detached = spawn(asyncio.sleep(0), name="detached")
        assert (helper.get_name(), detached.get_name()) == ("race", "detached")
        await asyncio.gather(helper, detached)
        assert sup.status()["spawned"] == 1
        await sup.close()
        assert task.cancelled()

    virtual(main)


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


def test_an_ended_task_leaves_every_set_that_held_it():
    """A task is held (the loop holds tasks only weakly) until it ends, then let go: left
    in a set it would be a leak of one task per call."""
    from whisk import supervisor

    async def main(loop):
        sup = Supervisor(LoopClock(loop))
        mine: set[asyncio.Task[Any]] = set()
        owned = sup.spawn(asyncio.sleep(1), name="owned", track=mine)
        detached = spawn(asyncio.sleep(1), name="detached")
        assert owned in sup.spawned and owned in mine and detached in supervisor._detached
        await asyncio.gather(owned, detached)
        await asyncio.sleep(0)  # their done callbacks run one step after they end
        return owned in sup.spawned, owned in mine, detached in supervisor._detached

    assert virtual(main) == (False, False, False)
