"""The production invoker's scheduling on a virtual clock, with the in-process bus, the
embedded store and the simulated container backend: order by receipt when an action fetch
is slow, and CPU-share admission of calls that mostly wait."""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from containers.simulated import SIM_CPU, SIM_DURATION, SimulatedBackend
from invoker.config import InvokerConfig
from invoker.service import Invoker
from whisk.bus.memory import MemoryBus
from whisk.clock import LoopClock, VirtualTimeLoop
from whisk.protocol import QualifiedName, dumps, loads
from whisk.protocol.controller import action_document, activation_message
from whisk.store.embedded import EmbeddedStore

CPU_MS: dict[str, int] = {}  # the last run's cpuTime annotations, by call label


class SlowStore(EmbeddedStore):
    """The embedded store, slow to return the documents named in ``slow``."""

    def __init__(self, slow: dict[str, float]) -> None:
        super().__init__(":memory:", threaded=False)
        self.slow = slow

    async def get(self, db: str, docid: str) -> dict[str, Any] | None:
        delay = self.slow.get(docid.rsplit("/", 1)[-1], 0.0)
        if delay:
            await asyncio.sleep(delay)
        return await super().get(db, docid)


async def _run(
    policy: str,
    calls: list[tuple[float, str, float, float]],
    slow: dict[str, float],
    cores: int = 1,
    cpu_sample_s: float = 0.5,
) -> dict[str, tuple[float, float]]:
    """Send (at, function, duration, cpu) calls; returns activation label -> (sent, acked)."""
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, epoch_ms_at_start=1_700_000_000_000)
    bus = MemoryBus()
    store = SlowStore(slow)
    with tempfile.TemporaryDirectory() as state:
        config = InvokerConfig(
            policy=policy,
            action_cores=tuple(range(cores)),
            state_dir=state,
            pause_grace_s=1e9,
            cpu_sample_s=cpu_sample_s,
        )
        invoker = Invoker(config, bus=bus, store=store, backend=SimulatedBackend(), clock=clock)
        await store.ensure_db(config.whisks_db)
        revisions = {}
        for fn in sorted({c[1] for c in calls}):
            doc = action_document("guest", fn, kind="python:3.11", code=b"x", logs_mb=0)
            revisions[fn] = await store.put(config.whisks_db, doc)
        await invoker.start()
        producer, acks = bus.producer(), bus.consumer("completed0", "test")
        await acks.start()
        done: dict[str, float] = {}
        cpu_ms: dict[str, int] = {}
        sent: dict[str, tuple[str, float]] = {}

        async def send() -> None:
            for i, (at, fn, duration, cpu) in enumerate(calls):
                await asyncio.sleep(max(0.0, at - loop.time()))
                msg = activation_message(
                    QualifiedName("guest", fn),
                    revisions[fn],
                    start_ms=clock.epoch_ms(),
                    content={SIM_DURATION: duration, SIM_CPU: cpu},
                )
                sent[msg.activation_id] = (f"{fn}{i}", loop.time())
                await producer.send(config.invoker_topic, dumps(msg.to_json()))

        async def collect() -> None:
            while len(done) < len(calls):
                for record in await acks.poll(100, 60.0):
                    response = loads(record.value).get("response")
                    if isinstance(response, dict):
                        done.setdefault(response["activationId"], loop.time())
                        notes = {a["key"]: a["value"] for a in response.get("annotations", [])}
                        if "cpuTime" in notes:
                            cpu_ms[response["activationId"]] = notes["cpuTime"]

        try:
            await asyncio.gather(send(), collect())
        finally:
            await invoker.stop(deadline_s=0)
            await store.close()
    CPU_MS.clear()
    CPU_MS.update({sent[aid][0]: ms for aid, ms in cpu_ms.items()})
    return {label: (t, done[aid]) for aid, (label, t) in sent.items()}


def run(policy: str, calls, slow=None, **settings) -> dict[str, tuple[float, float]]:
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(_run(policy, calls, slow or {}, **settings))
    finally:
        loop.close()


def test_fifo_runs_in_receipt_order_when_a_fetch_is_slow():
    # A long call holds the only core; "slow" is received at 1.0 but its action takes 2 s
    # to fetch, "quick" is received at 1.5 and admitted at once. FIFO runs "slow" first.
    calls = [
        (0.0, "blocker", 5.0, 5.0),
        (1.0, "slow", 1.0, 1.0),
        (1.5, "quick", 1.0, 1.0),
    ]
    acked = run("fifo", calls, slow={"slow": 2.0})
    assert acked["blocker0"][1] < acked["slow1"][1] < acked["quick2"][1]
    assert round(acked["slow1"][1], 6) == 6.0 and round(acked["quick2"][1], 6) == 7.0


def test_equal_priorities_run_in_receipt_order_when_a_fetch_is_slow():
    # Under SEPT two functions nobody has timed yet get the same priority (the node-wide
    # prior), so only the receipt number orders them: "slow" (received at 1.0, fetched at
    # 3.0) must still go before "quick" (received and admitted at 1.5). A receipt number
    # taken after the fetch would put "quick" first; FIFO's distinct times cannot show it.
    calls = [
        (0.0, "blocker", 5.0, 5.0),
        (1.0, "slow", 1.0, 1.0),
        (1.5, "quick", 1.0, 1.0),
    ]
    acked = run("sept", calls, slow={"slow": 2.0})
    assert round(acked["slow1"][1], 6) == 6.0 and round(acked["quick2"][1], 6) == 7.0


def test_waiting_calls_share_the_core_with_a_cpu_bound_one():
    # After one call each has measured the functions, a CPU-bound call and four 1 s calls
    # that only wait arrive together on one core: the waiting ones run beside it.
    warm = [(0.0, "spin", 0.5, 0.5), (0.0, "sleep", 1.0, 0.0)]
    burst = [(10.0, "spin", 0.5, 0.5)] + [(10.0, "sleep", 1.0, 0.0)] * 4
    acked = run("fc", warm + burst)
    responses = {k: round(t1 - t0, 6) for k, (t0, t1) in acked.items()}
    assert responses["spin2"] == 0.5
    assert [responses[f"sleep{i}"] for i in range(3, 7)] == [1.0] * 4


def test_a_function_that_turns_cpu_bound_is_corrected_by_its_measured_share():
    # "shifty" is learnt as a sleeper, then four CPU-bound calls of it land on the one core
    # together and share it (4 s each, 3 s of it waiting for the CPU). Their measured share
    # leaves the wait out, so it reads 1.0, not 0.25: the next two calls run one at a time.
    calls = [(0.0, "shifty", 1.0, 0.0)] + [(10.0, "shifty", 1.0, 1.0)] * 4
    calls += [(20.0, "shifty", 1.0, 1.0)] * 2
    acked = run("fc", calls)
    responses = {k: round(t1 - t0, 6) for k, (t0, t1) in acked.items()}
    assert [responses[f"shifty{i}"] for i in range(1, 5)] == [4.0] * 4
    assert sorted([responses["shifty5"], responses["shifty6"]]) == [1.0, 2.0]


def test_each_record_carries_the_calls_cpu_time():
    run("fc", [(0.0, "f", 1.0, 0.25), (0.0, "g", 0.5, 0.0)])
    assert CPU_MS == {"f0": 250, "g1": 0}


def test_a_call_that_turns_cpu_bound_closes_its_core_while_it_runs():
    # Two cores. "shifty" is learnt as a sleeper (share 0), then one call of it burns a
    # core for 30 s. Its running CPU is sampled every 0.5 s, so at 12 s "half" (share 0.5)
    # goes to the idle core (by estimate, best fit would put it beside "shifty" on core 0),
    # and a second "shifty" call at 13 s is placed as CPU-bound: it waits for core 1.
    calls = [(0.0, "shifty", 1.0, 0.0), (0.0, "half", 2.0, 1.0)]
    calls += [(10.0, "shifty", 30.0, 30.0), (12.0, "half", 2.0, 1.0), (13.0, "shifty", 5.0, 5.0)]

    def responses(**settings):
        acked = run("fc", calls, cores=2, **settings)
        return [round(acked[k][1] - acked[k][0], 6) for k in ("shifty2", "half3", "shifty4")]

    assert responses() == [30.0, 2.0, 6.0]  # nothing ran beside the CPU-bound call
    # Without sampling, both later calls go beside it on core 0 and all three are slowed.
    unsampled = responses(cpu_sample_s=0)
    assert all(r > s for r, s in zip(unsampled, [30.0, 2.0, 6.0], strict=True)), unsampled
