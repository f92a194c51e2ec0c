"""The controller's features through a whole scheduler ("FPC") deployment: the front as a
stock ``FPCPoolBalancer`` controller (activations on ``scheduler<S>``, schedulers and invokers
read from etcd), the stand-in scheduler making its own queues and containers
(:mod:`harness.fpc_queues`), and the invoker in the FPC mode, present in etcd, its
containers pulling over gRPC; on real Kafka, CouchDB and etcd. Actions cold and warm on two
runtimes, errors, sequences, triggers and rules, web actions, 20 parallel blocking calls and
an action update, as a user of the REST API sees them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from containers.process.backend import ProcessBackend
from front.entities import annotation
from front.identities import GUEST_AUTH, basic_auth
from front.server import start_front
from harness.controller import make_config
from harness.fpc_queues import QueueProvisioner, provisioned_scheduler
from harness.processes import ROOT, InvokerProcess, free_port
from invoker.config import InvokerConfig
from invoker.service import Invoker
from tests.front_platform import Platform
from tests.integration.front.conftest import NS, activation, invoke, put_action
from whisk.bus.kafka import KafkaBus
from whisk.clock import SystemClock
from whisk.store.couch import CouchStore

pytestmark = pytest.mark.services

SLEEP = "import time\ndef main(a):\n    time.sleep(a.get('s', 0))\n    return {'n': a.get('n')}\n"
ECHO = "def main(a):\n    return a\n"
FPC_BALANCER = "org.apache.openwhisk.core.loadBalancer.FPCPoolBalancer"
NODE_HELLO = "function main(p) { return {greeting: 'Hello ' + (p.name || 'stranger')}; }\n"


@dataclass
class Deployment:
    api: Platform
    scheduler: QueueProvisioner


def stand_in(kafka, store: CouchStore, cfg: InvokerConfig, etcd, cluster: str):
    """The stand-in scheduler, making its own queues and containers, for this deployment's
    topics, databases and etcd cluster."""
    return provisioned_scheduler(
        kafka.bootstrap,
        store,
        cfg.whisks_db,
        etcd.hosts,
        cluster=cluster,
        topic_prefix=cfg.topic_prefix,
        hold_s=1.0,
    )


@asynccontextmanager
async def deployment(kafka, couchdb, etcd, tmp_path: Path) -> AsyncIterator[Deployment]:
    """Invoker, stand-in scheduler and front, each on the services alone (no in-process
    shortcut between them), under a topic prefix, databases and etcd cluster of their own."""
    cluster = f"fe{uuid.uuid4().hex[:8]}"
    cfg = make_config(
        tmp_path,
        mode="fpc",
        etcd_hosts=etcd.hosts,
        cluster_name=cluster,
        user_memory_mb=2048,
        etcd_lease_timeout_s=3,
    )
    clock = SystemClock()
    store = CouchStore(couchdb.url, couchdb.user, couchdb.password)
    backend = ProcessBackend(state_dir=tmp_path / "containers", name_prefix=cfg.container_prefix)
    bus = KafkaBus(kafka.bootstrap, session_timeout_ms=6000, heartbeat_interval_ms=1000)
    invoker = Invoker(cfg, bus=bus, store=store, backend=backend, clock=clock)
    await invoker.start()
    try:
        async with stand_in(kafka, store, cfg, etcd, cluster) as scheduler:
            front = await start_front(
                bus=KafkaBus(kafka.bootstrap),
                store=store,
                clock=clock,
                host="127.0.0.1",
                port=0,
                whisks_db=cfg.whisks_db,
                activations_db=cfg.activations_db,
                topic_prefix=cfg.topic_prefix,
                state_dir=tmp_path / "front",
                etcd_hosts=etcd.hosts,
                cluster_name=cluster,
            )
            http = aiohttp.ClientSession(headers={"Authorization": basic_auth(GUEST_AUTH)})
            try:
                await front.controller.wait_for_invokers(1, timeout_s=60)
                yield Deployment(Platform(front, invoker, front.url, http), scheduler)
            finally:
                await http.close()
                await front.stop()
                await invoker.stop(deadline_s=5)  # while the scheduler answers the goodbyes
    finally:
        await invoker.stop(deadline_s=5)
        await store.close()


@pytest.fixture
async def fpc(kafka, couchdb, etcd, tmp_path) -> AsyncIterator[Deployment]:
    async with deployment(kafka, couchdb, etcd, tmp_path) as d:
        yield d


def cold(record: dict) -> bool:
    return annotation(record, "initTime") is not None


async def test_actions_run_cold_then_warm_and_the_front_reads_the_deployment_from_etcd(fpc):
    api, scheduler = fpc.api, fpc.scheduler
    status, invokers = await api.call("GET", "/invokers")
    assert status == 200 and invokers == {f"invoker0/{api.invoker.config.unique_name}": "up"}
    assert await api.call("GET", "/invokers/healthy/count") == (200, 1)
    await put_action(api, "py", ECHO)
    await put_action(api, "js", NODE_HELLO, kind="nodejs:default")
    for name, payload, result in (
        ("py", {"x": 1}, {"x": 1}),
        ("js", {"name": "FPC"}, {"greeting": "Hello FPC"}),
    ):
        first = await invoke(api, name, payload)
        second = await invoke(api, name, payload)
        assert first[0] == second[0] == 200, (first, second)
        assert first[1]["response"]["result"] == second[1]["response"]["result"] == result
        assert cold(first[1]) and not cold(second[1]), name
    # Made by the scheduler's queue; at least one an action (the stand-in asks for one more
    # when a call waits past its graces for a container's fetch, as on a loaded machine).
    assert scheduler.creations >= 2
    # A non-blocking call: its record is stored, no result waited for.
    status, body = await api.call("POST", f"{NS}/actions/py", json={"y": 2})
    assert status == 202, body
    assert (await activation(api, body["activationId"]))["response"]["result"] == {"y": 2}


async def test_errors_come_back_as_the_sharding_mode_gives_them(fpc):
    api = fpc.api
    await put_action(
        api,
        "err",
        "import os\n"
        "def main(a):\n"
        "    if a.get('exit'):\n"
        "        os._exit(3)\n"
        "    if a.get('raise'):\n"
        "        raise ValueError('bad input')\n"
        "    return {'error': 'boom'}\n",
    )
    status, rec = await invoke(api, "err")
    assert status == 502 and rec["response"]["status"] == "application error"
    assert rec["response"]["result"] == {"error": "boom"}
    status, rec = await invoke(api, "err", {"raise": True})
    assert status == 502 and rec["response"]["status"] == "application error"
    status, rec = await invoke(api, "err", {"exit": True})
    assert status == 502 and rec["response"]["status"] == "action developer error", rec
    # The node serves on: a new container for the next call.
    status, rec = await invoke(api, "err")
    assert status == 502 and rec["response"]["result"] == {"error": "boom"}


async def test_sequences_and_web_actions(fpc):
    api = fpc.api
    await put_action(api, "add", "def main(a):\n    return {'n': a.get('n', 0) + 1}\n")
    await put_action(
        api, "double", "function main(p) { return {n: p.n * 2}; }\n", kind="nodejs:default"
    )
    body = {"exec": {"kind": "sequence", "components": ["/_/add", "/_/double", "/_/add"]}}
    assert (await api.call("PUT", f"{NS}/actions/s?overwrite=true", json=body))[0] == 200
    status, rec = await invoke(api, "s", {"n": 1})
    assert status == 200 and rec["response"]["result"] == {"n": 5}, rec
    components = [await activation(api, aid) for aid in rec["logs"]]
    assert [c["name"] for c in components] == ["add", "double", "add"]
    assert all(c["cause"] == rec["activationId"] for c in components)

    await put_action(
        api,
        "page",
        "def main(a):\n    return {'body': 'hi ' + a.get('who', '?')}\n",
        annotations=[{"key": "web-export", "value": True}],
    )
    async with aiohttp.ClientSession() as anonymous:
        url = f"{api.url}/api/v1/web/guest/default/page.http?who=web"
        async with anonymous.get(url) as r:
            assert r.status == 200 and await r.text() == "hi web"


async def test_a_trigger_fires_its_rules_actions(fpc):
    api = fpc.api
    await put_action(api, "echo", ECHO)
    assert (await api.call("PUT", f"{NS}/triggers/t", json={}))[0] == 200
    rule = {"trigger": "/_/t", "action": "/_/echo"}
    assert (await api.call("PUT", f"{NS}/rules/r", json=rule))[0] == 200
    status, body = await api.call("POST", f"{NS}/triggers/t", json={"q": 7})
    assert status == 202, body
    fired = await activation(api, body["activationId"])
    (entry,) = [json.loads(line) for line in fired["logs"]]
    assert entry["success"] is True
    ran = await activation(api, entry["activationId"])
    assert ran["name"] == "echo" and ran["response"]["result"]["q"] == 7


async def test_twenty_parallel_blocking_calls_are_all_answered(fpc):
    """More calls than one container serves: the queue asks for more containers, and every
    call is answered once, with its own result."""
    api, scheduler = fpc.api, fpc.scheduler
    await put_action(api, "sleep", SLEEP)
    answers = await asyncio.gather(*(invoke(api, "sleep", {"s": 0.5, "n": n}) for n in range(20)))
    assert [a[0] for a in answers] == [200] * 20, answers
    assert sorted(a[1]["response"]["result"]["n"] for a in answers) == list(range(20))
    assert len({a[1]["activationId"] for a in answers}) == 20
    assert scheduler.creations > 1


async def test_an_action_update_retires_the_old_revisions_containers(fpc):
    api, scheduler = fpc.api, fpc.scheduler
    await put_action(api, "v", "def main(a):\n    return {'v': 1}\n")
    status, rec = await invoke(api, "v")
    assert status == 200 and rec["response"]["result"] == {"v": 1}
    await put_action(api, "v", "def main(a):\n    return {'v': 2}\n")
    status, rec = await invoke(api, "v")
    assert status == 200 and rec["response"]["result"] == {"v": 2}, rec
    assert cold(rec)
    ((docid, old),) = scheduler.deletions
    assert docid == "guest/v" and old is not None
    pool = api.invoker.pool
    async with asyncio.timeout(10):  # deleted, not kept warm
        while any(s.key is not None and s.key.revision == old for s in pool.slots.values()):
            await asyncio.sleep(0.05)


SPIS = {
    "CONFIG_whisk_spi_InvokerProvider": "org.apache.openwhisk.core.invoker.FPCInvokerReactive",
    "CONFIG_whisk_spi_InvokerServerProvider": "org.apache.openwhisk.core.invoker.FPCInvokerServer",
}


def start_front_process(
    cfg: InvokerConfig, kafka: str, couchdb, env: dict[str, str], log: Path, port: int
) -> subprocess.Popen[bytes]:
    """``ow-invoker front`` as a child process on ``env`` (the stock controller's names)."""
    args = [sys.executable, "-m", "ow_invoker", "front", "--port", str(port), "--kafka", kafka]
    args += ["--topic-prefix", cfg.topic_prefix, "--db-prefix", cfg.db_prefix]
    args += ["--couchdb-url", couchdb.url, "--couchdb-user", couchdb.user]
    args += ["--state-dir", str(log.parent / "front-state")]
    env = {**os.environ, **env, "CONFIG_whisk_couchdb_password": couchdb.password}
    with open(log, "ab") as out:
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=out)


@asynccontextmanager
async def front_process(cfg: InvokerConfig, kafka: str, couchdb, env: dict[str, str], log: Path):
    """The front process; yields its URL once it answers, terminated after."""
    port = free_port()
    proc = start_front_process(cfg, kafka, couchdb, env, log, port)
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http, asyncio.timeout(60):
            while True:
                assert proc.poll() is None, log.read_text()
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"{url}/ping") as r:
                        if r.status == 200:
                            break
                await asyncio.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 30)


async def test_processes_on_the_stock_names_and_kill_9_with_a_call_in_flight(
    kafka, couchdb, etcd, tmp_path, monkeypatch
):
    """``ow-invoker run`` on the stock FPC invoker's environment and ``ow-invoker front`` on
    the stock FPCPoolBalancer controller's, each a process of its own: a blocking call
    through the API whose invoker is killed (-9) while it runs is run again after the
    restart (the node's journal gives it back to the scheduler) and answered to its caller,
    once."""
    cluster = f"fp{uuid.uuid4().hex[:8]}"
    stock = {"CONFIG_whisk_etcd_hosts": etcd.hosts, "CONFIG_whisk_cluster_name": cluster}
    for name, value in {**SPIS, **stock, "CONFIG_whisk_etcd_lease_timeout": "3 seconds"}.items():
        monkeypatch.setenv(name, value)
    cfg = make_config(tmp_path)
    journal = Path(cfg.state_dir) / f"{cfg.container_prefix}.fpc-pulled"
    invoker = InvokerProcess(cfg, kafka.bootstrap, couchdb, tmp_path / "invoker.log")
    balancer = {"CONFIG_whisk_spi_LoadBalancerProvider": FPC_BALANCER}
    store = CouchStore(couchdb.url, couchdb.user, couchdb.password)
    try:
        invoker.start()
        async with (
            stand_in(kafka, store, cfg, etcd, cluster) as scheduler,
            front_process(cfg, kafka.bootstrap, couchdb, balancer, tmp_path / "front.log") as url,
            aiohttp.ClientSession(headers={"Authorization": basic_auth(GUEST_AUTH)}) as http,
        ):

            async def call(method: str, path: str, **kw) -> tuple[int, dict]:
                async with http.request(method, url + path, **kw) as r:
                    return r.status, await r.json(content_type=None)

            async with asyncio.timeout(60):
                while (await call("GET", "/invokers/healthy/count"))[1] != 1:
                    await asyncio.sleep(0.2)
            sleepy = {"exec": {"kind": "python:default", "code": SLEEP}}
            assert (await call("PUT", f"{NS}/actions/sleepy", json=sleepy))[0] == 200
            path = f"{NS}/actions/sleepy?blocking=true"
            status, warmup = await call("POST", path, json={"n": 0})
            assert status == 200, warmup

            in_flight = asyncio.ensure_future(call("POST", path, json={"s": 3, "n": 1}))
            async with asyncio.timeout(30):  # pulled, journaled, in its container's /run
                while not list(journal.glob("*.json")):
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            await asyncio.to_thread(invoker.kill)
            creations = scheduler.creations
            invoker.start()  # the same state directory: the journal is read at start
            status, rec = await in_flight
            assert status == 200 and rec["response"]["result"] == {"n": 1}, rec
            assert "rescheduled" in invoker.log()
            assert scheduler.creations > creations, "the rescheduled call got a new container"
            ids = sorted([warmup["activationId"], rec["activationId"]])
            for _ in range(50):  # a listing is a view of the database, updated as it is read
                status, listed = await call("GET", f"{NS}/activations?name=sleepy&limit=10")
                if len(listed) >= 2:
                    break
                await asyncio.sleep(0.1)
            assert sorted(a["activationId"] for a in listed) == ids, "one record a call"
            assert await asyncio.to_thread(invoker.terminate, 30) == 0
    finally:
        invoker.stop()
        await store.close()
