"""The puller's decisions against a scripted activation client: when it fetches again, what
it tells the scheduler, when it ends and whether its container is kept."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from invoker.activation import Binding, Ran
from invoker.fpc.activation_client import (
    Activation,
    GarbageResponse,
    NoActivation,
    NoActivationKind,
    SchedulerUnreachable,
    parse_fetch_response,
)
from invoker.fpc.puller import Puller, Target
from whisk.protocol import ProtocolError, QualifiedName, dumps, parse_activation
from whisk.protocol.controller import activation_message
from whisk.protocol.json import dumps_str

ACTION = QualifiedName("guest", "hello", "0.0.1")
IDLE = NoActivation(NoActivationKind.NO_ACTIVATION)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


class Client:
    """Answers fetches from a script (a callable is called; an exception is raised); past
    its end, a fetch is held until cancelled."""

    container_id = "c1"

    def __init__(self, clock: Clock, script: list[Any], step_s: float = 1.0) -> None:
        self.clock, self.script, self.step_s = clock, list(script), step_s
        self.fetches: list[tuple[bool, int | None]] = []
        self.rescheduled: list[Activation] = []

    async def fetch(self, *, warmed: bool, last_duration_ms: int | None = None) -> Any:
        self.fetches.append((warmed, last_duration_ms))
        self.clock.t += self.step_s
        if not self.script:
            await asyncio.Event().wait()
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def reschedule(self, activation: Activation) -> bool:
        self.rescheduled.append(activation)
        return True


def activation() -> Activation:
    raw = activation_message(ACTION, "1-a", start_ms=1_717_000_000_000).to_json()
    return Activation(parse_activation(dumps(raw)), raw)


def make(
    script: list[Any], ends: Callable[[Binding], None] | None = None, **kw: Any
) -> tuple[Puller, Client, list[Any]]:
    clock = Clock()
    client = Client(clock, script)
    admitted: list[bytes] = []

    async def admit(raw: bytes, msg: Any, binding: Binding) -> None:
        admitted.append(raw)
        if ends is not None:
            asyncio.get_running_loop().call_soon(ends, binding)

    kw.setdefault("unused_s", 2.5)
    puller = Puller(
        client,  # type: ignore[arg-type]
        lease=object(),  # type: ignore[arg-type]
        target=Target("guest", "guest/hello", "1-a"),
        admit=admit,
        clock=clock,  # type: ignore[arg-type]
        backoff_s=0.001,
        **kw,
    )
    return puller, client, admitted


async def test_no_call_for_the_unused_time_ends_it_and_keeps_the_container():
    puller, client, _ = make([IDLE] * 10)
    assert await puller.pull() is True
    assert len(client.fetches) == 3  # 1, 2, 3 s: past 2.5 s unused
    assert client.fetches[0] == (False, None)


async def test_a_call_runs_bound_to_the_container_and_the_next_fetch_says_so():
    puller, client, admitted = make(
        [activation(), IDLE, IDLE, IDLE], ends=lambda b: b.end(Ran(True, 0.25))
    )
    assert await puller.pull() is True
    assert len(admitted) == 1 and puller.calls == 1
    assert client.fetches[1] == (True, 250)  # warmed, with the call's run time


async def test_every_call_that_ran_is_told_to_the_node_s_health_and_no_other():
    told: list[Ran] = []
    ends = iter([Ran(True, 0.1), Ran(True, 0.2, whisk_error=True)])
    puller, _, _ = make(
        [activation(), activation(), IDLE, IDLE, IDLE],
        ends=lambda b: b.end(next(ends)),
        on_ran=told.append,
    )
    assert await puller.pull() is True
    assert [r.whisk_error for r in told] == [False, True]


async def test_a_call_that_broke_the_container_ends_it_for_removal():
    puller, _, _ = make([activation(), IDLE], ends=lambda b: b.end(Ran(False, 0.1)))
    assert await puller.pull() is False


@pytest.mark.parametrize(
    ("kind", "keep"),
    [(NoActivationKind.ACTION_MISMATCH, False), (NoActivationKind.NO_MEMORY_QUEUE, True)],
)
async def test_the_scheduler_s_reasons_to_stop(kind, keep):
    puller, client, _ = make([NoActivation(kind)])
    assert await puller.pull() is keep
    assert len(client.fetches) == 1


async def test_a_scheduler_that_keeps_failing_is_given_up_after_the_retries():
    gone = SchedulerUnreachable("127.0.0.1:1", "unreachable")
    puller, client, _ = make([gone] * 10, retries=2)
    assert await puller.pull() is True
    assert len(client.fetches) == 3


async def test_one_failure_is_retried_and_forgotten():
    gone = SchedulerUnreachable("127.0.0.1:1", "unreachable")
    puller, client, _ = make([gone, IDLE, gone, IDLE, IDLE], retries=1, unused_s=100)
    task = asyncio.ensure_future(puller.pull())
    async with asyncio.timeout(2):
        while len(client.fetches) < 6:
            await asyncio.sleep(0.001)
    assert not task.done(), "two failures apart are not two in a row"
    puller.stop()
    assert await task is True


async def test_stop_ends_a_held_fetch_at_once_and_destroy_removes_the_container():
    puller, client, _ = make([])
    task = asyncio.ensure_future(puller.pull())
    async with asyncio.timeout(2):
        while not client.fetches:
            await asyncio.sleep(0.001)
    puller.stop(destroy=True)
    async with asyncio.timeout(1):
        assert await task is False


async def test_a_call_handed_back_unrun_is_rescheduled():
    call = activation()
    puller, client, _ = make([call], ends=lambda b: b.end(None))
    assert await puller.pull() is True
    assert client.rescheduled == [call]


async def test_an_invalid_activation_that_names_its_caller_is_answered_and_pulling_goes_on():
    valid = activation().raw
    with pytest.raises(GarbageResponse) as caught:
        parse_fetch_response(dumps_str({"message": {**valid, "revision": 5}}))
    garbage = caught.value
    assert garbage.protocol_error is not None
    answered: list[ProtocolError] = []

    async def answer_bad(error: ProtocolError) -> None:
        answered.append(error)

    puller, client, _ = make([garbage, IDLE, IDLE, IDLE], retries=0, answer_bad=answer_bad)
    assert await puller.pull() is True
    assert len(answered) == 1 and answered[0].partial.activation_id == valid["activationId"]
    assert len(client.fetches) == 3, "not counted as the scheduler failing (retries=0)"


async def test_garbage_naming_nobody_counts_as_the_scheduler_failing():
    garbage = GarbageResponse("127.0.0.1:1", "answer is not JSON")
    puller, client, _ = make([garbage, garbage], retries=1)
    assert await puller.pull() is True
    assert len(client.fetches) == 2


async def test_a_container_of_concurrency_two_has_two_calls_in_flight():
    bindings: list[Binding] = []

    def hold(binding: Binding) -> None:
        bindings.append(binding)
        if len(bindings) == 2:  # both pulled before either ends
            for b in bindings:
                b.end(Ran(True, 0.5))

    puller, client, admitted = make(
        [activation(), activation(), IDLE, IDLE, IDLE], hold, concurrency=2
    )
    assert await puller.pull() is True
    assert len(admitted) == 2 and puller.calls == 2
    assert client.fetches[:2] == [(False, None), (False, None)], "the second fetched while one ran"
    assert (True, 500) in client.fetches[2:]


async def test_an_outdated_revision_waits_for_the_calls_in_flight_before_it_goes():
    bindings: list[Binding] = []
    mismatch = NoActivation(NoActivationKind.ACTION_MISMATCH)
    puller, _, _ = make([activation(), mismatch], bindings.append, concurrency=2)
    task = asyncio.ensure_future(puller.pull())
    async with asyncio.timeout(2):
        while not bindings:
            await asyncio.sleep(0.001)
    await asyncio.sleep(0.01)
    assert not task.done(), "its container is not given up while a call runs in it"
    bindings[0].end(Ran(True, 0.1))
    assert await task is False
