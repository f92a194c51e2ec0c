"""Misbehaving actions are contained; action code cannot reach the invoker's credentials;
the admin endpoints require authentication."""

from __future__ import annotations

import asyncio
import os

import aiohttp
import pytest

from front.identities import basic_auth
from harness.controller import running_invoker
from harness.processes import free_port
from invoker.admin_http import serve_admin

pytestmark = pytest.mark.services

ENV_DUMP = b"import os\ndef main(a):\n    return {'env': dict(os.environ)}\n"
HOG = b"def main(a):\n    block = bytearray(400 * 1024 * 1024)\n    return {'n': len(block)}\n"


async def test_memory_exhaustion_is_reported_and_the_container_replaced(kafka, couchdb, tmp_path):
    async with running_invoker(kafka, couchdb, tmp_path) as (invoker, stub):
        if not invoker.backend.cgroup_support.usable:
            pytest.skip(f"no memory cgroup here: {invoker.backend.cgroup_support.reason}")
        action, rev = await stub.create_action("hog", HOG, memory_mb=128)
        aid = await stub.invoke(action, rev)
        acks = await stub.wait_completion(aid)
        record = acks[0]["response"]
        assert record["response"]["statusCode"] == 2
        assert record["response"]["result"]["error"] == (
            "The action exhausted its memory and was aborted."
        )
        small, srev = await stub.create_action("small", b"def main(a):\n    return {}\n")
        aid = await stub.invoke(small, srev)
        assert (await stub.wait_completion(aid))[0]["response"]["response"]["statusCode"] == 0


async def test_actions_see_only_what_the_protocol_defines(kafka, couchdb, tmp_path, monkeypatch):
    monkeypatch.setenv("CONFIG_whisk_couchdb_password", "s3cret-db-password")
    monkeypatch.setenv("KAFKA_HOSTS", "10.0.0.1:9092")
    async with running_invoker(kafka, couchdb, tmp_path) as (_, stub):
        action, rev = await stub.create_action("env", ENV_DUMP)
        aid = await stub.invoke(action, rev)
        env = (await stub.wait_completion(aid))[0]["response"]["response"]["result"]["env"]
    assert "s3cret-db-password" not in str(env)
    assert not {"CONFIG_whisk_couchdb_password", "KAFKA_HOSTS"} & set(env)
    assert all(
        k.startswith("__OW_")
        or k
        in ("PATH", "HOME", "LANG", "TMPDIR", "TEMP", "TMP", "PWD", "LC_CTYPE", "__OW_API_HOST")
        for k in env
    ), sorted(env)
    assert env["__OW_ACTIVATION_ID"] == aid
    assert os.environ["CONFIG_whisk_couchdb_password"] == "s3cret-db-password"  # noqa: SIM112


async def test_admin_endpoints_require_auth(kafka, couchdb, tmp_path):
    async with running_invoker(kafka, couchdb, tmp_path) as (invoker, stub):
        port = free_port()
        runner = await serve_admin(invoker, "127.0.0.1", port)
        base = f"http://127.0.0.1:{port}"
        good = {"Authorization": basic_auth("invoker.user:invoker.pass")}
        bad = {"Authorization": basic_auth("invoker.user:wrong")}
        try:
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{base}/ping") as r:
                    assert (r.status, await r.text()) == (200, "pong")
                async with http.get(f"{base}/metrics") as r:
                    text = await r.text()
                    assert r.status == 200 and "invoker_queue_length" in text
                for method, path in (
                    ("POST", "/disable"),
                    ("POST", "/enable"),
                    ("GET", "/isEnabled"),
                    ("GET", "/status"),
                ):
                    for headers in ({}, bad):
                        async with http.request(method, base + path, headers=headers) as r:
                            assert r.status == 401, (method, path)
                async with http.get(f"{base}/status", headers=good) as r:
                    status = await r.json()
                    assert status["policy"] == "fifo" and status["enabled"] is True
                pings = len(stub.pings)
                async with http.post(f"{base}/disable", headers=good) as r:
                    assert await r.text() == f"{invoker.instance.label} is now disabled."
                async with http.post(f"{base}/disable", headers=good) as r:
                    assert await r.text() == f"{invoker.instance.label} is already disabled."
                async with http.get(f"{base}/isEnabled", headers=good) as r:
                    assert await r.json() == {"enabled": False}
                async with http.post(f"{base}/enable", headers=good) as r:
                    assert await r.text() == f"{invoker.instance.label} is now enabled."
            async with asyncio.timeout(10):  # the disabled ping reaches the health topic
                while not any(p["isEnabled"] is False for p in stub.pings[pings:]):
                    await asyncio.sleep(0.05)
        finally:
            await runner.cleanup()
