"""A real ``ow-invoker run`` process is honest about what it can do (issue 13, points 1, 7, 9):
a loop that keeps failing ends the process, a node that cannot create containers or reach
Kafka stops saying it is healthy (and says so again once it can), calls that outlived an
outage are answered instead of started, and a lingering previous group member is waited out.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from harness.controller import controller, make_config
from harness.processes import InvokerProcess
from tests.integration.harness import PY_HELLO
from tests.integration.invoker.helpers import ROOT
from whisk.clock import SystemClock
from whisk.protocol import dumps
from whisk.protocol.controller import activation_message

pytestmark = pytest.mark.services

BROKEN_DISPATCH = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from containers.pool import ContainerPool

def reserve(self, *args, **kwargs):
    raise RuntimeError("injected fault: reserve is broken")

ContainerPool.reserve = reserve  # a bug in the dispatch loop's path, for this process only
from ow_invoker.cli import main
sys.exit(main())
"""


async def health(proc: InvokerProcess) -> tuple[int, dict]:
    """The admin API's /health: (status, body); (0, {}) while it does not answer."""
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"http://127.0.0.1:{proc.admin_port}/health",
                timeout=aiohttp.ClientTimeout(total=2),
            ) as r,
        ):
            return r.status, await r.json()
    except (aiohttp.ClientError, TimeoutError):
        return 0, {}


async def metrics(proc: InvokerProcess) -> str:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{proc.admin_port}/metrics") as r,
    ):
        return await r.text()


async def wait_health(proc: InvokerProcess, status: int, timeout_s: float) -> dict:
    async with asyncio.timeout(timeout_s):
        while True:
            got, body = await health(proc)
            if got == status:
                return body
            await asyncio.sleep(0.1)


async def wait_pings(stub, enabled: bool, after: int, timeout_s: float) -> None:
    """Wait for a ping with this ``isEnabled`` beyond the first ``after`` pings."""
    async with asyncio.timeout(timeout_s):
        while not any(p.get("isEnabled", True) is enabled for p in stub.pings[after:]):
            await asyncio.sleep(0.05)


def _log_time(line: str) -> dt.datetime:
    return dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


async def test_a_loop_that_keeps_failing_stops_pings_and_exits_non_zero(kafka, couchdb, tmp_path):
    config = make_config(tmp_path, action_cores=(0,))
    script = tmp_path / "broken_invoker.py"
    script.write_text(BROKEN_DISPATCH)
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    proc.entry = [str(script)]
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("hello", PY_HELLO)
            proc.start()
            await wait_pings(stub, True, 0, 60)
            await stub.invoke(action, rev, blocking=False)
            async with asyncio.timeout(30):
                while proc.proc.poll() is None:
                    await asyncio.sleep(0.02)
            exited = dt.datetime.now()
            await asyncio.sleep(1)  # the last pings reach the stub
            log = proc.log()
            assert proc.proc.returncode == 3, log[-3000:]
            failures = [ln for ln in log.splitlines() if ln.endswith("task dispatch failed")]
            assert len(failures) == 3, log[-3000:]
            assert "injected fault: reserve is broken" in log  # each with its traceback
            assert "node failed: task dispatch failed 3 times" in log
            last_failure = _log_time(failures[-1])
            assert (exited - last_failure).total_seconds() < 5, log[-3000:]
            # The pings stopped at the first failure: the last one says disabled.
            assert stub.pings[-1]["isEnabled"] is False
    finally:
        proc.stop()


async def test_health_follows_container_creation(kafka, couchdb, tmp_path):
    config = make_config(tmp_path, action_cores=(0,))
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    containers = Path(config.state_dir) / "containers"
    away = containers.with_name("containers.away")
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("hello", PY_HELLO)
            proc.start()
            await stub.wait_completion(await stub.invoke(action, rev), timeout_s=60)
            await wait_health(proc, 200, 10)
            other, other_rev = await stub.create_action("other", PY_HELLO, memory_mb=128)
            # The fault: where containers get their directories is no directory any more.
            containers.rename(away)
            containers.write_text("not a directory")
            t0 = time.monotonic()
            pings = len(stub.pings)
            aid = await stub.invoke(other, other_rev)
            body = await wait_health(proc, 503, 10)
            assert time.monotonic() - t0 < 3, body
            assert "cannot create containers" in body["problems"]["containers"]
            assert "invoker_healthy 0.0" in await metrics(proc)
            acks = await stub.wait_completion(aid, timeout_s=30)
            assert acks[-1]["isSystemError"] is True
            # One disabled ping takes the node out at once; no healthy ping while it lasts.
            await wait_pings(stub, False, pings, 3)
            disabled_at = len(stub.pings)
            await asyncio.sleep(3)
            assert all(p.get("isEnabled", True) is False for p in stub.pings[disabled_at - 1 :])
            # Repaired: it finds out by itself, pings again and runs calls.
            containers.unlink()
            away.rename(containers)
            t1 = time.monotonic()
            await wait_health(proc, 200, 10)
            await wait_pings(stub, True, disabled_at, 5)
            assert time.monotonic() - t1 < 5
            acks = await stub.wait_completion(await stub.invoke(other, other_rev), timeout_s=30)
            assert acks[-1]["isSystemError"] is False
            assert "invoker_healthy 1.0" in await metrics(proc)
        assert proc.terminate() == 0
    finally:
        if containers.is_file():
            containers.unlink()
            away.rename(containers)
        proc.stop()


async def test_health_follows_kafka(kafka, couchdb, tmp_path):
    config = make_config(tmp_path, action_cores=(0,))
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("hello", PY_HELLO)
            proc.start()
            await stub.wait_completion(await stub.invoke(action, rev), timeout_s=60)
            await wait_health(proc, 200, 10)
            try:
                await asyncio.to_thread(kafka.stop)
                t0 = time.monotonic()
                body = await wait_health(proc, 503, 10)
                assert time.monotonic() - t0 < 3, body
                assert "kafka" in body["problems"], body
            finally:
                await asyncio.to_thread(kafka.start)
            pings = len(stub.pings)
            await wait_health(proc, 200, 30)
            await wait_pings(stub, True, pings, 30)
            acks = await stub.wait_completion(await stub.invoke(action, rev), timeout_s=60)
            assert acks[-1]["isSystemError"] is False
    finally:
        proc.stop()


async def test_calls_that_outlived_an_outage_are_answered_not_started(kafka, couchdb, tmp_path):
    config = make_config(tmp_path, action_cores=(0,))
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("hello", PY_HELLO, timeout_ms=1000)
            # Accepted by the controller 10 minutes ago, while this node was not running.
            old = activation_message(
                action, rev, start_ms=SystemClock().epoch_ms() - 600_000, blocking=False
            )
            await stub.publish_raw(dumps(old.to_json()))
            fresh = await stub.invoke(action, rev, blocking=False)
            proc.start()
            acks = await stub.wait_completion(old.activation_id, timeout_s=60)
            assert acks[-1]["isSystemError"] is True
            record = await stub.record(old.activation_id)
            assert record["response"]["statusCode"] == 3
            assert "was not started" in record["response"]["result"]["error"]
            assert record["annotations"]  # a full record, with the action's annotations
            acks = await stub.wait_completion(fresh, timeout_s=60)
            assert acks[-1]["isSystemError"] is False
            assert (await stub.record(fresh))["response"]["statusCode"] == 0
        assert proc.terminate() == 0
        assert "expired after" in proc.log()
    finally:
        proc.stop()


LINGERING_MEMBER = """
import asyncio, sys
from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor

async def main(bootstrap, topic):
    # Like a stock (Java) invoker: the "range" assignor, and a session that outlives it.
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=topic,
                         partition_assignment_strategy=(RangePartitionAssignor,),
                         session_timeout_ms=10000, heartbeat_interval_ms=1000)
    await c.start()
    print("joined", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def _lingering_member(bootstrap: str, topic: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", LINGERING_MEMBER, bootstrap, topic],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def test_takeover_waits_for_a_lingering_group_member(kafka, couchdb, tmp_path):
    config = make_config(tmp_path, action_cores=(0,))
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    member = None
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("hello", PY_HELLO)
            member = _lingering_member(kafka.bootstrap, config.invoker_topic)
            line = await asyncio.to_thread(member.stdout.readline)
            assert line.strip() == b"joined"
            member.send_signal(signal.SIGKILL)  # gone without leaving the group
            member.wait(10)
            t0 = time.monotonic()
            proc.start()
            aid = await stub.invoke(action, rev, blocking=False)
            acks = await stub.wait_completion(aid, timeout_s=90)
            assert acks[-1]["isSystemError"] is False
            log = proc.log()
            assert proc.proc.poll() is None, log[-3000:]
            waits = re.findall(r"joining consumer group .* waiting for a member that speaks", log)
            assert waits, log[-3000:]  # it said what it waits for, and kept trying
            assert time.monotonic() - t0 < 60
        assert proc.terminate() == 0
    finally:
        if member is not None and member.poll() is None:
            member.kill()
            member.wait()
        proc.stop()
