"""Intra-container concurrency end to end: real Kafka, the CouchDB-API server, process
containers (and Docker Engine ones). A nodejs action with ``limits.concurrency`` 3 runs 3
calls at once in one container on the node's one action core; with concurrency 1 a
container runs one call at a time (calls wait for a core, or share one by CPU in containers
of their own)."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest

from containers.docker.backend import PREFIX_LABEL
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

# Which container ran a call: an id drawn when the action is loaded (a sandboxed action is
# pid 1 of its own pid namespace, so its pid says nothing).
SLEEPY = b"""
const CONTAINER = require('crypto').randomUUID();
async function main(p) {
  console.log(`call ${p.i} starts`);
  await new Promise((r) => setTimeout(r, p.ms || 1000));
  if (p.fail) return 42;  // not a dictionary: a developer error, the container goes
  return {container: CONTAINER, allow: process.env.__OW_ALLOW_CONCURRENT || null, i: p.i};
}
"""
PY_ENV = b"""
import os, time, uuid
CONTAINER = uuid.uuid4().hex
def main(p):
    time.sleep(0.3)
    return {"container": CONTAINER, "allow": os.environ.get("__OW_ALLOW_CONCURRENT")}
"""


@pytest.fixture
async def live(kafka, couchdb, tmp_path):
    async with running_invoker(kafka, couchdb, tmp_path, action_cores=(0,)) as pair:
        yield pair


async def _call_all(ctl, action, rev, params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Publish the calls together; their stored records, in the same order."""
    aids = await asyncio.gather(*(ctl.invoke(action, rev, content=p) for p in params))
    await asyncio.gather(*(ctl.wait_completion(aid, timeout_s=60) for aid in aids))
    return list(await asyncio.gather(*(ctl.record(aid) for aid in aids)))


def _action_containers(invoker) -> list[Any]:
    return [s for s in invoker.pool.slots.values() if s.key is not None]  # not prewarmed


def _run_span_ms(records: list[dict[str, Any]]) -> int:
    """From the first ``/run`` start to the last end (one after the other: over 3000 ms)."""
    starts = [r["start"] + _annotations(r).get("initTime", 0) for r in records]
    return max(r["end"] for r in records) - min(starts)


def _annotations(record: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in record["annotations"]}


def _overlap(records: list[dict[str, Any]]) -> bool:
    """Whether every call ran while every other one did."""
    return max(r["start"] for r in records) < min(r["end"] for r in records)


async def test_three_calls_share_one_container_on_one_core(live):
    invoker, ctl = live
    action, rev = await ctl.create_action("sleepy", SLEEPY, kind="nodejs:20", concurrency=3)
    records = await _call_all(ctl, action, rev, [{"i": i} for i in range(3)])
    results = [r["response"]["result"] for r in records]
    assert [r["i"] for r in results] == [0, 1, 2]
    assert len({r["container"] for r in results}) == 1  # one container ran all three
    assert all(r["allow"] == "true" for r in results)  # created allowing overlapping /run
    assert _overlap(records)
    span_ms = _run_span_ms(records)
    assert span_ms < 2000, f"3 calls of 1 s ran over {span_ms} ms in one container"
    assert invoker.pool.cold_starts == 1 and len(_action_containers(invoker)) == 1
    assert sum("initTime" in _annotations(r) for r in records) == 1
    lines = [line for r in records for line in r["logs"]]  # each line in some record
    for i in range(3):
        assert sum(f"call {i} starts" in line for line in lines) == 1
    cores = invoker.scheduler.cores_table
    assert cores.calls[0] == 0 and invoker.scheduler.running == 0  # the core is free again
    # Warm, the container takes three more at once; a fourth waits for room in it.
    records = await _call_all(ctl, action, rev, [{"i": i, "ms": 600} for i in range(4)])
    assert len({r["response"]["result"]["container"] for r in records}) == 1
    assert invoker.pool.cold_starts == 1
    by_start = sorted(records, key=lambda r: r["start"])
    assert _overlap(by_start[:3]) and by_start[3]["start"] >= min(r["end"] for r in by_start[:3])


async def test_concurrency_one_runs_one_call_per_container(live):
    _, ctl = live
    action, rev = await ctl.create_action("sleepy1", SLEEPY, kind="nodejs:20")
    pids = set()
    for _ in range(2):  # unmeasured, then measured as mostly waiting (cores shared by CPU)
        records = await _call_all(ctl, action, rev, [{"i": i, "ms": 500} for i in range(3)])
        assert all(r["response"]["result"]["allow"] is None for r in records)
        for a, b in itertools.combinations(records, 2):  # never two at once in one container
            if a["start"] < b["end"] and b["start"] < a["end"]:
                assert a["response"]["result"]["container"] != b["response"]["result"]["container"]
        pids |= {r["response"]["result"]["container"] for r in records}
    assert len(pids) >= 2  # once measured light, they overlapped: in containers of their own


async def test_a_failing_init_answers_every_call_that_shared_the_container(live):
    invoker, ctl = live
    action, rev = await ctl.create_action(
        "broken", b"function main( {", kind="nodejs:20", concurrency=3
    )
    records = await _call_all(ctl, action, rev, [{"i": i} for i in range(3)])
    assert all(r["response"]["statusCode"] == 2 for r in records)  # developer error
    errors = {r["response"]["result"]["error"] for r in records}
    assert len(errors) == 1 and "Initialization has failed" in errors.pop()
    assert invoker.pool.cold_starts == 1  # one container, one /init


async def test_a_developer_error_retires_the_container_once_its_calls_end(live):
    invoker, ctl = live
    action, rev = await ctl.create_action("flaky", SLEEPY, kind="nodejs:20", concurrency=3)
    params = [{"i": 0, "ms": 300, "fail": True}, {"i": 1, "ms": 800}, {"i": 2, "ms": 800}]
    records = await _call_all(ctl, action, rev, params)
    assert [r["response"]["statusCode"] for r in records] == [2, 0, 0]
    assert len({r["response"]["result"]["container"] for r in records[1:]}) == 1
    for _ in range(50):  # removed once its last call left
        if not _action_containers(invoker):
            break
        await asyncio.sleep(0.1)
    assert not _action_containers(invoker)
    (again,) = await _call_all(ctl, action, rev, [{"i": 3, "ms": 10}])
    assert again["response"]["result"]["container"] != records[1]["response"]["result"]["container"]


async def test_python_actions_run_one_call_per_container(live):
    """The stock python runtime (ActionLoop) serves one /run at a time: concurrency > 1
    is run as 1, and its containers are not told they may overlap calls."""
    _, ctl = live
    action, rev = await ctl.create_action("pyenv", PY_ENV, concurrency=3)
    records = await _call_all(ctl, action, rev, [{}, {}])
    assert all(r["response"]["result"]["allow"] is None for r in records)
    intervals = sorted((r["start"], r["end"]) for r in records)
    assert intervals[0][1] <= intervals[1][0]


@pytest.mark.docker_only
async def test_three_calls_share_one_docker_container(
    kafka,
    couchdb,
    tmp_path: Path,
    engine_host: str,  # noqa: F811 (the fixture)
    engine: Engine,  # noqa: F811
    svc,  # noqa: F811
) -> None:
    unique = f"d{uuid.uuid4().hex[:8]}"
    prefix = f"wsk{unique}0"  # the invoker's container prefix for instance 0
    b = new_backend(engine_host, svc.container_label, prefix)
    async with running_invoker(
        kafka, couchdb, tmp_path, backend=b, unique_name=unique, action_cores=(0,)
    ) as (_, ctl):
        action, rev = await ctl.create_action("sleepy", SLEEPY, kind="nodejs:20", concurrency=3)
        records = await _call_all(ctl, action, rev, [{"i": i} for i in range(3)])
        results = [r["response"]["result"] for r in records]
        assert len({r["container"] for r in results}) == 1
        assert all(r["allow"] == "true" for r in results)
        assert _overlap(records)
        span_ms = _run_span_ms(records)
        assert span_ms < 2000, f"3 calls of 1 s ran over {span_ms} ms in one container"
        ours = await engine.list(f"{PREFIX_LABEL}={prefix}")
        assert sum(any(n.endswith("_guest_sleepy") for n in c["Names"]) for c in ours) == 1
    assert await engine.list(f"{PREFIX_LABEL}={prefix}") == []
