"""The registry's logic against an in-memory etcd, in virtual time: leases that expire, an
etcd that goes out of reach, a lease revoked behind its back. The real etcd's turn is in
tests/integration/invoker/fpc/test_registry.py."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from invoker.fpc.registry import Registry
from whisk.clock import LoopClock, VirtualTimeLoop
from whisk.etcd import EtcdError
from whisk.protocol.etcd_keys import ContainerRef, InvokerId, ResourceRecord
from whisk.supervisor import Supervisor

INVOKER = InvokerId(0, "u0")
LEASE_KEY = "whisk/instance/invoker0/u0/lease"
RECORD_KEY = "whisk/invokers/0/u0"
REF = ContainerRef("guest", "guest", "hello", "1-a", "c1")
CONTAINER = "whisk/namespace/guest/guest/hello/1-a/invoker0/container/c1"
WARMED = "whisk/warmed/guest/guest/hello/1-a/invoker/0/container/c1"


class FakeEtcd:
    """Keys on leases that expire in the loop's time; ``down`` makes every call fail."""

    def __init__(self) -> None:
        self.kv: dict[str, tuple[str, int]] = {}
        self.leases: dict[int, float] = {}  # id -> expiry (loop time)
        self.ttls: dict[int, int] = {}
        self.down = False
        self.bug = False  # every call raises something other than EtcdError
        self.calls: list[str] = []
        self.writes: list[tuple[str, str]] = []  # (put or delete, key), in order
        self._ids = itertools.count(100)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _check(self, what: str) -> None:
        self.calls.append(what)
        if self.bug:
            raise RuntimeError("a bug, not an etcd error")
        if self.down:
            raise EtcdError("http://fake:2379", what, "Connect call failed")
        for lease, expiry in list(self.leases.items()):
            if expiry <= self._now():
                self.drop_lease(lease)

    def drop_lease(self, lease: int) -> None:
        """Revoke or expire it: its keys go."""
        self.leases.pop(lease, None)
        self.kv = {k: v for k, v in self.kv.items() if v[1] != lease}

    def values(self) -> dict[str, str]:
        self._check("read")
        return {k: v for k, (v, _) in self.kv.items()}

    async def put(self, key: str, value: str, lease: int = 0) -> None:
        self._check("put")
        if lease and lease not in self.leases:
            raise EtcdError("http://fake:2379", f"put {key}", "lease not found", 5)
        self.kv[key] = (value, lease)
        self.writes.append(("put", key))

    async def delete(self, key: str) -> int:
        self._check("delete")
        self.writes.append(("delete", key))
        return 1 if self.kv.pop(key, None) else 0

    async def lease_grant(self, ttl_s: int) -> int:
        self._check("grant")
        lease = next(self._ids)
        self.leases[lease], self.ttls[lease] = self._now() + ttl_s, ttl_s
        return lease

    async def lease_keepalive(self, lease: int) -> int:
        self._check("keepalive")
        if lease not in self.leases:
            return 0
        self.leases[lease] = self._now() + self.ttls[lease]
        return self.ttls[lease]

    async def lease_revoke(self, lease: int) -> bool:
        self._check("revoke")
        found = lease in self.leases
        self.drop_lease(lease)
        return found


Scenario = Callable[[Registry, FakeEtcd, dict[str, Any]], Awaitable[None]]


def run(scenario: Scenario, **kwargs: Any) -> None:
    """The scenario in virtual time, with a registry (TTL 6 s) started on a fresh fake."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop, epoch_ms_at_start=1_000_000)
        etcd, values = FakeEtcd(), {"free": 2048}
        registry = Registry(
            etcd,
            INVOKER,
            lambda: ResourceRecord(free_memory_mb=values["free"]),
            clock=clock,
            supervisor=Supervisor(clock),
            lease_ttl_s=6,
            **kwargs,
        )
        await registry.start()
        try:
            async with asyncio.timeout(600):
                await scenario(registry, etcd, values)
        finally:
            await registry.close()

    loop = VirtualTimeLoop()
    try:
        loop.run(main())
    finally:
        loop.close()


def test_registers_on_one_lease_and_close_revokes_it() -> None:
    async def scenario(registry: Registry, etcd: FakeEtcd, values: dict[str, Any]) -> None:
        state = registry.state
        assert state.status == "registered" and state.lease == 100
        assert etcd.values() == {
            LEASE_KEY: "100",
            RECORD_KEY: ResourceRecord(free_memory_mb=2048).to_json(),
        }
        assert {lease for _, lease in etcd.kv.values()} == {100}
        await registry.close()
        assert registry.state.status == "closed"
        assert etcd.values() == {} and etcd.leases == {}

    run(scenario)


def test_keeps_the_lease_alive_and_rewrites_the_record_every_second() -> None:
    async def scenario(registry: Registry, etcd: FakeEtcd, values: dict[str, Any]) -> None:
        seen = []
        await asyncio.sleep(0.5)  # between the seconds at which it writes
        for free in (1000, 900, 800):
            values["free"] = free
            await asyncio.sleep(1.0)
            seen.append(etcd.values()[RECORD_KEY])
        assert [ResourceRecord(free_memory_mb=f).to_json() for f in (1000, 900, 800)] == seen
        etcd.calls.clear()
        await asyncio.sleep(30)  # five TTLs: the lease lives on keep-alives alone
        assert registry.state.status == "registered" and 100 in etcd.leases
        assert etcd.calls.count("keepalive") == 15  # every TTL/3
        assert etcd.calls.count("put") == 30  # the record, every second

    run(scenario)


def test_container_warmed_and_removed() -> None:
    async def scenario(registry: Registry, etcd: FakeEtcd, values: dict[str, Any]) -> None:
        registry.add_container(REF)
        await registry.flushed()
        assert etcd.kv[CONTAINER] == ("", 100) and WARMED not in etcd.kv
        etcd.writes.clear()
        registry.warm(REF)
        await registry.flushed()
        assert etcd.kv[WARMED] == ("", 100) and CONTAINER not in etcd.kv
        # Never both at once: the container's key goes before its warmed key is written.
        assert [w for w in etcd.writes if w[1] != RECORD_KEY] == [
            ("delete", CONTAINER),
            ("put", WARMED),
        ]
        etcd.writes.clear()
        registry.add_container(REF)  # resumed
        await registry.flushed()
        assert CONTAINER in etcd.kv and WARMED not in etcd.kv
        assert [w for w in etcd.writes if w[1] != RECORD_KEY] == [
            ("delete", WARMED),
            ("put", CONTAINER),
        ]
        registry.remove(REF)
        await registry.flushed()
        assert set(etcd.values()) == {LEASE_KEY, RECORD_KEY}

    run(scenario)


def test_an_outage_longer_than_the_lease_is_survived_with_every_key() -> None:
    async def scenario(registry: Registry, etcd: FakeEtcd, values: dict[str, Any]) -> None:
        other = ContainerRef("guest", "guest", "other", "2-b", "c2")
        registry.add_container(REF)
        registry.add_container(other)
        await registry.flushed()
        etcd.down = True
        await asyncio.sleep(2.5)
        state = registry.state
        assert state.status == "lost" and "Connect call failed" in state.reason
        since = state.since_ms
        registry.warm(REF)  # changes while etcd is out of reach are kept
        registry.remove(other)
        values["free"] = 512
        await asyncio.sleep(20)  # the lease expires meanwhile
        assert registry.state.status == "lost" and registry.state.since_ms == since
        etcd.down = False
        await registry.flushed(timeout_s=6)  # the back-off's longest wait (5 s) and a flush
        assert 100 not in etcd.leases  # expired
        state = registry.state
        assert state.status == "registered" and state.lease == 101
        assert etcd.values() == {
            LEASE_KEY: "101",
            RECORD_KEY: ResourceRecord(free_memory_mb=512).to_json(),
            WARMED: "",
        }
        assert {lease for _, lease in etcd.kv.values()} == {101}

    run(scenario)


def test_a_short_outage_keeps_the_lease_and_writes_every_key_again() -> None:
    async def scenario(registry: Registry, etcd: FakeEtcd, values: dict[str, Any]) -> None:
        other = ContainerRef("guest", "guest", "other", "2-b", "c2")
        other_key = "whisk/namespace/guest/guest/other/2-b/invoker0/container/c2"
        registry.add_container(REF)
        registry.add_container(other)
        await registry.flushed()
        etcd.down = True
        await asyncio.sleep(2.5)
        assert registry.state.status == "lost"
        registry.warm(REF)
        del etcd.kv[other_key]  # as if etcd had lost it: it must come back
        etcd.down = False
        await registry.flushed(timeout_s=6)  # the back-off's wait (2 s here) and a flush
        assert registry.state.status == "registered" and registry.state.lease == 100
        assert set(etcd.values()) == {LEASE_KEY, RECORD_KEY, WARMED, other_key}

    run(scenario)


def test_a_lease_revoked_from_outside_is_replaced_with_every_key() -> None:
    async def scenario(registry: Registry, etcd: FakeEtcd, values: dict[str, Any]) -> None:
        registry.warm(REF)
        await registry.flushed()
        etcd.drop_lease(100)
        await asyncio.sleep(2.5)  # the next keep-alive (or record write) notices
        assert registry.state.status == "registered" and registry.state.lease == 101
        assert etcd.values() == {
            LEASE_KEY: "101",
            RECORD_KEY: ResourceRecord(free_memory_mb=2048).to_json(),
            WARMED: "",
        }

    run(scenario)


def test_a_failing_record_callable_is_logged_and_the_last_record_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario(registry: Registry, etcd: FakeEtcd, values: dict[str, Any]) -> None:
        values.pop("free")  # the callable now raises KeyError
        await asyncio.sleep(3)
        assert registry.state.status == "registered"
        assert etcd.values()[RECORD_KEY] == ResourceRecord(free_memory_mb=2048).to_json()
        values["free"] = 7
        await asyncio.sleep(1)
        assert etcd.values()[RECORD_KEY] == ResourceRecord(free_memory_mb=7).to_json()

    with caplog.at_level(logging.ERROR, logger="invoker.fpc.registry"):
        run(scenario)
    assert "resource record could not be read" in caplog.text


def test_a_loop_that_keeps_failing_is_reported_not_silent(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(registry: Registry, etcd: FakeEtcd, values: dict[str, Any]) -> None:
        etcd.bug = True
        await asyncio.sleep(1.2)  # the record's write fails: its loop is restarted
        state = registry.state
        assert state.status == "lost" and "restarting etcd-write-0" in state.reason
        await asyncio.sleep(20)  # three failures within 30 s: the supervisor gives up
        state = registry.state
        assert state.status == "lost" and "failed 3 times" in state.reason
        etcd.bug = False

    with caplog.at_level(logging.ERROR, logger="whisk.supervisor"):
        run(scenario)
    assert "a bug, not an etcd error" in caplog.text


def test_start_with_etcd_down_reports_lost_then_registers() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop, epoch_ms_at_start=5_000)
        etcd = FakeEtcd()
        etcd.down = True
        registry = Registry(etcd, INVOKER, ResourceRecord, clock=clock, lease_ttl_s=3)
        state = await registry.start()
        assert (state.status, state.since_ms, state.lease) == ("lost", 5_000, None)
        await asyncio.sleep(10)
        etcd.down = False
        await registry.flushed(timeout_s=10)
        assert registry.state.status == "registered"
        assert set(etcd.values()) == {"whisk/instance/invoker0/u0/lease", RECORD_KEY}
        await registry.close()

    loop = VirtualTimeLoop()
    try:
        loop.run(main())
    finally:
        loop.close()
