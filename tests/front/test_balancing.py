"""Several invokers behind one front: calls spread over the healthy ones, and a disabled
invoker gets no more work (in process, with the simulated backend: logic, not I/O)."""

import asyncio

from containers.simulated import SimulatedBackend
from front.server import start_front
from invoker.config import InvokerConfig
from invoker.service import Invoker
from tests.front.platform import Platform, basic_auth
from whisk.bus.memory import MemoryBus
from whisk.clock import SystemClock
from whisk.store.embedded import EmbeddedStore

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
