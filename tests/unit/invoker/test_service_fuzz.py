"""Whatever arrives on ``invoker<N>``, ``Invoker._receive`` neither raises nor leaves the
message unfinished: poison is counted by kind, answered when its activation id can be read,
and its offset finished (so it is committed past). In process: the embedded bus and store,
the simulated backend; the real thing against Kafka is tests/integration/invoker/test_poison.py."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from containers.simulated import SimulatedBackend
from invoker import service
from invoker.config import InvokerConfig
from invoker.service import Invoker
from tests.fuzz.seeds import activations
from whisk.bus.base import Record
from whisk.bus.memory import MemoryBus
from whisk.clock import SystemClock
from whisk.protocol import loads
from whisk.protocol.errors import KINDS
from whisk.store.embedded import EmbeddedStore

SEEDS = list(activations().values())


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """A started invoker on its own event loop, shared by the examples (start-up is slow)."""
    tmp = tmp_path_factory.mktemp("receive")
    loop = asyncio.new_event_loop()
    bus = MemoryBus()
    store = EmbeddedStore(tmp / "db.sqlite3")
    cfg = InvokerConfig(state_dir=str(tmp), policy="fifo", action_cores=(0,))
    invoker = Invoker(cfg, bus=bus, store=store, backend=SimulatedBackend(), clock=SystemClock())
    loop.run_until_complete(invoker.start())
    invoker.consumer.pause()  # records come only from the test
    yield loop, invoker, bus
    loop.run_until_complete(invoker.stop(deadline_s=2))
    loop.run_until_complete(store.close())
    loop.close()


_offsets = itertools.count(10_000_000)


def _receive(loop, invoker: Invoker, value) -> None:
    """One record through ``_receive``; returns once everything it started is done."""

    async def go() -> None:
        record = Record(invoker.config.invoker_topic, 0, next(_offsets), value)
        invoker._receive(record)  # must not raise, whatever the value
        async with asyncio.timeout(10):
            while invoker.pending:
                await asyncio.sleep(0.001)

    loop.run_until_complete(go())


def _bad_total(invoker: Invoker) -> float:
    return sum(invoker.metrics.bad_message_kinds.labels(k)._value.get() for k in KINDS)


def _mutations() -> st.SearchStrategy[bytes]:
    seeds = st.sampled_from(SEEDS)
    cut = st.tuples(seeds, st.integers(0, 5000)).map(lambda t: t[0][: t[1]])
    flip = st.tuples(seeds, st.integers(0, 5000), st.binary(min_size=1, max_size=8)).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] + len(t[2]) :]
    )
    return cut | flip | st.binary(max_size=500)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=_mutations())
def test_any_message_is_finished_and_poison_is_counted(node, raw):
    loop, invoker, _ = node
    bad = _bad_total(invoker)
    _receive(loop, invoker, raw)
    assert invoker.pending == 0
    assert not invoker.offsets._in_flight.get(0), "an offset was left unfinished"
    try:
        parsed = loads(raw)
    except ValueError:
        parsed = None
    if parsed is None or not isinstance(parsed, dict):
        assert _bad_total(invoker) == bad + 1  # unreadable: counted


@pytest.mark.parametrize("value", [None, b"", b"[]", b"\xff", "text", 42])
def test_odd_record_values(node, value):
    loop, invoker, _ = node
    bad = _bad_total(invoker)
    _receive(loop, invoker, value)
    assert _bad_total(invoker) == bad + 1 and invoker.pending == 0


@pytest.mark.parametrize("error", [RecursionError, MemoryError, OverflowError, KeyError])
def test_nothing_escapes_even_when_the_parser_fails(node, monkeypatch, error):
    # A last line of defence: should the (total) parser ever raise something else, the
    # message is still counted and finished, and the feed goes on.
    loop, invoker, _ = node

    def broken(raw):
        raise error("boom")

    monkeypatch.setattr(service, "parse_activation", broken)
    before = invoker.metrics.bad_message_kinds.labels("internal")._value.get()
    _receive(loop, invoker, SEEDS[0])
    assert invoker.metrics.bad_message_kinds.labels("internal")._value.get() == before + 1
    assert invoker.pending == 0 and not invoker.offsets._in_flight.get(0)


def test_answerable_poison_gets_a_whisk_error_ack(node):
    loop, invoker, bus = node
    raw = activations()["deep_transid"]
    acks = bus.consumer(invoker.config.completed_topic("0"), "test-acks")

    async def read() -> list[dict]:
        await acks.start()
        out: list[dict] = []
        async with asyncio.timeout(10):
            while batch := await acks.poll(10_000, 0.2):
                out += [loads(r.value) for r in batch]
        return out

    _receive(loop, invoker, raw)
    ack = loop.run_until_complete(read())[-1]  # earlier examples acked too: ours is last
    assert ack["isSystemError"] is True and ack["transid"] == ["sid_invalid", 0]
    record = ack["response"]  # blocking: the whole record for the waiting caller
    assert record["activationId"] == "5a64676ec8aa46b5a4676ec8aaf6b5d2"
    assert "invalid" in record["response"]["result"]["error"]


def test_an_offset_taken_before_is_neither_run_nor_answered_again(node):
    # A consumer that rejoins its group (the broker link down past the session timeout) is
    # sent back to the committed offset: what it gets again was taken here already.
    loop, invoker, bus = node
    acks = bus.consumer(invoker.config.completed_topic("0"), "test-again")
    record = Record(invoker.config.invoker_topic, 0, next(_offsets), activations()["deep_transid"])

    async def go() -> int:
        await acks.start()
        while await acks.poll(10_000, 0.2):  # earlier examples' acks
            pass
        assert invoker._receive(record)
        async with asyncio.timeout(10):
            while invoker.pending:
                await asyncio.sleep(0.001)
        assert not invoker._receive(record)
        assert invoker.pending == 0
        return len(await acks.poll(10_000, 0.5))

    assert loop.run_until_complete(go()) == 1
