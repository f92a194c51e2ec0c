"""Waiting for a busy container of the action instead of starting one (invoker/warm_wait.py):
the rule, the parked calls' order, and on the production invoker on a virtual clock, that a
burst of a short function waits for its containers where a start costs more."""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections import Counter
from typing import Any

import pytest

from containers.simulated import SIM_DURATION, SimulatedBackend
from invoker.config import InvokerConfig
from invoker.service import Invoker
from invoker.simulate import SimulationSettings, simulate
from invoker.warm_wait import WarmWaits, expected_wait, worth_waiting
from invoker.workloads import TraceCall
from whisk.bus.memory import MemoryBus
from whisk.clock import LoopClock, VirtualClock, VirtualTimeLoop
from whisk.protocol import QualifiedName, dumps, loads
from whisk.protocol.controller import action_document, activation_message
from whisk.store.embedded import EmbeddedStore


def test_a_busy_container_is_expected_to_free_when_its_call_reaches_the_functions_mean():
    assert expected_wait([0.1], 0.3, ahead=0) == pytest.approx(0.2)
    # The one nearer its end serves the first call in line, the other the second.
    assert expected_wait([0.25, 0.1], 0.3, ahead=0) == pytest.approx(0.05)
    assert expected_wait([0.25, 0.1], 0.3, ahead=1) == pytest.approx(0.2)
    # Past both: each container serves another call in turn, E[p] each.
    assert expected_wait([0.25, 0.1], 0.3, ahead=2) == pytest.approx(0.35)
    # A call past its function's mean may be deep in a tail: another mean, not 0.
    assert expected_wait([0.5], 0.3, ahead=0) == pytest.approx(0.3)


def test_a_call_waits_only_for_a_container_expected_sooner_than_a_start():
    assert worth_waiting([0.1], 0.3, 0, start_cost_s=0.5)
    assert not worth_waiting([0.1], 0.3, 2, start_cost_s=0.5)  # 0.2 + 2 x 0.3 = 0.8
    assert not worth_waiting([], 0.3, 0, start_cost_s=0.5)  # nothing busy to wait for
    assert not worth_waiting([0.1], 0.0, 0, start_cost_s=0.5)  # nothing known of it
    assert not worth_waiting([0.1], 0.3, 0, start_cost_s=0.0)  # no start measured


def test_parked_calls_start_in_order_when_a_container_idles_or_their_wait_is_up():
    waits: WarmWaits[str, str] = WarmWaits()
    waits.park("f", "f1", until=1.0)
    waits.park("f", "f2", until=1.5)
    waits.park("g", "g1", until=2.0)
    assert (len(waits), waits.ahead("f"), waits.ahead("h"), waits.parked) == (3, 2, 0, 3)
    assert waits.next_until(0.0) == 1.0
    assert waits.next_until(1.0) == 2.0  # f1's is up: g1's is next (f2 is behind f1)
    started: list[str] = []

    def start(key: str, item: str) -> bool:
        started.append(item)
        return True

    idle = {"f": 1, "g": 0}

    def has_idle(key: str) -> bool:  # each start takes the idle container
        return idle[key] > 0 and bool(idle.update({key: idle[key] - 1}) or True)

    waits.serve(0.5, has_idle, start)
    assert started == ["f1"]  # one idle container of f, none of g, no wait up
    waits.serve(1.6, lambda key: False, start)
    assert started == ["f1", "f2"]  # f2's wait is up: it starts one of its own
    assert waits.next_until(1.6) == 2.0
    # No memory for g1: it stays, first in line.
    waits.serve(2.5, lambda key: False, lambda key, item: False)
    assert list(waits) == ["g1"]
    assert waits.drain() == ["g1"]
    assert len(waits) == 0 and waits.next_until(0.0) is None


def burst(calls: int) -> list[TraceCall]:
    """A 50 ms function called every 10 ms: five times what its two warm containers serve."""
    return [TraceCall(i * 0.01, "short", 0.05) for i in range(calls)]


@pytest.mark.parametrize("warm_wait", [True, False])
def test_a_burst_waits_for_warm_containers_where_a_creation_costs_the_cores(warm_wait):
    # A Docker-like start: 0.5 s, 0.3 s of it the engine's CPU on the two action cores.
    settings = SimulationSettings(cores=2, cold_start_s=0.5, create_cpu_s=0.3, warm_wait=warm_wait)
    r = simulate(burst(30), "gittins", settings)
    if warm_wait:  # most wait for the two warm containers (1.5 s of work: 0.75 s on two)
        assert r["cold_starts"] <= 6
        assert r["mean_response_s"] < 0.5
    else:  # a container per call, each taking the cores from the calls
        assert r["cold_starts"] >= 20
        assert r["mean_response_s"] > 0.6


def test_calls_that_would_get_no_cpu_yet_have_no_container_made():
    # Five 2 s calls of one function 0.1 s apart on one core: a running call of it ranks
    # above a new one (a constant length's index rises with age), so a new one would get
    # no CPU yet: it waits in the queue for the container instead of having one made
    # (0.5 s, 0.3 s of it the core's CPU, taken from the calls). With --no-warm-wait all
    # four later calls have one made.
    trace = [TraceCall(i * 0.1, "long", 2.0) for i in range(5)]

    def run(warm_wait: bool) -> dict:
        settings = SimulationSettings(
            cores=1, cold_start_s=0.5, create_cpu_s=0.3, warm_wait=warm_wait
        )
        return simulate(trace, "gittins", settings)

    held, made = run(True), run(False)
    assert held["cold_starts"] <= 1 and made["cold_starts"] == 4
    assert held["mean_response_s"] < made["mean_response_s"] - 0.5


def test_a_parked_call_starts_its_own_container_once_its_wait_is_up():
    # The function was warmed up with 50 ms calls (the simulator warms up with each
    # function's last call), so a call waits for its two containers; but two 5 s calls hold
    # both. The third call starts its own after at most the start cost (about 0.5 s), about
    # 1 s after it arrived, not after 5 s: the mean of the three is then under 4 s (about
    # (5.15 + 5.15 + 1.05) / 3 = 3.8), where waiting to the end would make it over 5 s.
    trace = [TraceCall(0.0, "f", 5.0), TraceCall(0.0, "f", 5.0), TraceCall(0.1, "f", 0.05)]
    settings = SimulationSettings(cores=2, cold_start_s=0.5, create_cpu_s=0.3)
    r = simulate(trace, "gittins", settings)
    assert r["cold_starts"] == 1
    assert r["mean_response_s"] < 4.0


@pytest.mark.parametrize(
    ("policy", "shares"),
    [("gittins", 102_400), ("gittins-aged", 102_400), ("las", 102_400), ("fc", 32)],
)
def test_a_new_container_boots_at_the_top_weight_under_an_attained_order(policy, shares, tmp_path):
    # The stock shares (1024 / (8192 / 256) = 32) beside calls at 102 400 left a Docker
    # container's boot to wait for the calls: 5-15 s a creation, against 0.3 s under fc.
    config = InvokerConfig(policy=policy, state_dir=str(tmp_path), user_memory_mb=8192)
    store = EmbeddedStore(":memory:", threaded=False)
    invoker = Invoker(
        config, bus=MemoryBus(), store=store, backend=SimulatedBackend(), clock=VirtualClock()
    )
    assert invoker.pool.cpu_shares(256) == shares


def test_a_call_parked_at_shutdown_is_handed_back_and_answered_by_the_successor(caplog):
    # Two 5 s calls hold both warm containers of f; a third waits for them, parked. The
    # invoker stops then: the parked call is handed back with the queued ones (its offset
    # uncommitted) and the next invoker of the group runs it; each call is answered once.
    caplog.set_level(logging.INFO, logger="invoker.service")
    loop = VirtualTimeLoop()
    try:
        answers = loop.run_until_complete(_stop_with_a_parked_call())
    finally:
        loop.close()
    assert "handing back 1 queued activations" in caplog.text
    assert answers["parked"] == 1 and answers["long"] == [1, 1]


async def _stop_with_a_parked_call() -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, epoch_ms_at_start=1_700_000_000_000)
    bus, store = MemoryBus(), EmbeddedStore(":memory:", threaded=False)
    acks = bus.consumer("completed0", "test")
    await acks.start()
    answered: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as state:
        config = InvokerConfig(
            policy="gittins", action_cores=(0, 1), state_dir=state, pause_grace_s=1e9
        )
        await store.ensure_db(config.whisks_db)
        doc = action_document("guest", "f", kind="python:3.11", code=b"x", logs_mb=0)
        revision = await store.put(config.whisks_db, doc)
        producer = bus.producer()

        async def send(duration: float) -> str:
            msg = activation_message(
                QualifiedName("guest", "f"),
                revision,
                start_ms=clock.epoch_ms(),
                content={SIM_DURATION: duration},
            )
            await producer.send(config.invoker_topic, dumps(msg.to_json()))
            return msg.activation_id

        async def answers_until(wanted: int) -> None:
            while sum(answered.values()) < wanted:
                for record in await acks.poll(100, 60.0):
                    response = loads(record.value).get("response")
                    if isinstance(response, dict):  # a completion, not the result ack
                        answered[response["activationId"]] += 1

        def invoker() -> Invoker:
            backend = SimulatedBackend(
                cold_start_s=0.5, create_cpu_s=0.3, engine_cores=frozenset({0, 1})
            )
            return Invoker(config, bus=bus, store=store, backend=backend, clock=clock)

        first = invoker()
        await first.start()
        await asyncio.gather(send(0.05), send(0.05))  # two containers made, a mean measured
        await answers_until(2)
        longs = [await send(5.0), await send(5.0)]
        await asyncio.sleep(0.5)  # past their function's calls: a new one would run first
        parked = await send(0.05)
        await asyncio.sleep(0.05)
        assert first.status()["warmWaits"] == {"waiting": 1, "parked": 1}
        await first.stop(deadline_s=10)  # the long calls end; the parked one is handed back
        await answers_until(4)
        assert parked not in answered
        second = invoker()
        await second.start()
        await answers_until(5)
        await asyncio.sleep(1.0)  # nothing answered twice
        await second.stop(deadline_s=0)
        await store.close()
    return {"parked": answered[parked], "long": [answered[a] for a in longs]}
