"""The real services the other tests rely on work through the session fixtures."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
from pathlib import Path

import aiodocker
import aiohttp
import pytest
import yarl
from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from services import unique_name

pytestmark = pytest.mark.services

# OpenWhisk's limit for a message on its topics (max.message.bytes of the invoker topics).
OW_MAX_MESSAGE_BYTES = 1054644
PAYLOAD = bytes(range(256)) * 3900  # 998,400 bytes: a ~1 MB activation message


async def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(
                    topic,
                    num_partitions=1,
                    replication_factor=1,
                    topic_configs={"max.message.bytes": str(OW_MAX_MESSAGE_BYTES)},
                )
            ]
        )
    finally:
        await admin.close()


def _consumer(bootstrap: str, topic: str, group: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=1000,
        heartbeat_interval_ms=200,
        max_partition_fetch_bytes=OW_MAX_MESSAGE_BYTES,
    )


async def _produce(bootstrap: str, topic: str, *values: bytes) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, max_request_size=OW_MAX_MESSAGE_BYTES, acks="all"
    )
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


async def test_kafka_big_message_and_manual_commit(kafka):
    topic, group = unique_name("invoker0"), unique_name("g")
    await _create_topic(kafka.bootstrap, topic)
    await _produce(kafka.bootstrap, topic, PAYLOAD, b"second")

    consumer = _consumer(kafka.bootstrap, topic, group)
    await consumer.start()
    try:
        first = await asyncio.wait_for(consumer.getone(), 20)
        assert first.value == PAYLOAD
        await consumer.commit({TopicPartition(topic, 0): first.offset + 1})
        assert await consumer.committed(TopicPartition(topic, 0)) == first.offset + 1
    finally:
        await consumer.stop()

    # A new member of the group resumes after the committed offset.
    consumer = _consumer(kafka.bootstrap, topic, group)
    await consumer.start()
    try:
        again = await asyncio.wait_for(consumer.getone(), 20)
        assert again.value == b"second"
    finally:
        await consumer.stop()


async def test_kafka_restart_keeps_topics_and_offsets(kafka):
    topic, group = unique_name("health"), unique_name("g")
    await _create_topic(kafka.bootstrap, topic)
    await _produce(kafka.bootstrap, topic, b"one", b"two")
    consumer = _consumer(kafka.bootstrap, topic, group)
    await consumer.start()
    try:
        msg = await asyncio.wait_for(consumer.getone(), 20)
        assert msg.value == b"one"
        await consumer.commit()
    finally:
        await consumer.stop()

    await asyncio.to_thread(kafka.restart)
    assert await asyncio.to_thread(kafka.is_running)

    consumer = _consumer(kafka.bootstrap, topic, group)
    await consumer.start()
    try:
        msg = await asyncio.wait_for(consumer.getone(), 30)
        assert msg.value == b"two"
    finally:
        await consumer.stop()


async def test_etcd_restart_keeps_keys_and_leases(etcd):
    """Its data dir is in the state dir: keys and leases survive a stop and start (etcd
    renews a restored lease's TTL), which tests/integration/invoker/fpc relies on."""
    prefix = unique_name("svc") + "/"

    async def call(http: aiohttp.ClientSession, path: str, body: dict) -> dict:
        async with http.post(f"{etcd.url}/v3/{path}", json=body) as r:
            assert r.status == 200, await r.text()
            return await r.json()

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        lease = (await call(http, "lease/grant", {"TTL": "60"}))["ID"]
        await call(http, "kv/put", {"key": b64(prefix + "k"), "value": b64("v"), "lease": lease})
    await asyncio.to_thread(etcd.restart)
    assert await asyncio.to_thread(etcd.is_running)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        got = await call(http, "kv/range", {"key": b64(prefix + "k")})
        assert base64.b64decode(got["kvs"][0]["value"]) == b"v"
        assert got["kvs"][0]["lease"] == lease
        assert int((await call(http, "lease/timetolive", {"ID": lease}))["TTL"]) > 0
        await call(http, "lease/revoke", {"ID": lease})


async def test_couchdb_api(couchdb):
    token = base64.b64encode(f"{couchdb.user}:{couchdb.password}".encode()).decode()
    db = unique_name("whisks")
    base = f"{couchdb.url}/{db}"
    # Always authenticate: an unauthenticated PUT /db crashes pouchdb-server once an admin
    # exists. Accept: JSON, as CouchDB clients send (pouchdb-server answers text/plain otherwise).
    headers = {"Accept": "application/json", "Authorization": f"Basic {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.put(base) as r:
            assert r.status == 201, await r.text()

        # A document id with "/" (OpenWhisk's namespace/name ids) travels as %2F.
        doc_url = yarl.URL(f"{base}/guest%2Fhello", encoded=True)
        async with http.put(doc_url, json={"exec": {"kind": "nodejs:20"}, "n": 1}) as r:
            assert r.status == 201, await r.text()
            rev = (await r.json())["rev"]
        async with http.get(doc_url) as r:
            doc = await r.json()
            assert (doc["_id"], doc["_rev"], doc["n"]) == ("guest/hello", rev, 1)

        # Writing without the current revision is a conflict.
        async with http.put(doc_url, json={"n": 2}) as r:
            assert r.status == 409
            assert (await r.json())["error"] == "conflict"

        docs = [{"_id": f"act-{i}", "kind": "activation", "duration": i} for i in range(5)]
        async with http.post(f"{base}/_bulk_docs", json={"docs": docs}) as r:
            assert r.status == 201, await r.text()
            assert all(row.get("ok") for row in await r.json())

        blob = bytes(range(256)) * 1000
        att_url = yarl.URL(f"{base}/guest%2Fhello/codefile?rev={rev}", encoded=True)
        async with http.put(
            att_url, data=blob, headers={"Content-Type": "application/octet-stream"}
        ) as r:
            assert r.status == 201, await r.text()
        async with http.get(yarl.URL(f"{base}/guest%2Fhello/codefile", encoded=True)) as r:
            assert r.status == 200
            assert await r.read() == blob

        index = {"index": {"fields": ["kind", "duration"]}, "name": "by-duration"}
        async with http.post(f"{base}/_index", json=index) as r:
            assert r.status in (200, 201), await r.text()
        query = {
            "selector": {"kind": "activation", "duration": {"$gte": 3}},
            "sort": [{"kind": "asc"}, {"duration": "asc"}],
        }
        async with http.post(f"{base}/_find", json=query) as r:
            assert r.status == 200, await r.text()
            found = [d["_id"] for d in (await r.json())["docs"]]
            assert found == ["act-3", "act-4"]

        async with http.delete(base) as r:
            assert r.status == 200


async def test_podman_docker_api(podman):
    connector = aiohttp.UnixConnector(path=str(podman.socket_path))
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.get("http://docker/_ping") as r,
    ):
        assert r.status == 200
        assert (await r.text()).strip() == "OK"

    docker = aiodocker.Docker(url=podman.docker_host)
    try:
        container = await docker.containers.create(
            {
                "Image": podman.busybox_image,
                "Cmd": ["sh", "-c", "echo hello from busybox"],
                "Labels": {podman.container_label: "test_services"},
                "HostConfig": {"Memory": 64 * 1024 * 1024},
            },
            name=unique_name("ow-test"),
        )
        try:
            await container.start()
            result = await asyncio.wait_for(container.wait(), 60)
            assert result["StatusCode"] == 0
            assert "".join(await container.log(stdout=True)).strip() == "hello from busybox"
        finally:
            await container.delete(force=True)
        listed = await docker.containers.list(
            all=True, filters=json.dumps({"label": [podman.container_label]})
        )
        assert container.id not in {c.id for c in listed}
    finally:
        await docker.close()


def test_wsk_cli_runs(wsk_cli: Path):
    proc = subprocess.run([str(wsk_cli), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "action" in proc.stdout


async def test_openwhisk_js_client_talks_http(node_modules: Path, unused_tcp_port: int):
    """The official JS client lists actions from a stub API (proves it runs from the cache)."""
    seen = []

    async def list_actions(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get("Authorization", "")))
        return web.json_response([{"name": "hello", "namespace": "guest"}])

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/actions", list_actions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", unused_tcp_port)
    await site.start()
    script = (
        "const ow = require('openwhisk')({apihost: process.argv[1], api_key: 'u:k'});"
        "ow.actions.list().then(r => console.log(JSON.stringify(r)))"
        ".catch(e => { console.error(e); process.exit(1); });"
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            "node",
            "-e",
            script,
            f"http://127.0.0.1:{unused_tcp_port}",
            env={**os.environ, "NODE_PATH": str(node_modules)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        await runner.cleanup()
    assert proc.returncode == 0, err.decode()
    assert json.loads(out)[0]["name"] == "hello"
    assert seen and seen[0][0] == "/api/v1/namespaces/_/actions"
    assert seen[0][1].startswith("Basic ")
