"""The activation client's wire: the FetchRequest's protobuf field tags and JSON strings, and
how the scheduler's answers (upstream's ActivationResponse JSON) are read. No network."""

from __future__ import annotations

import pytest

from invoker.fpc.activation_client import (
    Activation,
    ActivationClient,
    GarbageResponse,
    NoActivation,
    NoActivationKind,
    parse_fetch_response,
)
from whisk.clock import VirtualClock
from whisk.protocol import QualifiedName, dumps, loads
from whisk.protocol.controller import activation_message

ACTION = QualifiedName("guest", "hello", "0.0.1")


def client(revision: str | None = "1-abc") -> ActivationClient:
    return ActivationClient(
        "127.0.0.1",
        1,
        invocation_namespace="guest",
        action=ACTION,
        revision=revision,
        container_id="wsk0_1_guest_hello",
        clock=VirtualClock(epoch_ms_at_start=1_717_000_000_123),
    )


def varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def fields(data: bytes) -> list[tuple[int, int, bytes | int]]:
    """(field number, wire type, value) of each top-level field, decoded by hand."""
    out: list[tuple[int, int, bytes | int]] = []
    at = 0
    while at < len(data):
        tag, at = varint(data, at)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, at = varint(data, at)
            out.append((number, wire, value))
        elif wire == 2:
            size, at = varint(data, at)
            out.append((number, wire, data[at : at + size]))
            at += size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    return out


def test_a_fetch_request_has_the_schedulers_field_numbers_and_json_strings():
    data = client().fetch_request(warmed=True, last_duration_ms=300).SerializeToString()
    got = fields(data)
    assert [(n, w) for n, w, _ in got] == [
        (1, 2),
        (2, 2),
        (3, 2),
        (4, 2),
        (5, 2),
        (6, 0),
        (7, 2),
        (8, 0),
    ]
    values = {n: v for n, _, v in got}
    tid = loads(values[1])
    assert isinstance(tid[0], str) and len(tid[0]) == 32 and tid[1:] == [1_717_000_000_123]
    assert values[2] == b"guest"
    assert loads(values[3]) == {"path": "guest", "name": "hello", "version": "0.0.1"}
    assert values[4] == b'"1-abc"'  # the quoted revision
    assert values[5] == b"wsk0_1_guest_hello"
    assert values[6] == 1 and values[8] == 1
    assert fields(values[7]) == [(1, 0, 300)]  # google.protobuf.Int64Value{value = 1}


def test_a_first_fetch_has_no_last_duration_and_a_closing_one_is_not_alive():
    data = client().fetch_request(warmed=False, last_duration_ms=None, alive=False)
    numbers = [n for n, _, _ in fields(data.SerializeToString())]
    # proto3 leaves out false booleans and an unset message: no 6, 7 or 8 on the wire.
    assert numbers == [1, 2, 3, 4, 5]


def test_an_action_without_a_document_sends_a_null_revision():
    request = client(revision=None).fetch_request(warmed=False, last_duration_ms=None)
    assert request.rev == "null"  # DocRevision.empty, as upstream serializes it


def test_an_activation_answer_is_parsed_and_kept_as_received():
    msg = activation_message(ACTION, "1-abc", start_ms=1, content={"name": "World"}).to_json()
    result = parse_fetch_response(dumps({"message": msg}).decode())
    assert isinstance(result, Activation)
    assert result.raw == msg
    assert result.message.activation_id == msg["activationId"]
    assert result.message.content == {"name": "World"} and result.message.revision == "1-abc"


@pytest.mark.parametrize(
    ("answer", "kind", "detail"),
    [
        (
            '{"message":{"noActivationMessage":"no activation message exist",'
            '"type":"NoActivationMessage"}}',
            NoActivationKind.NO_ACTIVATION,
            "no activation message exist",
        ),
        (
            '{"message":{"noMemoryQueue":"no memory queue exist","type":"NoMemoryQueue"}}',
            NoActivationKind.NO_MEMORY_QUEUE,
            "no memory queue exist",
        ),
        (
            '{"message":{"actionMisMatch":"action version does not match",'
            '"type":"ActionMismatch"}}',
            NoActivationKind.ACTION_MISMATCH,
            "action version does not match",
        ),
    ],
)
def test_the_no_activation_answers_are_typed(answer, kind, detail):
    assert parse_fetch_response(answer) == NoActivation(kind, detail)


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("", "not JSON"),
        ("<html>502</html>", "not JSON"),
        ("[]", 'not {"message"'),
        ('{"type":"NoActivationMessage"}', 'not {"message"'),
        ('{"message":"hello"}', 'not {"message"'),
        ('{"message":{"type":"QueueFull"}}', "unknown answer type"),
        ('{"message":{"activationId":"x"}}', "activation message is invalid"),
    ],
)
def test_garbage_is_a_typed_error_quoting_the_answer(answer, says):
    with pytest.raises(GarbageResponse, match=says) as e:
        parse_fetch_response(answer, "10.0.0.5:13001")
    assert e.value.address == "10.0.0.5:13001"
    assert str(e.value).startswith("scheduler 10.0.0.5:13001: ")


def test_an_invalid_activation_still_says_what_could_be_read():
    msg = activation_message(ACTION, "1-abc", start_ms=1).to_json()
    msg["user"] = "nobody"
    with pytest.raises(GarbageResponse) as e:
        parse_fetch_response(dumps({"message": msg}).decode())
    assert e.value.protocol_error is not None
    assert e.value.protocol_error.partial.activation_id == msg["activationId"]
