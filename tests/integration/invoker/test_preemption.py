"""Preemption end to end (``--preempt``): real Kafka, the CouchDB-API server, and process
containers (SIGSTOP of the container's process group) or Docker Engine ones
(``docker pause``, the cgroup freezer).

One action core, SEPT. A CPU-bound call of 2.2 s of running time with a 3 s time limit is
paused twice for calls of 0.6 s that arrive while it runs: each short call gets the core at
once, the long one resumes after it, and ends more than 3 s after it began without timing out
(paused time does not count against its limit), with its result intact.

Each call burns CPU and counts its running time in steps of 10 ms of the clock, each counted
at most 50 ms: time it spends stopped (a pause lasts the 0.6 s of a short call) is not
counted, time a loaded machine gives its core to something else is. So the long call needs
2.2 s of the limit's 3 s, and the durations the scheduler learns (its E[p]) are 2.2 s and
0.6 s, however busy the machine is. Counting CPU time instead (2.5 s and 0.5 s), on a
machine that something else was loading, the long call hit its 3 s limit, and the short
one's E[p], learnt from a slowed first run, no longer allowed a pause. Each step counted at
most 20 ms, CI's loaded machine (three or more runnable tasks on the action core, so waits
of 20 ms and more between a task's slices) stretched the long call's 2.2 s past 3 s of
running: the cap is now above the waits a busy core makes and far below a pause. A pause
counts at most one step (50 ms), so the long call still runs 2.1 s or more unpaused and
ends at least 2.1 + 0.6 + 0.6 = 3.3 s after it began.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from containers.docker.engine import Engine
from harness.controller import running_invoker
from tests.integration.containers.backends import (  # noqa: F401 (fixtures, parametrization)
    engine,
    engine_host,
    new_backend,
    pytest_generate_tests,
    svc,
)

pytestmark = pytest.mark.services

RUN = b"""
import time
def main(p):
    ran, wall0 = 0.0, time.time()
    while ran < p["run_s"]:  # stopped (paused), it counts nothing: at most 50 ms a step
        t0 = t = time.monotonic()
        while t - t0 < 0.01:
            t = time.monotonic()
        ran += min(t - t0, 0.05)
    return {"run_s": round(ran, 3), "wall_s": round(time.time() - wall0, 3)}
"""


async def _run(ctl: Any, action: Any, rev: str, **content: float) -> dict[str, Any]:
    aid = await ctl.invoke(action, rev, content=content)
    await ctl.wait_completion(aid, timeout_s=60)
    return await ctl.record(aid)


async def _scenario(invoker: Any, ctl: Any) -> None:
    long_action, long_rev = await ctl.create_action("long", RUN, timeout_ms=3000)
    short_action, short_rev = await ctl.create_action("short", RUN)
    await _run(ctl, long_action, long_rev, run_s=2.2)  # E[p] learnt: 2.2 s and 0.6 s
    await _run(ctl, short_action, short_rev, run_s=0.6)
    long = asyncio.ensure_future(_run(ctl, long_action, long_rev, run_s=2.2))
    for _ in range(200):  # until the long call is in /run (only then may it be paused)
        if any(c.payload.pausable is not None for c in invoker.running_calls()):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)
    first = await _run(ctl, short_action, short_rev, run_s=0.6)
    await asyncio.sleep(0.2)
    second = await _run(ctl, short_action, short_rev, run_s=0.6)
    record = await long
    response = record["response"]
    assert response["statusCode"] == 0, response
    assert response["result"]["run_s"] >= 2.2  # intact: it did all its work
    duration_ms = record["end"] - record["start"]
    assert duration_ms > 3000, f"not paused long enough to outlast its 3 s limit: {duration_ms}"
    for short in (first, second):  # each ran while the long call was paused
        assert short["response"]["statusCode"] == 0
        assert record["start"] < short["start"] and short["end"] < record["end"]
    scheduler = invoker.scheduler
    assert scheduler.preempted == 2 and scheduler.paused == 0
    assert scheduler.cores_table.calls[0] == 0 and scheduler.running == 0  # taken back, freed
    assert invoker.status()["paused"] == 0
    metrics = invoker.metrics.render().decode()
    assert "invoker_preemptions_total 2.0" in metrics


async def test_a_long_call_is_paused_for_short_ones_on_the_process_backend(
    kafka, couchdb, tmp_path: Path
) -> None:
    async with running_invoker(
        kafka, couchdb, tmp_path, action_cores=(0,), policy="sept", preempt=True
    ) as (invoker, ctl):
        await _scenario(invoker, ctl)


@pytest.mark.docker_only
async def test_a_long_call_is_paused_for_short_ones_in_docker(
    kafka,
    couchdb,
    tmp_path: Path,
    engine_host: str,  # noqa: F811 (the fixture)
    engine: Engine,  # noqa: F811
    svc,  # noqa: F811
) -> None:
    unique = f"p{uuid.uuid4().hex[:8]}"
    b = new_backend(engine_host, svc.container_label, f"wsk{unique}0")
    async with running_invoker(
        kafka,
        couchdb,
        tmp_path,
        backend=b,
        unique_name=unique,
        action_cores=(0,),
        policy="sept",
        preempt=True,
    ) as (invoker, ctl):
        await _scenario(invoker, ctl)
