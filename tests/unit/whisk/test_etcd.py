"""The etcd client's reading of the gateway's answers, against loopback stand-ins for etcd
members (the real etcd's turn: tests/integration/invoker/fpc/test_etcd.py)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from whisk.etcd import EtcdClient, EtcdError

Handler = Callable[[web.Request], web.StreamResponse | asyncio.Future[web.StreamResponse]]


@asynccontextmanager
async def member(handler: Handler) -> AsyncIterator[str]:
    """A stand-in member answering every POST with ``handler``; yields its host:port."""
    app = web.Application()
    app.router.add_post("/{path:.*}", handler)  # type: ignore[arg-type]
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_an_unready_member_is_passed_over_for_the_next() -> None:
    async def unready(request: web.Request) -> web.Response:
        return web.json_response({"error": "etcdserver: no leader", "code": 14}, status=503)

    async def ready(request: web.Request) -> web.Response:
        body = await request.json()
        assert request.path == "/v3/kv/range"
        assert base64.b64decode(body["key"]) == b"k"
        return web.json_response({"kvs": [{"key": body["key"], "value": "dg=="}]})

    async with member(unready) as a, member(ready) as b, EtcdClient(f"{a},{b}") as client:
        assert await client.get("k") == "v"
        assert client.endpoints[client._first] == f"http://{b}"  # tried first next time


async def test_etcd_errors_end_the_call_with_its_code() -> None:
    calls = []

    async def not_found(request: web.Request) -> web.Response:
        calls.append(request.path)
        if request.path == "/v3/lease/keepalive":  # a stream: the error comes in a 200
            return web.Response(text='{"error":{"grpc_code":5,"message":"lease not found"}}\n')
        return web.json_response({"error": "lease not found", "code": 5}, status=404)

    async with member(not_found) as a, member(not_found) as b, EtcdClient(f"{a},{b}") as client:
        with pytest.raises(EtcdError, match="put k failed: HTTP 404: lease not found") as e:
            await client.put("k", "v", lease=7)
        assert e.value.not_found and e.value.endpoint == f"http://{a}"
        with pytest.raises(EtcdError, match="HTTP 200: lease not found") as e:
            await client.lease_keepalive(7)
        assert e.value.code == 5
        assert not await client.lease_revoke(7)
    assert calls == ["/v3/kv/put", "/v3/lease/keepalive", "/v3/lease/revoke"]  # never b


async def test_keepalive_of_a_lease_gone_is_zero_and_garbage_is_an_error() -> None:
    async def answers(request: web.Request) -> web.Response:
        if request.path == "/v3/lease/keepalive":
            return web.Response(text='{"result":{"ID":"7"}}\n')  # no TTL: the lease is gone
        return web.Response(text="<html>a proxy's page</html>", status=200)

    async with member(answers) as a, EtcdClient(a) as client:
        assert await client.lease_keepalive(7) == 0
        with pytest.raises(EtcdError, match="not JSON"):
            await client.get("k")


async def test_a_member_that_does_not_answer_times_out() -> None:
    release = asyncio.Event()

    async def stalls(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    async with member(stalls) as a, EtcdClient(a, timeout_s=0.2) as client:
        with pytest.raises(EtcdError, match=r"get k failed: .*timed out after 0\.2 s"):
            await client.get("k")
        release.set()  # the stand-in's request ends: its clean-up does not wait on it
