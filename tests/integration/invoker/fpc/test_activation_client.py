"""The activation client against the stand-in scheduler over real gRPC on loopback: the
long poll, the no-activation answers, reschedule, closing, garbage and a scheduler that is
gone or silent."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from harness.fpc_scheduler import StandInScheduler, stand_in_scheduler
from invoker.fpc.activation_client import (
    Activation,
    ActivationClient,
    GarbageResponse,
    NoActivation,
    NoActivationKind,
    SchedulerError,
    SchedulerTimeout,
    SchedulerUnreachable,
)
from whisk.protocol import QualifiedName, dumps, parse_activation
from whisk.protocol.controller import activation_message

ACTION = QualifiedName("guest", "hello", "0.0.1")
REV = "1-8c4f2d0e5a1b7c9d"
HOLD_S = 1.0


@pytest.fixture
async def scheduler() -> AsyncIterator[StandInScheduler]:
    async with stand_in_scheduler(hold_s=HOLD_S) as s:
        s.create_queue("guest", ACTION, REV)
        yield s
        assert s.waiting("guest", ACTION, REV) == 0, "a fetch left held"


@pytest.fixture
async def clients() -> AsyncIterator[Callable[..., ActivationClient]]:
    made: list[ActivationClient] = []

    def make(port: int, container_id: str = "c1", **kw: Any) -> ActivationClient:
        kw.setdefault("revision", REV)
        kw.setdefault("action", ACTION)
        c = ActivationClient(
            "127.0.0.1", port, invocation_namespace="guest", container_id=container_id, **kw
        )
        made.append(c)
        return c

    yield make
    for c in made:
        await c.close()


def message(**kw: Any) -> dict[str, Any]:
    return activation_message(ACTION, REV, start_ms=1_717_000_000_000, **kw).to_json()


async def until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


async def test_a_held_fetch_is_answered_as_soon_as_an_activation_is_queued(scheduler, clients):
    client = clients(scheduler.port)
    started = time.monotonic()
    fetch = asyncio.ensure_future(client.fetch(warmed=True, last_duration_ms=42))
    await until(lambda: scheduler.waiting("guest", ACTION, REV) == 1)
    msg = message(content={"name": "World"})
    scheduler.enqueue("guest", ACTION, REV, msg)
    result = await fetch
    assert time.monotonic() - started < HOLD_S, "answered by the hold's end, not the enqueue"
    assert isinstance(result, Activation)
    assert result.raw == msg and result.message.activation_id == msg["activationId"]
    seen = scheduler.seen["c1"]
    assert (seen.warmed, seen.last_duration_ms, seen.alive) == (True, 42, True)
    assert seen.fqn == {"path": "guest", "name": "hello", "version": "0.0.1"}
    assert seen.revision == REV and seen.invocation_namespace == "guest"
    assert isinstance(seen.transaction_id[0], str) and isinstance(seen.transaction_id[1], int)


async def test_a_queued_activation_is_answered_at_once(scheduler, clients):
    msg = message()
    scheduler.enqueue("guest", ACTION, REV, msg)
    result = await asyncio.wait_for(clients(scheduler.port).fetch(warmed=False), HOLD_S / 2)
    assert isinstance(result, Activation) and result.raw == msg
    assert scheduler.seen["c1"].last_duration_ms is None  # a first fetch sends none


async def test_a_fetch_with_nothing_queued_ends_as_no_activation_after_the_hold(scheduler, clients):
    started = time.monotonic()
    result = await clients(scheduler.port).fetch(warmed=False)
    assert time.monotonic() - started >= HOLD_S * 0.9, "the scheduler held the call"
    assert result == NoActivation(NoActivationKind.NO_ACTIVATION, "no activation message exist")


async def test_an_action_without_a_queue_and_a_revision_gone_are_told_apart(scheduler, clients):
    other = clients(scheduler.port, "c2", action=QualifiedName("guest", "other", "0.0.1"))
    no_queue = NoActivation(NoActivationKind.NO_MEMORY_QUEUE, "no memory queue exist")
    assert await other.fetch(warmed=False) == no_queue
    old = clients(scheduler.port, "c3", revision="1-older")
    mismatch = NoActivation(NoActivationKind.ACTION_MISMATCH, "action version does not match")
    assert await old.fetch(warmed=False) == mismatch


async def test_a_rescheduled_activation_goes_back_first_and_is_fetched_again(scheduler, clients):
    first, second = message(), message()
    scheduler.enqueue("guest", ACTION, REV, first)
    scheduler.enqueue("guest", ACTION, REV, second)
    client = clients(scheduler.port)
    got = await client.fetch(warmed=False)
    assert isinstance(got, Activation) and got.raw == first
    assert await client.reschedule(got) is True
    assert scheduler.reschedules == [first]
    ids = [m["activationId"] for m in scheduler.queued("guest", ACTION, REV)]
    assert ids == [first["activationId"], second["activationId"]]
    again = await clients(scheduler.port, "c2").fetch(warmed=False)
    assert isinstance(again, Activation) and again.raw == first


async def test_rescheduling_to_a_queue_that_is_gone_says_so(scheduler, clients):
    scheduler.enqueue("guest", ACTION, REV, message())
    client = clients(scheduler.port)
    got = await client.fetch(warmed=False)
    assert isinstance(got, Activation)
    scheduler.remove_queue("guest", ACTION, REV)
    assert await client.reschedule(got) is False


async def test_closing_tells_the_scheduler_the_container_is_gone(scheduler, clients):
    client = clients(scheduler.port, "c9")
    scheduler.enqueue("guest", ACTION, REV, message())
    assert isinstance(await client.fetch(warmed=False), Activation)
    assert scheduler.alive_containers == {"c9"}
    started = time.monotonic()
    await client.close()
    assert time.monotonic() - started < HOLD_S / 2, "alive=false is answered at once"
    seen = scheduler.seen["c9"]
    assert (seen.alive, seen.fetches) == (False, 2)
    assert scheduler.alive_containers == set()
    await client.close()  # idempotent: no third fetch
    assert scheduler.seen["c9"].fetches == 2
    with pytest.raises(SchedulerError, match="closed"):
        await client.fetch(warmed=True)


async def test_a_garbage_answer_is_a_typed_error_and_a_log_line(scheduler, clients, caplog):
    caplog.set_level(logging.ERROR, logger="invoker.fpc.activation_client")
    client = clients(scheduler.port)
    scheduler.answer_garbage("<html>bad gateway</html>")
    with pytest.raises(GarbageResponse, match="not JSON: '<html>bad gateway</html>'") as e:
        await asyncio.wait_for(client.fetch(warmed=False), HOLD_S / 2)
    assert e.value.address == f"127.0.0.1:{scheduler.port}"
    [line] = [r.getMessage() for r in caplog.records]
    assert "guest/hello" in line and "c1" in line and "bad gateway" in line
    scheduler.answer_garbage('{"message":{"type":"Surprise"}}')
    with pytest.raises(GarbageResponse, match="unknown answer type"):
        await client.fetch(warmed=False)
    scheduler.enqueue("guest", ACTION, REV, message())  # and the client is still usable
    assert isinstance(await client.fetch(warmed=False), Activation)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_scheduler_that_is_not_there_is_a_quick_typed_error(clients):
    port = free_port()
    client = clients(port)
    started = time.monotonic()
    with pytest.raises(SchedulerUnreachable, match=f"scheduler 127.0.0.1:{port}: unreachable"):
        await client.fetch(warmed=False)
    assert time.monotonic() - started < 3.0
    with pytest.raises(SchedulerUnreachable):
        msg = message()
        await client.reschedule(Activation(parse_activation(dumps(msg)), msg))
    await asyncio.wait_for(client.close(), 6.0)  # logs, never raises


async def test_a_silent_scheduler_ends_the_fetch_at_the_deadline_and_loses_nothing(clients):
    async with stand_in_scheduler(hold_s=30.0) as scheduler:
        scheduler.create_queue("guest", ACTION, REV)
        client = clients(scheduler.port, fetch_deadline_s=0.5)
        started = time.monotonic()
        with pytest.raises(SchedulerTimeout, match=r"no answer within 0\.5 s"):
            await client.fetch(warmed=False)
        assert time.monotonic() - started < 2.0
        await until(lambda: scheduler.waiting("guest", ACTION, REV) == 0)
        msg = message()
        scheduler.enqueue("guest", ACTION, REV, msg)  # not handed to the abandoned call
        assert [m["activationId"] for m in scheduler.queued("guest", ACTION, REV)] == [
            msg["activationId"]
        ]
        await client.close()
