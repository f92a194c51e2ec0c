"""Faults injected for real (processes killed, services stopped, loopback only): nothing
received is lost, nothing is recorded twice, and the invoker keeps serving."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import aiohttp
import pytest

from containers import cgroups
from front.identities import basic_auth
from harness.controller import controller, make_config, running_invoker
from harness.processes import InvokerProcess
from tests.integration.harness import PY_HELLO
from tests.integration.invoker.helpers import processes_with_marker
from tests.procs import freezer_dir, frozen, wait_until

pytestmark = pytest.mark.services

SLEEPY = (
    b"import time\ndef main(a):\n    time.sleep(a.get('s', 0.2))\n    return {'i': a.get('i')}\n"
)


async def count_records(stub, aids: list[str]) -> int:
    found = 0
    for aid in aids:
        if await stub.store.get(stub.config.activations_db, f"guest/{aid}") is not None:
            found += 1
    return found


async def wait_for(predicate, timeout_s: float, interval_s: float = 0.2) -> None:
    async with asyncio.timeout(timeout_s):
        while not await predicate():
            await asyncio.sleep(interval_s)


async def test_invoker_killed_with_calls_queued_and_running(kafka, couchdb, tmp_path):
    # Two cores: the first call (5 s) holds the lowest offset unfinished on one, so nothing
    # can be committed while the others finish on the other; the crash then leaves finished
    # calls above the committed offset, which the restarted invoker must re-acknowledge.
    config = make_config(tmp_path, action_cores=(0, 1))
    prefix = config.container_prefix
    first = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker1.log")
    second = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker2.log")
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("sleepy", SLEEPY)
            first.start()
            aids = [
                await stub.invoke(
                    action, rev, blocking=False, content={"i": i, "s": 5 if i == 0 else 0.25}
                )
                for i in range(30)
            ]
            # Let some finish, so the crash hits finished, running and queued calls.
            await wait_for(lambda: _completed(stub, aids, 8), 90)
            assert processes_with_marker(prefix), "the invoker runs containers"
            first.kill()
            # The dead invoker's zygote and containers go with it.
            assert wait_until(lambda: not processes_with_marker(prefix), 15), processes_with_marker(
                prefix
            )
            done_before = sum(1 for a in aids if any("instance" in k for k in stub.acks.get(a, [])))
            assert done_before < len(aids), "the crash must leave work unfinished"
            second.start()
            await wait_for(lambda: _completed(stub, aids, len(aids)), 120)
            # A record can trail its ack: written in a batch, or replayed from the dead
            # invoker's spool (a re-acknowledged call was found there). Give it time; a
            # record lost for good never comes, and the count below says so.
            with contextlib.suppress(TimeoutError):
                await wait_for(lambda: _recorded(stub, aids), 30)
            assert await count_records(stub, aids) == len(aids)
            # No record twice: each _id is unique in the database; and every re-delivered
            # activation that had finished was re-acknowledged rather than run again.
            statuses = []
            for aid in aids:
                rec = await stub.store.get(stub.config.activations_db, f"guest/{aid}")
                statuses.append(rec["response"]["statusCode"])
            assert all(s in (0, 3) for s in statuses)
        assert second.terminate() == 0
        assert "re-acknowledging" in second.log() or done_before == 0
        assert not processes_with_marker(prefix)
    finally:
        first.stop()
        second.stop()


async def _recorded(stub, aids: list[str]) -> bool:
    return await count_records(stub, aids) == len(aids)


async def _completed(stub, aids: list[str], n: int) -> bool:
    done = sum(1 for a in aids if any("instance" in k for k in stub.acks.get(a, [])))
    return done >= n


async def test_sigterm_finishes_running_calls_commits_and_says_goodbye(kafka, couchdb, tmp_path):
    config = make_config(tmp_path, action_cores=(0,))
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("sleepy", SLEEPY)
            proc.start()
            aids = [
                await stub.invoke(action, rev, blocking=False, content={"s": 1.0}) for _ in range(5)
            ]
            await wait_for(lambda: _running(proc), 60)
            t0 = time.monotonic()
            assert await asyncio.to_thread(proc.terminate, 60) == 0
            assert time.monotonic() - t0 < 15  # within the deadline
            # The running call finished and was acknowledged; queued ones were handed back.
            finished = [a for a in aids if any("instance" in k for k in stub.acks.get(a, []))]
            assert finished
            assert stub.pings[-1]["isEnabled"] is False  # the final disabled ping
            assert not processes_with_marker(config.container_prefix)
            # A restart picks up exactly the handed-back calls from the committed offset.
            proc.start()
            await wait_for(lambda: _completed(stub, aids, len(aids)), 60)
            with contextlib.suppress(TimeoutError):  # a record can trail its ack (a batch)
                await wait_for(lambda: _recorded(stub, aids), 30)
            assert await count_records(stub, aids) == len(aids)
    finally:
        proc.stop()


async def _running(proc: InvokerProcess) -> bool:
    """Whether the invoker runs a call now."""
    status = await invoker_status(proc)
    return status is not None and status["running"] >= 1


async def invoker_status(proc: InvokerProcess) -> dict | None:
    """The invoker's ``/status``, from its authenticated admin endpoint; None until it answers."""
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"http://127.0.0.1:{proc.admin_port}/status",
                headers={"Authorization": basic_auth("invoker.user:invoker.pass")},
            ) as r,
        ):
            return await r.json() if r.status == 200 else None
    except aiohttp.ClientError:
        return None


async def test_kafka_broker_restart_mid_load(kafka, couchdb, tmp_path):
    async with running_invoker(kafka, couchdb, tmp_path, action_cores=(0,)) as (_, stub):
        action, rev = await stub.create_action("sleepy", SLEEPY)
        aids = [
            await stub.invoke(action, rev, blocking=False, content={"s": 0.05}) for _ in range(20)
        ]
        await wait_for(lambda: _completed(stub, aids, 5), 60)
        await asyncio.to_thread(kafka.restart)
        # Publishing works again once the broker is back; pings resume.
        pings_before = len(stub.pings)
        more = [
            await stub.invoke(action, rev, blocking=False, content={"s": 0.05}) for _ in range(10)
        ]
        await wait_for(lambda: _completed(stub, aids + more, len(aids + more)), 120)
        with contextlib.suppress(TimeoutError):  # a record can trail its ack (a batch)
            await wait_for(lambda: _recorded(stub, aids + more), 30)
        assert await count_records(stub, aids + more) == len(aids + more)
        await wait_for(lambda: _pinged_since(stub, pings_before), 30)


async def _pinged_since(stub, n: int) -> bool:
    return len(stub.pings) > n + 1


async def test_couchdb_down_records_are_spooled_and_acks_still_flow(kafka, couchdb, tmp_path):
    async with running_invoker(kafka, couchdb, tmp_path, action_cores=(0,)) as (invoker, stub):
        action, rev = await stub.create_action("hello", PY_HELLO)
        await stub.wait_completion(await stub.invoke(action, rev))  # cached, container warm
        missing, mrev = await stub.create_action("never-fetched", PY_HELLO)
        await asyncio.to_thread(couchdb.stop)
        try:
            aids = [await stub.invoke(action, rev, blocking=True) for _ in range(10)]
            for aid in aids:  # acks keep flowing while the database is away
                acks = await stub.wait_completion(aid, timeout_s=60)
                assert acks[0]["response"]["response"]["statusCode"] == 0
            assert invoker.records.spooled_now >= 1
            # An action that is not cached cannot be fetched: a whisk error, not a hang.
            t0 = time.monotonic()
            aid = await stub.invoke(missing, mrev)
            acks = await stub.wait_completion(aid, timeout_s=60)
            assert acks[-1]["isSystemError"] is True
            assert acks[-1]["response"]["response"]["result"]["error"] == (
                "Action could not be fetched."
            )
            assert time.monotonic() - t0 < 30
        finally:
            await asyncio.to_thread(couchdb.start)
        # The spool is written once the database is back; nothing lost.
        await wait_for(lambda: _spool_empty(invoker), 60)
        assert await count_records(stub, aids) == len(aids)


async def _spool_empty(invoker) -> bool:
    return invoker.records.spooled_now == 0


async def test_sigterm_with_the_broker_away_still_exits_promptly(kafka, couchdb, tmp_path):
    config = make_config(tmp_path, action_cores=(0,))
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("hello", PY_HELLO)
            proc.start()
            await stub.wait_completion(await stub.invoke(action, rev), timeout_s=60)
        await asyncio.to_thread(kafka.stop)
        t0 = time.monotonic()
        assert await asyncio.to_thread(proc.terminate, 60) == 0
        assert time.monotonic() - t0 < 30, proc.log()[-2000:]
        assert not processes_with_marker(config.container_prefix)
    finally:
        proc.stop()
        await asyncio.to_thread(kafka.start)


async def test_restart_right_after_kill_9_while_old_containers_cannot_exit_yet(
    kafka, couchdb, tmp_path
):
    """``ow-invoker run`` killed with -9 and restarted at once, while its containers are stuck
    exiting (frozen, so SIGKILL waits): the new run prewarms and serves without "busy"
    errors on the old run's names, and removes the old cgroups once they can go."""
    support = cgroups.probe("wskprobe")
    if os.geteuid() != 0 or freezer_dir() is None or support.version != 1:
        pytest.skip("needs root, the cgroup v1 freezer and memory cgroups")
    config = make_config(tmp_path, action_cores=(0,))
    first = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker1.log")
    second = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker2.log")
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action("hello", PY_HELLO)
            first.start()
            await stub.wait_completion(await stub.invoke(action, rev), timeout_s=60)
            assert first.proc is not None
            containers = [  # the zygote is the invoker's child; containers are the zygote's
                p
                for p in processes_with_marker(config.container_prefix)
                if _ppid(p) != first.proc.pid
            ]
            assert len(containers) >= 3, "two prewarmed nodejs containers and the python one"
            old_cgroups = {_memory_cgroup(p) for p in containers}
            with frozen(containers, f"{config.container_prefix}_frozen") as thaw:
                first.kill()
                second.start()
                aid = await stub.invoke(action, rev)
                await stub.wait_completion(aid, timeout_s=60)
                assert (await stub.record(aid))["response"]["statusCode"] == 0
                busy = [ln for ln in second.log().splitlines() if "busy" in ln or "failed" in ln]
                assert not [ln for ln in busy if "WARNING" in ln or "ERROR" in ln], busy
                thaw()
                gone = lambda: not any(c.exists() for c in old_cgroups)  # noqa: E731
                assert await asyncio.to_thread(wait_until, gone, 15), old_cgroups
        assert second.terminate() == 0
        assert not processes_with_marker(config.container_prefix)
    finally:
        first.stop()
        second.stop()


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _memory_cgroup(pid: int) -> Path:
    own = cgroups.parse_proc_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
    mount, root = cgroups.parse_mountinfo(Path("/proc/self/mountinfo").read_text())["memory"]
    path = own["memory"][len(root) :] if root != "/" else own["memory"]
    return Path(mount) / path.lstrip("/")
