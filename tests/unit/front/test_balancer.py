"""Invoker health and placement in the front, as pure logic (stock InvokerSupervision and
ShardingContainerPoolBalancer rules).

Several invokers behind one front: calls spread over the healthy ones, and a disabled
invoker gets no more work (in process, with the simulated backend: logic, not I/O)."""

import asyncio

from containers.simulated import SimulatedBackend
from front.balancer import PING_TIMEOUT_S, TEST_INTERVAL_S, Balancer, Health, Result
from front.identities import basic_auth
from front.server import start_front
from invoker.config import InvokerConfig
from invoker.service import Invoker
from tests.front_platform import Platform
from whisk.bus.memory import MemoryBus
from whisk.clock import SystemClock
from whisk.store.embedded import EmbeddedStore


def ping(b: Balancer, n: int, now: float, enabled: bool = True, memory: str = "2147483648 B"):
    return b.ping(
        {
            "instance": n,
            "userMemory": memory,
            "instanceType": "invoker",
            "tags": [],
            "dedicatedNamespaces": [],
        },
        enabled,
        now,
    )


def test_a_new_invoker_is_unhealthy_until_one_health_action_succeeds():
    b = Balancer()
    assert ping(b, 0, 0.0) is True  # first ping: send the health test action
    assert b.invokers[0].state is Health.UNHEALTHY and b.invokers[0].user_memory_mb == 2048
    assert ping(b, 0, 1.0) is False  # not again before the interval
    assert b.choose("guest", "guest/a", 256) is None
    b.completed(0, Result.SUCCESS, 2.0)
    assert b.invokers[0].state is Health.HEALTHY
    assert b.choose("guest", "guest/a", 256) == 0


def test_errors_timeouts_silence_and_disable():
    b = Balancer()
    ping(b, 0, 0.0)
    b.completed(0, Result.SUCCESS, 0.0)
    for _ in range(4):
        b.completed(0, Result.SYSTEM_ERROR, 1.0)
    assert b.invokers[0].state is Health.UNHEALTHY
    c = Balancer()
    ping(c, 1, 0.0)
    c.completed(1, Result.SUCCESS, 0.0)
    for _ in range(4):
        c.completed(1, Result.TIMEOUT, 1.0)
    assert c.invokers[1].state is Health.UNRESPONSIVE
    assert ping(c, 1, 1.0 + TEST_INTERVAL_S) is True  # tested again while unresponsive
    assert c.tick(2.0 + TEST_INTERVAL_S) == []  # ... once per interval
    assert c.tick(2.0 + TEST_INTERVAL_S + PING_TIMEOUT_S) == []
    assert c.invokers[1].state is Health.OFFLINE  # no ping for 10 s
    assert ping(c, 1, 100.0) is True and c.invokers[1].state is Health.UNHEALTHY
    ping(c, 1, 101.0, enabled=False)
    assert c.invokers[1].state is Health.OFFLINE


def test_home_invoker_then_the_next_with_free_memory():
    b = Balancer()
    for n in (0, 1):
        ping(b, n, 0.0, memory="512 MB")
        b.completed(n, Result.SUCCESS, 0.0)
    home = b.choose("guest", "guest/a", 256)
    assert b.choose("guest", "guest/a", 256) == home  # 512 MB: two 256 MB calls fit
    other = b.choose("guest", "guest/a", 256)
    assert other != home  # home is full: the next healthy one
    b.release(home, 256)
    assert b.choose("guest", "guest/a", 256) == home
    states = b.states()
    assert states == {"invoker0": "up", "invoker1": "up"}


NS = "/api/v1/namespaces/_"


async def test_calls_spread_over_healthy_invokers_and_skip_a_disabled_one(tmp_path):
    import aiohttp

    from front.identities import GUEST_AUTH

    bus, store, clock = MemoryBus(), EmbeddedStore(tmp_path / "db.sqlite3"), SystemClock()
    configs = [
        InvokerConfig(
            instance=n,
            state_dir=str(tmp_path / f"i{n}"),
            policy="fifo",
            action_cores=(0,),
            user_memory_mb=512,
        )
        for n in (0, 1)
    ]
    front = await start_front(
        bus=bus,
        store=store,
        clock=clock,
        host="127.0.0.1",
        port=0,
        whisks_db=configs[0].whisks_db,
        activations_db=configs[0].activations_db,
    )
    invokers = [
        Invoker(c, bus=bus, store=store, backend=SimulatedBackend(), clock=clock) for c in configs
    ]
    for inv in invokers:
        await inv.start()
    http = aiohttp.ClientSession(headers={"Authorization": basic_auth(GUEST_AUTH)})
    p = Platform(front, invokers[0], front.url, http)
    try:
        await front.controller.wait_for_invokers(2, timeout_s=30)
        code = {"exec": {"kind": "python:3.11", "code": "def main(a): return a"}}
        for i in range(12):
            assert (await p.call("PUT", f"{NS}/actions/a{i}", json=code))[0] == 200
            assert (await p.call("POST", f"{NS}/actions/a{i}?blocking=true"))[0] == 200
        ran = [inv.pool.cold_starts + inv.pool.warm_starts for inv in invokers]
        assert all(n > 0 for n in ran), ran  # both invokers got work
        await invokers[1].set_enabled(False)
        async with asyncio.timeout(10):
            while front.controller.balancer.states()["invoker1"] != "down":
                await asyncio.sleep(0.05)
        before = [inv.pool.cold_starts + inv.pool.warm_starts for inv in invokers]
        for i in range(12):
            assert (await p.call("POST", f"{NS}/actions/a{i}?blocking=true"))[0] == 200
        after = [inv.pool.cold_starts + inv.pool.warm_starts for inv in invokers]
        assert after[1] == before[1] and after[0] == before[0] + 12
    finally:
        await http.close()
        await front.stop()
        for inv in invokers:
            await inv.stop(deadline_s=2)
        await store.close()
