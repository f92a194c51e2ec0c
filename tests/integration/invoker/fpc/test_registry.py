"""The invoker's etcd presence against a real etcd 3.4 (scripts/services.sh): the exact keys
and record, the record each second, container keys, deregistration, and the outages it
must survive: a lease revoked from outside, etcd stopped and started again, and etcd out of
reach (a Toxiproxy cut) for longer than the lease lives.

Each test writes under a cluster prefix of its own and revokes its lease at the end."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from harness.toxiproxy import Toxiproxy
from invoker.fpc.registry import Registry
from tests.services import ETCD_PROXY_TEST_PORT, unique_name
from whisk.clock import SystemClock
from whisk.etcd import EtcdClient
from whisk.protocol.etcd_keys import ContainerRef, InvokerId, ResourceRecord

pytestmark = pytest.mark.services

TTL_S = 3  # short, so that an outage outlives the lease within seconds
REF = ContainerRef("guest", "guest/pkg", "hello", "1-abc", "c1")


def container_key(cluster: str, ref: ContainerRef = REF) -> str:
    return (
        f"{cluster}/namespace/guest/{ref.fqn}/{ref.revision}/invoker7/container/{ref.container_id}"
    )


def warmed_key(cluster: str, ref: ContainerRef = REF) -> str:
    return f"{cluster}/warmed/guest/{ref.fqn}/{ref.revision}/invoker/7/container/{ref.container_id}"


@asynccontextmanager
async def registered(
    hosts: str, values: dict[str, Any], **kwargs: Any
) -> AsyncIterator[tuple[Registry, EtcdClient, str]]:
    """A registry for invoker 7 ("u7") under a fresh cluster prefix, started, and a client
    of its own to look at etcd; the registry closed and the prefix emptied at the end."""
    cluster = unique_name("fpc")
    client = EtcdClient(hosts, timeout_s=1.0)
    registry = Registry(
        client,
        InvokerId(7, "u7"),
        lambda: ResourceRecord(free_memory_mb=values["free"], busy_memory_mb=values["busy"]),
        clock=SystemClock(),
        cluster=cluster,
        lease_ttl_s=TTL_S,
        max_backoff_s=1.0,
        **kwargs,
    )
    try:
        async with EtcdClient(hosts) as look:
            await registry.start()
            yield registry, look, cluster
            await registry.close()
            await look.delete_prefix(f"{cluster}/")
    finally:
        await registry.close()
        await client.close()


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout_s:g} s: {what}")
        await asyncio.sleep(0.1)


async def test_registration_writes_the_stock_keys_and_record(etcd) -> None:
    async with registered(etcd.hosts, {"free": 2048, "busy": 0}) as (registry, look, cluster):
        state = registry.state
        assert state.status == "registered" and state.lease is not None
        assert await look.get_prefix(f"{cluster}/") == {
            f"{cluster}/instance/invoker7/u7/lease": str(state.lease),
            f"{cluster}/invokers/7/u7": '{"status":"up","freeMemory":2048,"busyMemory":0,'
            '"inProgressMemory":0,"tags":[],"dedicatedNamespaces":[]}',
        }
        assert 0 < await look.lease_ttl(state.lease) <= TTL_S
        await asyncio.sleep(2 * TTL_S)  # kept alive past its TTL
        assert await look.get(f"{cluster}/instance/invoker7/u7/lease") == str(state.lease)


async def test_the_record_follows_the_callable_every_second(etcd) -> None:
    values = {"free": 2048, "busy": 0}
    async with registered(etcd.hosts, values) as (_, look, cluster):
        seen: list[tuple[int, int]] = []
        start = time.monotonic()
        for busy in (256, 512, 768):
            values["free"], values["busy"] = 2048 - busy, busy

            async def shows(busy: int = busy) -> bool:
                record = json.loads(await look.get(f"{cluster}/invokers/7/u7") or "{}")
                return record.get("busyMemory") == busy

            await eventually(shows, 2.0, f"the record shows busyMemory {busy}")
            record = json.loads(await look.get(f"{cluster}/invokers/7/u7") or "{}")
            seen.append((record["freeMemory"], record["busyMemory"]))
        assert seen == [(1792, 256), (1536, 512), (1280, 768)]
        assert time.monotonic() - start < 4.5  # about a second each


async def test_container_then_warmed_then_removed(etcd) -> None:
    async with registered(etcd.hosts, {"free": 2048, "busy": 0}) as (registry, look, cluster):
        lease = registry.state.lease

        async def containers() -> dict[str, str]:
            found = await look.get_prefix(f"{cluster}/namespace/")
            return found | await look.get_prefix(f"{cluster}/warmed/")

        registry.add_container(REF)
        await registry.flushed()
        assert await containers() == {container_key(cluster): ""}
        registry.warm(REF)
        await registry.flushed()
        assert await containers() == {warmed_key(cluster): ""}
        registry.remove(REF)
        await registry.flushed()
        assert await containers() == {}
        registry.add_container(REF)
        await registry.flushed()
        await look.lease_revoke(lease)  # the key was on the registry's lease
        assert container_key(cluster) not in await containers()


async def test_close_revokes_the_lease_and_every_key_goes(etcd) -> None:
    async with registered(etcd.hosts, {"free": 2048, "busy": 0}) as (registry, look, cluster):
        registry.add_container(REF)
        await registry.flushed()
        lease = registry.state.lease
        assert lease is not None and len(await look.get_prefix(f"{cluster}/")) == 3
        await registry.close()
        assert registry.state.status == "closed"
        assert await look.get_prefix(f"{cluster}/") == {}
        assert await look.lease_ttl(lease) == -1


def all_keys(cluster: str, lease: int, free: int = 2048) -> dict[str, str]:
    return {
        f"{cluster}/instance/invoker7/u7/lease": str(lease),
        f"{cluster}/invokers/7/u7": ResourceRecord(free_memory_mb=free).to_json(),
        container_key(cluster): "",
        warmed_key(cluster, REF2): "",
    }


REF2 = ContainerRef("guest", "guest", "warm", "2-def", "c2")


async def test_a_lease_revoked_from_outside_is_replaced_with_every_key(etcd) -> None:
    async with registered(etcd.hosts, {"free": 2048, "busy": 0}) as (registry, look, cluster):
        registry.add_container(REF)
        registry.warm(REF2)
        await registry.flushed()
        old = registry.state.lease
        assert old is not None and await look.lease_revoke(old)
        assert await look.get_prefix(f"{cluster}/") == {}

        async def back() -> bool:
            lease = registry.state.lease
            return lease not in (None, old) and await look.get_prefix(f"{cluster}/") == all_keys(
                cluster, lease
            )

        await eventually(back, TTL_S + 2, "a new lease with every key on it")
        assert registry.state.status == "registered"


async def test_etcd_stopped_and_started_again(etcd) -> None:
    values = {"free": 2048, "busy": 0}
    async with registered(etcd.hosts, values) as (registry, look, cluster):
        registry.add_container(REF)
        await registry.flushed()
        await asyncio.to_thread(etcd.stop)
        try:

            async def lost() -> bool:
                return registry.state.status == "lost"

            await eventually(lost, 3.0, "the registry reports the registration lost")
            assert "etcd" in registry.state.reason
            registry.warm(REF2)  # a change while etcd is down
            values["free"] = 1024
        finally:
            await asyncio.to_thread(etcd.start)
        await registry.flushed(timeout_s=10)
        lease = registry.state.lease
        assert lease is not None

        # The record is refreshed every second: a change made in the last second before
        # etcd came back is written a tick after the re-registration (CI saw it so).
        async def rewritten() -> bool:
            return await look.get_prefix(f"{cluster}/") == all_keys(cluster, lease, free=1024)

        await eventually(rewritten, 3.0, "etcd holds every key again, the record's change too")


async def test_etcd_out_of_reach_longer_than_the_lease(etcd, toxiproxy, service_slot) -> None:
    """A partition: etcd runs on and expires the lease; once the link is back, a new lease
    holds every key, changes made meanwhile included."""
    async with Toxiproxy(toxiproxy.url) as api:
        port = service_slot.port(ETCD_PROXY_TEST_PORT)
        proxy = await api.proxy("etcd", f"127.0.0.1:{port}", etcd.hosts)
        values = {"free": 2048, "busy": 0}
        try:
            async with (
                registered(proxy.listen, values) as (registry, _, cluster),
                EtcdClient(etcd.hosts) as direct,
            ):
                registry.add_container(REF)
                await registry.flushed()
                old = registry.state.lease
                assert old is not None
                async with proxy.cut():

                    async def lost() -> bool:
                        return registry.state.status == "lost"

                    await eventually(lost, 3.0, "the registry reports the registration lost")
                    since = registry.state.since_ms
                    registry.warm(REF2)
                    values["free"] = 512

                    async def expired() -> bool:
                        return await direct.lease_ttl(old) == -1

                    await eventually(expired, TTL_S + 5, "etcd expires the lease")
                    assert await direct.get_prefix(f"{cluster}/") == {}
                    assert registry.state.status == "lost"
                    assert registry.state.since_ms == since
                await registry.flushed(timeout_s=10)
                lease = registry.state.lease
                assert lease is not None and lease != old
                assert await direct.get_prefix(f"{cluster}/") == all_keys(cluster, lease, free=512)
        finally:
            await api.reset()
