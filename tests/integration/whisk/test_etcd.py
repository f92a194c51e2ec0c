"""The etcd client against a real etcd 3.4: keys, prefixes and leases through its JSON
gateway, a dead member skipped, and a stalled one timed out, each failure an EtcdError
that names the endpoint and the call."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.services import unique_name
from whisk.etcd import EtcdClient, EtcdError

pytestmark = pytest.mark.services


async def test_keys_prefixes_and_leases(etcd) -> None:
    prefix = unique_name("etcd") + "/"
    async with EtcdClient(etcd.hosts) as client:
        lease = await client.lease_grant(5)
        await client.put(prefix + "a", "1", lease)
        await client.put(prefix + "b/ü", "")
        await client.put(prefix[:-1] + "0", "outside the prefix")
        assert await client.get(prefix + "a") == "1"
        assert await client.get(prefix + "missing") is None
        assert await client.get_prefix(prefix) == {prefix + "a": "1", prefix + "b/ü": ""}
        assert 0 < await client.lease_keepalive(lease) <= 5
        assert 0 < await client.lease_ttl(lease) <= 5
        assert await client.lease_revoke(lease)
        assert await client.get_prefix(prefix) == {prefix + "b/ü": ""}
        assert await client.lease_keepalive(lease) == 0  # gone: no TTL
        assert await client.lease_ttl(lease) == -1
        assert not await client.lease_revoke(lease)
        with pytest.raises(EtcdError, match="lease not found") as e:
            await client.put(prefix + "c", "x", lease)
        assert e.value.not_found and e.value.endpoint == etcd.url
        assert await client.delete_prefix(prefix) == 1
        assert await client.delete(prefix[:-1] + "0") == 1


async def test_a_dead_member_is_skipped_and_named(etcd) -> None:
    async with EtcdClient(f"127.0.0.1:1,{etcd.hosts}") as client:
        key = unique_name("etcd")
        await client.put(key, "v")
        assert await client.get(key) == "v"
        assert await client.delete(key) == 1
    async with EtcdClient("127.0.0.1:1,127.0.0.1:2", timeout_s=1) as client:
        with pytest.raises(EtcdError) as e:
            await client.get("k")
    assert "http://127.0.0.1:1, http://127.0.0.1:2: get k failed" in str(e.value)
    assert e.value.code is None


async def test_a_stalled_member_times_out(etcd) -> None:
    async with EtcdClient(etcd.hosts, timeout_s=0.5) as client:
        await client.get("warm-up")
        with etcd.frozen():
            start = time.monotonic()
            with pytest.raises(EtcdError, match=r"timed out after 0\.5 s"):
                await client.get("k")
            assert time.monotonic() - start < 2
        await asyncio.sleep(0)
        assert await client.get("k") is None  # it answers again once thawed
