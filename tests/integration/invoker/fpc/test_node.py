"""The scheduler ("FPC") mode end to end: the real invoker (process containers) on real
Kafka and CouchDB, the stand-in scheduler's real gRPC ActivationService and Kafka side.
A creation is acked and its container pulls, runs and answers calls (record in CouchDB,
acks on completed<C>); failures are acked with errors; deletion, the unused timeout, stop,
the policy's ordering of pulled calls and the admin API."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from containers.placement import IDLE_STATES, WarmKey
from harness.controller import ControllerStub, controller, make_config, running_invoker
from harness.fpc_scheduler import StandInScheduler, stand_in_scheduler
from harness.processes import InvokerProcess
from invoker.admin_http import serve_admin
from invoker.fpc.presence import NoPresence
from invoker.service import Invoker
from tests.integration.harness import PY_HELLO
from tests.integration.invoker.helpers import admin_auth, processes_with_marker
from whisk.clock import SystemClock
from whisk.etcd import EtcdClient
from whisk.protocol import QualifiedName, dumps
from whisk.protocol.controller import action_document, activation_message
from whisk.protocol.etcd_keys import ContainerRef
from whisk.protocol.json import dumps_str

pytestmark = pytest.mark.services

HOLD_S = 1.0  # the stand-in's long poll: short, so idle pullers turn over quickly
PY_ERRORS = b"""
import os
def main(a):
    if a.get("exit"):
        os._exit(3)
    if a.get("raise"):
        raise ValueError("bad input")
    return {"error": "boom"} if a.get("error") else {"ok": True}
"""
PY_BYE = b"def main(args):\n    return {'farewell': 'Bye ' + args.get('name', 'stranger')}\n"
# CPU-bound for ``s`` seconds: a sleeping call would leave its core to others (a light call
# shares a core), and the ordering test needs the core taken.
SPIN = (
    b"import time\n"
    b"def main(a):\n"
    b"    end = time.time() + a.get('s', 0)\n"
    b"    while time.time() < end:\n"
    b"        pass\n"
    b"    return {}\n"
)

Live = tuple[Invoker, ControllerStub, StandInScheduler]


class RecordingPresence(NoPresence):
    """Presence that remembers what it was told, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def add_container(self, entry: ContainerRef) -> None:
        self.events.append(("add", entry.container_id))

    def warm(self, entry: ContainerRef) -> None:
        self.events.append(("warm", entry.container_id))

    def remove(self, entry: ContainerRef) -> None:
        self.events.append(("remove", entry.container_id))


@pytest.fixture
def settings() -> dict[str, Any]:
    return {}


@pytest.fixture
async def live(kafka, couchdb, tmp_path, settings) -> AsyncIterator[Live]:
    async with running_invoker(kafka, couchdb, tmp_path, mode="fpc", **settings) as (inv, ctl):
        prefix = inv.config.topic_prefix
        async with stand_in_scheduler(kafka.bootstrap, topic_prefix=prefix, hold_s=HOLD_S) as s:
            await health_tested(inv)
            yield inv, ctl, s
            await inv.stop(deadline_s=5)  # while the scheduler still answers the goodbyes
            assert s.alive_containers == set(), "a client left open"


async def until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.02)


async def health_tested(inv: Invoker) -> None:
    """Until the node's own health test has passed and its container is gone: it made the
    node's first cold start (a nodejs container), which the tests below count beside theirs."""
    await until(lambda: inv.fpc.health.ring.healthy and not inv.pending)
    await until(lambda: all(slot.key is None for slot in inv.pool.slots.values()))
    assert inv.pool.cold_starts == 1


def enqueue(s: StandInScheduler, action: QualifiedName, rev: str, **kw: Any) -> str:
    msg = activation_message(action, rev, start_ms=SystemClock().epoch_ms(), **kw)
    s.enqueue("guest", action, rev, msg.to_json())
    return msg.activation_id


async def container(inv: Invoker, s: StandInScheduler, action: QualifiedName, rev: str) -> str:
    """Ask for a container, check its ack, and return its id once it fetches."""
    before = set(inv.fpc.pullers)
    creation = await s.create_container(0, "guest", action, rev)
    ack = await s.wait_ack(creation.creation_id)
    assert ack.error is None, ack.reason
    assert ack.invoker["instance"] == 0 and ack.rpc_port == s.port
    (cid,) = set(inv.fpc.pullers) - before  # registered before its ack was sent
    await until(lambda: cid in s.seen)
    return cid


async def removed(
    inv: Invoker, s: StandInScheduler, cid: str, action: QualifiedName, rev: str
) -> None:
    """Until the container's client has said goodbye and the pool holds no container of
    this revision (removed, not kept warm)."""
    await until(lambda: not s.seen[cid].alive)
    key = WarmKey("guest", action.docid, rev)
    await until(lambda: all(slot.key != key for slot in inv.pool.slots.values()))


async def test_a_created_container_pulls_runs_and_answers_calls_warm(live):
    inv, ctl, s = live
    action, rev = await ctl.create_action("hello", PY_HELLO)
    cid = await container(inv, s, action, rev)
    assert s.seen[cid].warmed is False and s.seen[cid].alive
    aid = enqueue(s, action, rev, content={"name": "World"}, blocking=True)
    acks = await ctl.wait_completion(aid)
    assert acks[0]["response"]["response"]["result"] == {"greeting": "Hello World"}
    assert acks[-1]["isSystemError"] is False and acks[-1]["instance"]["instance"] == 0
    rec = await ctl.record(aid)
    assert rec["response"]["statusCode"] == 0
    # The container fetches its next call once this one ends, warm, with its run time.
    await until(lambda: s.seen[cid].warmed)
    assert s.seen[cid].last_duration_ms is not None and s.seen[cid].last_duration_ms >= 0
    aid2 = enqueue(s, action, rev, content={"name": "again"}, blocking=False)
    (completion,) = await ctl.wait_completion(aid2)
    assert completion["isSystemError"] is False
    rec2 = await ctl.record(aid2)
    ann = {a["key"]: a["value"] for a in rec2["annotations"]}
    assert "initTime" not in ann, "the second call ran in the same, initialised container"
    assert inv.pool.cold_starts == 2 and len(inv.fpc.pullers) == 1
    assert ctl.pings == [], "no pings on health in the scheduler mode"


async def test_errors_the_container_serves_on_after_an_application_error_not_a_crash(live):
    """As in the sharding mode (test_service's error mapping): an action that answers
    ``{"error": ...}`` or raises is an application error (status 1) and its container serves
    on, warm; one whose process exits is a developer error (status 2) and its container goes,
    its client closed."""
    inv, ctl, s = live
    action, rev = await ctl.create_action("errs", PY_ERRORS)
    cid = await container(inv, s, action, rev)

    async def call(**content: bool) -> dict[str, Any]:
        aid = enqueue(s, action, rev, content=content, blocking=True)
        await ctl.wait_completion(aid)
        return await ctl.record(aid)

    for content, needle in (({"error": True}, "boom"), ({"raise": True}, "bad input")):
        rec = await call(**content)
        assert rec["response"]["statusCode"] == 1 and needle in rec["response"]["result"]["error"]
    rec = await call()
    assert rec["response"]["result"] == {"ok": True}
    assert inv.pool.cold_starts == 2, "every call ran in the one container"  # (and health's)
    rec = await call(exit=True)
    assert rec["response"]["statusCode"] == 2
    assert "exited unexpectedly" in rec["response"]["result"]["error"]
    await removed(inv, s, cid, action, rev)
    assert inv.fpc.pullers == {}


async def test_a_sequence_component_pulled_from_the_scheduler_keeps_its_cause(live):
    """Sequences, triggers and rules are the controller's: in the scheduler mode it sends
    each component of a sequence to the scheduler as an ordinary activation that carries
    the sequence's activation id in ``cause``, and the node's record says so."""
    inv, ctl, s = live
    action, rev = await ctl.create_action("hello", PY_HELLO)
    await container(inv, s, action, rev)
    sequence = activation_message(action, rev, start_ms=SystemClock().epoch_ms()).activation_id
    aid = enqueue(s, action, rev, content={"name": "step"}, blocking=True, cause=sequence)
    acks = await ctl.wait_completion(aid)
    assert acks[0]["response"]["response"]["result"] == {"greeting": "Hello step"}
    rec = await ctl.record(aid)
    assert rec["cause"] == sequence
    assert {a["key"]: a["value"] for a in rec["annotations"]}["causedBy"] == "sequence"


async def test_the_node_tests_itself_with_the_stock_health_action_before_it_is_up(live):
    """As the stock FPC invoker: the test action written into the whisks database, run on a
    nodejs container of the node's own (gone once passed), its record stored in
    ``whisk.system``, no ack sent (no controller reads ``completedhealth``)."""
    inv, ctl, _ = live
    doc = await inv.store.get(inv.config.whisks_db, "whisk.system/invokerHealthTestAction0")
    assert doc["exec"]["kind"] == "nodejs:20" and doc["limits"]["memory"] == 128
    rec = await ctl.record(inv.fpc.health.last_activation_id, namespace="whisk.system")
    assert rec["name"] == "invokerHealthTestAction0" and rec["response"]["statusCode"] == 0
    assert inv.acks.sent == 0
    assert inv.fpc.status()["health"] == "passed" and inv.fpc.health.tests == 1
    assert inv.fpc.resource_record().status == "up"
    assert inv.fpc.pool_state()["totalContainers"] == len(inv.pool.slots)  # stem cells only


async def test_twenty_parallel_blocking_calls_are_each_answered_once(live):
    """Issue 39's "20 parallel blocking calls" through the scheduler mode: four containers
    pull the 20 between them; every call gets its result, one completion and one record."""
    inv, ctl, s = live
    action, rev = await ctl.create_action("hello", PY_HELLO)
    cids = [await container(inv, s, action, rev) for _ in range(4)]
    aids = [enqueue(s, action, rev, content={"name": str(i)}, blocking=True) for i in range(20)]
    answers = await asyncio.gather(*(ctl.wait_completion(aid) for aid in aids))
    for i, (aid, acks) in enumerate(zip(aids, answers, strict=True)):
        assert acks[0]["response"]["response"]["result"] == {"greeting": f"Hello {i}"}
        assert [a["isSystemError"] for a in acks if "instance" in a] == [False]
        assert (await ctl.record(aid))["activationId"] == aid
    assert sum(p.calls for p in inv.fpc.pullers.values()) == 20
    assert set(inv.fpc.pullers) == set(cids)


async def test_creations_that_cannot_be_served_are_acked_with_errors(live):
    inv, ctl, s = live
    missing = QualifiedName("guest", "nosuch", "0.0.1")
    creation = await s.create_container(0, "guest", missing, "1-abc")
    ack = await s.wait_ack(creation.creation_id)
    assert ack.error == "DBFetchError" and ack.reason
    action, rev = await ctl.create_action("odd", b"x", kind="cobol:1")
    creation = await s.create_container(0, "guest", action, rev, kind="cobol:1")
    ack = await s.wait_ack(creation.creation_id)
    assert ack.error in ("WhiskError", "DBFetchError") and ack.reason
    assert inv.fpc.pullers == {}
    assert all(slot.key is None for slot in inv.pool.slots.values()), "nothing kept"


async def test_a_creation_whose_activation_service_cannot_be_reached_is_acked_with_an_error(
    live, caplog
):
    """A creation naming a gRPC port nobody listens on: the container is made, but no
    client can feed it, so the ack says WhiskError (upstream's scheduler then tries another
    invoker), the log says why, and the container is kept warm for a later creation."""
    inv, ctl, s = live
    action, rev = await ctl.create_action("hello", PY_HELLO)
    creation = await s.create_container(0, "guest", action, rev, rpc_port=free_port())
    ack = await s.wait_ack(creation.creation_id, timeout_s=15)
    assert ack.error == "WhiskError" and "cannot be reached" in ack.reason
    assert "cannot be reached" in caplog.text
    assert inv.fpc.pullers == {} and s.seen == {}
    key = WarmKey("guest", action.docid, rev)
    (kept,) = [slot for slot in inv.pool.slots.values() if slot.key == key]
    assert kept.state in IDLE_STATES
    await container(inv, s, action, rev)  # a creation from a reachable scheduler takes it
    assert inv.pool.cold_starts == 2 and inv.pool.warm_starts == 1


async def test_a_malformed_creation_is_answered_and_the_node_keeps_working(live):
    inv, ctl, s = live
    await s.publish(s.invoker_topic(0), b"this is not JSON")
    bad_id = "a" * 32
    await s.publish(
        s.invoker_topic(0),
        dumps({"creationId": bad_id, "rootSchedulerIndex": {"asString": "0"}, "rpcPort": 1}),
    )
    # Its error ack echoes what it had (too little for the scheduler's reader here).
    await until(lambda: any(bad_id.encode() in a and b"WhiskError" in a for a in s.bad_acks))
    action, rev = await ctl.create_action("hello", PY_HELLO)
    await container(inv, s, action, rev)
    aid = enqueue(s, action, rev, content={"name": "still"})
    await ctl.wait_completion(aid)


async def test_an_invalid_pulled_activation_is_answered_and_pulling_goes_on(live):
    inv, ctl, s = live
    action, rev = await ctl.create_action("hello", PY_HELLO)
    cid = await container(inv, s, action, rev)
    msg = activation_message(action, rev, start_ms=SystemClock().epoch_ms(), blocking=False)
    bad = {**msg.to_json(), "revision": 5}  # names its controller, fails validation
    s.answer_garbage(dumps_str({"message": bad}))
    await until(lambda: s.seen[cid].fetches >= 2)  # the held fetch ends: the garbage next
    acks = await ctl.wait_completion(msg.activation_id)
    assert acks[-1]["isSystemError"] is True
    aid = enqueue(s, action, rev, content={"name": "still"})
    await ctl.wait_completion(aid)  # the same container went on pulling
    assert list(inv.fpc.pullers) == [cid]


SLEEPY_JS = b"""
function main(a) {
  return new Promise(done => setTimeout(() => done({i: a.i}), (a.s || 0.2) * 1000));
}
"""


async def test_a_container_of_concurrency_two_runs_two_pulled_calls_at_once(live):
    inv, ctl, s = live
    action, rev = await ctl.create_action("sleepy", SLEEPY_JS, kind="nodejs:20", concurrency=2)
    cid = await container(inv, s, action, rev)
    aids = [enqueue(s, action, rev, content={"i": i, "s": 1.5}, blocking=False) for i in (0, 1)]
    for aid in aids:
        await ctl.wait_completion(aid)
    first, second = sorted([await ctl.record(a) for a in aids], key=lambda r: r["start"])
    assert second["start"] < first["end"], "the two calls overlapped in the one container"
    assert inv.pool.cold_starts == 2 and list(inv.fpc.pullers) == [cid]


async def test_a_deletion_closes_the_client_and_removes_the_container(live):
    inv, ctl, s = live
    inv.fpc.presence = presence = RecordingPresence()
    action, rev = await ctl.create_action("hello", PY_HELLO)
    cid = await container(inv, s, action, rev)
    await s.delete_containers(0, "guest", action, rev)
    await removed(inv, s, cid, action, rev)
    assert inv.fpc.pullers == {}
    assert presence.events == [("add", cid), ("remove", cid)]


async def test_an_action_update_removes_the_old_revisions_container(live):
    """An update makes a new revision: the scheduler drops the old revision's queue, so the
    old container's next fetch is answered ``ActionMismatch`` and the container goes (it is
    not kept warm: its code is outdated); the new revision gets a container of its own."""
    inv, ctl, s = live
    inv.fpc.presence = presence = RecordingPresence()
    action, old_rev = await ctl.create_action("hello", PY_HELLO)
    old = await container(inv, s, action, old_rev)
    aid = enqueue(s, action, old_rev, content={"name": "old"}, blocking=True)
    acks = await ctl.wait_completion(aid)
    assert acks[0]["response"]["response"]["result"] == {"greeting": "Hello old"}
    doc = action_document("guest", "hello", kind="python:3.11", code=PY_BYE)
    new_rev = await ctl.store.put(ctl.config.whisks_db, {**doc, "_rev": old_rev})
    s.remove_queue("guest", action, old_rev)
    s.create_queue("guest", action, new_rev)
    await removed(inv, s, old, action, old_rev)
    assert presence.events == [("add", old), ("remove", old)]
    new = await container(inv, s, action, new_rev)
    aid = enqueue(s, action, new_rev, content={"name": "new"}, blocking=True)
    acks = await ctl.wait_completion(aid)
    assert acks[0]["response"]["response"]["result"] == {"farewell": "Bye new"}
    assert set(inv.fpc.pullers) == {new} and inv.pool.cold_starts == 3


@pytest.mark.parametrize("settings", [{"pause_grace_s": 1.0}])
async def test_an_unused_container_closes_its_client_and_is_kept_warm(live):
    inv, ctl, s = live
    inv.fpc.presence = presence = RecordingPresence()
    action, rev = await ctl.create_action("hello", PY_HELLO)
    cid = await container(inv, s, action, rev)
    await until(lambda: not s.seen[cid].alive, timeout_s=10)
    key = WarmKey("guest", action.docid, rev)
    kept = [slot for slot in inv.pool.slots.values() if slot.key == key]
    assert len(kept) == 1 and kept[0].state in IDLE_STATES
    assert presence.events == [("add", cid), ("warm", cid)]
    # A new creation for the action takes the kept container: no second cold start.
    await container(inv, s, action, rev)
    assert inv.pool.cold_starts == 2 and inv.pool.warm_starts == 1


async def test_stop_reschedules_a_pulled_call_that_has_not_started(live):
    inv, ctl, s = live
    slow, slow_rev = await ctl.create_action("slow", SPIN)
    other, other_rev = await ctl.create_action("other", PY_HELLO)
    await container(inv, s, slow, slow_rev)
    await container(inv, s, other, other_rev)
    running = enqueue(s, slow, slow_rev, content={"s": 2})
    await until(lambda: inv.scheduler.running == 1)
    waiting = enqueue(s, other, other_rev)
    await until(lambda: inv.scheduler.queued == 1)  # pulled, waiting for the one core
    await inv.stop(deadline_s=10)
    assert [m["activationId"] for m in s.reschedules] == [waiting]
    assert [m["activationId"] for m in s.queued("guest", other, other_rev)] == [waiting]
    await ctl.wait_completion(running)  # the running call finished within the deadline
    assert s.alive_containers == set(), "every client closed"


async def test_a_container_that_dies_mid_call_answers_it_and_goes(live):
    inv, ctl, s = live
    action, rev = await ctl.create_action("crash", b"import os\ndef main(a):\n    os._exit(3)\n")
    cid = await container(inv, s, action, rev)
    aid = enqueue(s, action, rev, blocking=False)
    (completion,) = await ctl.wait_completion(aid)
    assert completion["isSystemError"] is False
    assert "exited unexpectedly" in str((await ctl.record(aid))["response"]["result"]["error"])
    await removed(inv, s, cid, action, rev)
    assert inv.fpc.pullers == {}


async def test_a_scheduler_that_goes_away_ends_the_puller_and_frees_the_container(live):
    inv, ctl, s = live
    action, rev = await ctl.create_action("hello", PY_HELLO)
    await container(inv, s, action, rev)
    await s._server.stop(grace=None)  # the gRPC side only: its Kafka side stays
    await until(lambda: inv.fpc.pullers == {}, timeout_s=15)  # after its retries
    key = WarmKey("guest", action.docid, rev)
    (kept,) = [slot for slot in inv.pool.slots.values() if slot.key == key]
    assert kept.state in IDLE_STATES, "released healthy: a later creation may take it"
    s.seen.clear()  # its goodbye could not reach the stopped server


@pytest.mark.parametrize("settings", [{"policy": "sept"}])
async def test_a_short_pulled_call_starts_before_a_long_one_pulled_earlier(live):
    inv, ctl, s = live
    slow, slow_rev = await ctl.create_action("slow", SPIN)
    fast, fast_rev = await ctl.create_action("fast", SPIN)  # CPU-bound too, but short
    for action, rev in ((slow, slow_rev), (slow, slow_rev), (fast, fast_rev)):
        await container(inv, s, action, rev)
    # Each function's run time, as the policy learns it.
    warm_up = (
        enqueue(s, slow, slow_rev, content={"s": 1}),
        enqueue(s, fast, fast_rev, content={"s": 0.1}),
    )
    for aid in warm_up:
        await ctl.wait_completion(aid)
    first = enqueue(s, slow, slow_rev, content={"s": 2})
    await until(lambda: inv.scheduler.running == 1)
    long_waiting = enqueue(s, slow, slow_rev, content={"s": 1})
    await until(lambda: inv.scheduler.queued == 1)
    short = enqueue(s, fast, fast_rev, content={"s": 0.1})
    await until(lambda: inv.scheduler.queued == 2)
    for aid in (first, long_waiting, short):
        await ctl.wait_completion(aid)
    r_first, r_long, r_short = [await ctl.record(a) for a in (first, long_waiting, short)]
    assert r_short["start"] >= r_first["end"] - 50, "the short call waited for the core"
    assert r_short["start"] < r_long["start"], "the policy, not the pull order, ran it first"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_the_admin_api_of_the_fpc_invoker_server(live):
    inv, ctl, s = live
    port = free_port()
    runner = await serve_admin(inv, "127.0.0.1", port)
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(headers=admin_auth()) as http:
            action, rev = await ctl.create_action("hello", PY_HELLO)
            cid = await container(inv, s, action, rev)
            async with http.get(f"{base}/pool") as r:
                pool = await r.json()
            assert pool["busyPool"]["total"] == 1 and pool["inProgressCount"] == 0
            assert pool["busyPool"]["containers"][0]["containerId"] == cid
            async with http.get(f"{base}/pool/count") as r:
                assert await r.text() == "1"
            async with http.get(f"{base}/status") as r:
                fpc = (await r.json())["fpc"]
            assert fpc["containersWithClients"] == 1 and fpc["accepting"] is True
            assert fpc["resources"]["busyMemory"] == 256 and fpc["resources"]["status"] == "up"
            async with aiohttp.ClientSession() as anonymous:
                async with anonymous.get(f"{base}/pool/count") as r:
                    assert r.status == 401
                async with anonymous.get(f"{base}/ping") as r:
                    assert await r.text() == "pong"
            async with http.post(f"{base}/disable") as r:
                assert "now disabled" in await r.text()
            async with http.get(f"{base}/isEnabled") as r:
                assert await r.json() == {"enabled": False}
            await until(lambda: not s.seen[cid].alive)  # its puller ended
            refused = await s.create_container(0, "guest", action, rev)
            assert (await s.wait_ack(refused.creation_id)).error == "ResourceNotEnoughError"
            async with http.post(f"{base}/enable") as r:
                assert "now enabled" in await r.text()
            await container(inv, s, action, rev)
            async with http.get(f"{base}/pool/count") as r:
                assert await r.text() == "1"
    finally:
        await runner.cleanup()


OW = "org.apache.openwhisk.core.invoker."


@asynccontextmanager
async def fpc_process(
    kafka: Any, couchdb: Any, tmp_path: Path, monkeypatch: Any
) -> AsyncIterator[tuple[InvokerProcess, ControllerStub, StandInScheduler]]:
    """`ow-invoker run` as a process (not started yet), chosen into the mode by the stock
    SPI variables alone, beside a controller stub and the stand-in scheduler; killed at
    the end if it still runs."""
    monkeypatch.setenv("CONFIG_whisk_spi_InvokerProvider", OW + "FPCInvokerReactive")
    monkeypatch.setenv("CONFIG_whisk_spi_InvokerServerProvider", OW + "FPCInvokerServer")
    config = make_config(tmp_path)
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    try:
        async with (
            controller(kafka, couchdb, config) as ctl,
            stand_in_scheduler(
                kafka.bootstrap, topic_prefix=config.topic_prefix, hold_s=HOLD_S
            ) as s,
        ):
            yield proc, ctl, s
    finally:
        proc.stop()


async def test_ow_invoker_run_with_the_stock_fpc_spis_serves_the_scheduler(
    kafka, couchdb, tmp_path, monkeypatch
):
    async with fpc_process(kafka, couchdb, tmp_path, monkeypatch) as (proc, ctl, s):
        action, rev = await ctl.create_action("hello", PY_HELLO)
        proc.start()
        creation = await s.create_container(0, "guest", action, rev)
        ack = await s.wait_ack(creation.creation_id, timeout_s=60)
        assert ack.error is None, ack.reason
        aid = enqueue(s, action, rev, content={"name": "process"})
        acks = await ctl.wait_completion(aid)
        assert acks[0]["response"]["response"]["result"] == {"greeting": "Hello process"}
        url = f"http://127.0.0.1:{proc.admin_port}/pool/count"
        async with aiohttp.ClientSession(headers=admin_auth()) as http, http.get(url) as r:
            assert await r.text() == "1"
        assert await asyncio.to_thread(proc.terminate, 30) == 0
        assert s.alive_containers == set(), "its client said goodbye"
        assert ctl.pings == [], "no pings in the scheduler mode"
        assert "(fpc mode)" in proc.log()
        assert not processes_with_marker(proc.config.container_prefix)


SLEEPY = b"import time\ndef main(a):\n    time.sleep(a['s'])\n    return {'slept': a['s']}\n"


async def test_kill_9_with_a_pulled_call_in_flight_loses_nothing(
    kafka, couchdb, tmp_path, monkeypatch
):
    """The stock FPC invoker loses a call it has pulled when it dies (the scheduler forgot
    it at the fetch). Ours journals it: the next start gives it back to its scheduler, which
    hands it to a new container; it runs once more to one record and one answer."""
    async with fpc_process(kafka, couchdb, tmp_path, monkeypatch) as (proc, ctl, s):
        config = proc.config
        journal = Path(config.state_dir) / f"{config.container_prefix}.fpc-pulled"
        action, rev = await ctl.create_action("sleepy", SLEEPY)

        async def a_container() -> None:
            creation = await s.create_container(0, "guest", action, rev)
            ack = await s.wait_ack(creation.creation_id, timeout_s=60)
            assert ack.error is None, ack.reason

        def queued() -> list[str]:
            return [m["activationId"] for m in s.queued("guest", action, rev)]

        proc.start()
        await a_container()
        aid = enqueue(s, action, rev, content={"s": 3}, blocking=False)
        await until(lambda: not queued() and len(list(journal.glob("*.json"))) == 1)
        await asyncio.sleep(0.5)  # in its container's /run
        await asyncio.to_thread(proc.kill)
        assert aid not in ctl.acks
        proc.start()  # the same state directory: the journal is read at start
        await until(lambda: queued() == [aid], timeout_s=60)
        await a_container()  # as the scheduler does for a queue with no container left
        (completion,) = await ctl.wait_completion(aid, timeout_s=60)
        assert completion["isSystemError"] is False
        rec = await ctl.record(aid)
        assert rec["response"]["result"] == {"slept": 3}
        await until(lambda: not list(journal.glob("*")))  # let go just after the acks
        assert "rescheduled" in proc.log()
        assert await asyncio.to_thread(proc.terminate, 30) == 0
        assert ctl.acks[aid] == [completion], "answered once"


async def test_the_node_is_present_in_etcd_as_the_stock_fpc_invoker(kafka, couchdb, etcd, tmp_path):
    """With etcd hosts (the stock CONFIG_whisk_etcd_hosts) the node registers on a lease of
    its own: its resource record, a key per container with a client, a warmed key once the
    container is kept warm and until it is removed; stopping revokes the lease: every key
    goes."""
    cluster = f"fpc{socket.gethostname()[:4]}{id(tmp_path) % 10**6}"
    settings = {
        "mode": "fpc",
        "etcd_hosts": etcd.hosts,
        "cluster_name": cluster,
        "etcd_lease_timeout_s": 3,
        "pause_grace_s": 2.0,
    }
    async with EtcdClient(etcd.hosts) as look:
        async with running_invoker(kafka, couchdb, tmp_path, **settings) as (inv, ctl):
            prefix = inv.config.topic_prefix
            async with stand_in_scheduler(kafka.bootstrap, topic_prefix=prefix, hold_s=HOLD_S) as s:
                await until(lambda: inv.fpc.presence.healthy)
                await health_tested(inv)

                async def up() -> str | None:
                    (record,) = (await look.get_prefix(f"{cluster}/invokers/0")).values()
                    return record if json.loads(record)["status"] == "up" else None

                assert await eventually(up, timeout_s=5)
                assert await look.get_prefix(f"{cluster}/instance/invoker0/")
                action, rev = await ctl.create_action("hello", PY_HELLO)
                cid = await container(inv, s, action, rev)
                path = f"guest/guest/hello/{rev}"
                held = f"{cluster}/namespace/{path}/invoker0/container/{cid}"
                warmed = f"{cluster}/warmed/{path}/invoker/0/container/{cid}"
                assert await eventually(lambda: look.get(held), timeout_s=5) == ""
                # No call for pause_grace_s: the client closes, the container is kept warm.
                assert await eventually(lambda: look.get(warmed), timeout_s=15) == ""
                assert await look.get(held) is None
                # The kept container removed (here by a deletion): its warmed key goes too.
                await s.delete_containers(0, "guest", action, rev)
                async with asyncio.timeout(10):
                    while await look.get(warmed) is not None:
                        await asyncio.sleep(0.1)
                assert not any(sl.key for sl in inv.pool.slots.values())
                await inv.stop(deadline_s=5)
                assert inv.fpc.presence.state == "closed: closed"
        assert await look.get_prefix(f"{cluster}/") == {}


async def eventually(read: Callable[[], Awaitable[Any]], timeout_s: float) -> Any:
    """What ``read`` returns once it is not None (or the timeout)."""
    async with asyncio.timeout(timeout_s):
        while (value := await read()) is None:
            await asyncio.sleep(0.1)
        return value


async def test_a_ktask_creation_without_a_gpu_pool_is_an_error_ack(live):
    """A ``kaas`` action's calls need the GPU pool: a node without one says so in the
    creation ack (WhiskError: upstream's scheduler tries another invoker), makes nothing."""
    inv, ctl, s = live
    action, rev = await ctl.create_action("knn", b'{"kernels": []}', kind="kaas")
    creation = await s.create_container(0, "guest", action, rev, kind="kaas")
    ack = await s.wait_ack(creation.creation_id)
    assert ack.error == "WhiskError" and "no GPU pool" in ack.reason
    assert inv.fpc.pullers == {}
