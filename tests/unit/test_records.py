"""Activation records as typed values (whisk/protocol/records.py): one builder per kind, each
record exactly as the stock controller writes it (key order included), immutable once built,
and read back from JSON (a result ack, the database) into the same value or a clear
ProtocolError."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from whisk.protocol.actions import Action, ActionLimits
from whisk.protocol.controller import activation_message
from whisk.protocol.errors import Partial, ProtocolError
from whisk.protocol.json import dumps
from whisk.protocol.messages import Identity, QualifiedName
from whisk.protocol.records import (
    ActivationRecord,
    ActivationResponse,
    StatusCode,
    action_record,
    activation_document,
    fallback_record,
    kaas_record,
    sequence_record,
    trigger_record,
)

ALICE = Identity("alice", "guest", "uuid-1", {"api_key": "k"})
AID = "a" * 32
PARENT = "b" * 32
ACTION = Action(
    "guest/pkg/hello",
    "1-x",
    "guest",
    "hello",
    "0.0.3",
    "python:3.11",
    ActionLimits(timeout_ms=60000, memory_mb=256, logs_mb=10, concurrency=1),
)
OK = ActivationResponse(StatusCode.SUCCESS, {"ok": True}, size=11)


def _msg(cause: str | None = None, binding: str | None = None, started_ms: int = 900):
    return activation_message(
        QualifiedName("guest/pkg", "hello", "0.0.3", binding),
        "1-x",
        start_ms=1,
        user=ALICE,
        activation_id=AID,
        cause=cause,
        transid=["tid", started_ms],
    )


def _action(**kw: Any) -> ActivationRecord:
    args: dict[str, Any] = dict(
        start_ms=1000,
        end_ms=1250,
        response=OK,
        init_time_ms=None,
        wait_time_ms=7,
        timed_out=False,
    )
    args.update(kw)
    return action_record(_msg(), ACTION, **args)


def _sequence(**kw: Any) -> ActivationRecord:
    args: dict[str, Any] = dict(
        path="guest/pkg",
        name="seq",
        version="0.0.4",
        binding=None,
        limits={"timeout": 1000, "memory": 128, "logs": 5},
        response=ActivationResponse(StatusCode.SUCCESS, {"n": 3}),
        components=["c" * 32, "d" * 32],
        duration_ms=40,
        max_memory_mb=None,
        cause=None,
        start_ms=2000,
        end_ms=2100,
        wait_time_ms=3,
    )
    args.update(kw)
    return sequence_record(ALICE, AID, **args)


# -- builders ---------------------------------------------------------------------------------


def test_an_action_record_carries_its_logs_and_its_measured_cpu_time_last():
    # The plain record, field for field: test_protocol_values.py.
    plain = _action().to_json()
    record = _action(init_time_ms=40, cpu_time_ms=12, logs=["l1", "l2"]).to_json()
    assert record["annotations"] == [
        *plain["annotations"][:4],  # limits, path, kind, timeout
        {"key": "initTime", "value": 40},
        {"key": "waitTime", "value": 7},
        {"key": "cpuTime", "value": 12},
    ]
    assert record == plain | {"logs": ["l1", "l2"], "annotations": record["annotations"]}
    assert list(record) == list(plain)
    assert _action().logs == () and _action().annotation("cpuTime") is None


def test_a_kaas_record_has_no_init_time_nor_logs_and_waited_since_the_transaction_start():
    msg = _msg(cause=PARENT, binding="guest/bound", started_ms=900)
    timed_out = ActivationResponse.error(StatusCode.DEVELOPER_ERROR, "too slow")
    record = kaas_record(
        msg, ACTION, start_ms=1000, end_ms=1500, response=timed_out, timed_out=True
    )
    assert record == action_record(
        msg,
        ACTION,
        start_ms=1000,
        end_ms=1500,
        response=timed_out,
        init_time_ms=None,
        wait_time_ms=100,
        timed_out=True,
    )
    assert [a["key"] for a in record.to_json()["annotations"]] == [
        "limits",
        "path",
        "kind",
        "timeout",
        "causedBy",
        "waitTime",
        "binding",
    ]
    assert (record.annotation("timeout"), record.cause, record.logs) == (True, PARENT, ())
    early = kaas_record(
        _msg(started_ms=1200), ACTION, start_ms=1000, end_ms=1000, response=OK, timed_out=False
    )
    assert early.annotation("waitTime") == 0  # a clock behind the controller's: never negative


def test_a_topmost_sequence_record():
    assert _sequence().to_json() == {
        "namespace": "guest",
        "name": "seq",
        "subject": "alice",
        "activationId": AID,
        "start": 2000,
        "end": 2100,
        "duration": 40,
        "response": {"statusCode": 0, "result": {"n": 3}},
        "logs": ["c" * 32, "d" * 32],
        "version": "0.0.4",
        "publish": False,
        "annotations": [
            {"key": "topmost", "value": True},
            {"key": "path", "value": "guest/pkg/seq"},
            {"key": "kind", "value": "sequence"},
            {"key": "waitTime", "value": 3},
        ],
    }


def test_a_nested_sequence_record_names_its_cause_binding_and_largest_component_memory():
    limits = {"timeout": 1000, "memory": 128, "logs": 5}
    record = _sequence(cause=PARENT, binding="guest/bound", max_memory_mb=512, limits=limits)
    out = record.to_json()
    assert out["annotations"] == [
        {"key": "topmost", "value": False},
        {"key": "path", "value": "guest/pkg/seq"},
        {"key": "kind", "value": "sequence"},
        {"key": "causedBy", "value": "sequence"},
        {"key": "waitTime", "value": 3},
        {"key": "binding", "value": "guest/bound"},
        {"key": "limits", "value": {"timeout": 1000, "memory": 512, "logs": 5}},
    ]
    assert list(out)[-1] == "cause" and out["cause"] == PARENT
    assert limits["memory"] == 128  # the sequence's own document is left as it was
    no_memory = _sequence(limits={"timeout": 1000}, max_memory_mb=64).annotation("limits")
    assert list(no_memory.items()) == [("timeout", 1000), ("memory", 64)]


def test_a_trigger_record_holds_the_payload_and_one_compact_json_line_per_rule():
    rules = [
        {"rule": "guest/r1", "action": "guest/a", "statusCode": 0, "success": True},
        {"rule": "guest/r2", "action": "guest/b", "statusCode": 1, "error": "inactive"},
    ]
    record = trigger_record(
        ALICE,
        AID,
        name="tr",
        version="0.0.2",
        payload={"fired": 1},
        rules=rules,
        start_ms=10,
        end_ms=25,
    )
    assert record.to_json() == {
        "namespace": "guest",
        "name": "tr",
        "subject": "alice",
        "activationId": AID,
        "start": 10,
        "end": 25,
        "duration": 15,
        "response": {"statusCode": 0, "result": {"fired": 1}},
        "logs": [
            '{"rule":"guest/r1","action":"guest/a","statusCode":0,"success":true}',
            '{"rule":"guest/r2","action":"guest/b","statusCode":1,"error":"inactive"}',
        ],
        "version": "0.0.2",
        "publish": False,
        "annotations": [],
    }
    assert record.logs[0] == dumps(rules[0]).decode()


def test_a_fallback_record_needs_the_activation_id():
    with pytest.raises(ValueError) as e:
        fallback_record(Partial(namespace="guest"), StatusCode.WHISK_ERROR, "?", 5)
    assert str(e.value) == "a fallback record needs the activation id"


# -- the value --------------------------------------------------------------------------------


def test_a_record_is_immutable_and_new_logs_make_a_new_record():
    record = _action()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.logs = ("x",)  # type: ignore[misc]
    with_logs = record.with_logs(iter(["a", "b"]))
    assert with_logs.logs == ("a", "b") and record.logs == ()
    assert with_logs == dataclasses.replace(record, logs=("a", "b"))
    assert with_logs.to_json()["logs"] == ["a", "b"] and record.to_json()["logs"] == []


def test_an_annotation_is_the_first_of_its_key_or_the_default():
    record = dataclasses.replace(_action(), annotations=(("k", 1), ("k", 2), ("n", None)))
    assert record.annotation("k") == 1
    assert record.annotation("n", "d") is None
    assert record.annotation("absent") is None and record.annotation("absent", 5) == 5


def test_the_stored_document_is_the_record_behind_its_id_type_and_time():
    record = _sequence(cause=PARENT)
    doc = activation_document(record, 777)
    assert list(doc) == ["_id", "entityType", "updated", *record.to_json()]
    assert (doc["_id"], doc["entityType"], doc["updated"]) == (f"guest/{AID}", "activation", 777)


# -- read back --------------------------------------------------------------------------------


def _every_kind() -> list[ActivationRecord]:
    partial = Partial(AID, namespace="guest", action_name="x", cause=PARENT)
    return [
        _action(init_time_ms=40, cpu_time_ms=12, logs=["l"]),
        kaas_record(
            _msg(PARENT, "guest/b"), ACTION, start_ms=5, end_ms=6, response=OK, timed_out=False
        ),
        fallback_record(partial, StatusCode.WHISK_ERROR, "gone", 9),
        _sequence(cause=PARENT, max_memory_mb=64),
        trigger_record(
            ALICE, AID, name="t", version="1", payload={}, rules=[{}], start_ms=1, end_ms=2
        ),
    ]


@pytest.mark.parametrize("record", _every_kind())
def test_every_kind_reads_back_to_the_same_value_and_the_same_bytes(record):
    sent = dumps(record.to_json())
    back = ActivationRecord.from_json(record.to_json())
    assert back == record and dumps(back.to_json()) == sent
    stored = ActivationRecord.from_json(activation_document(record, 1) | {"_rev": "1-a"})
    assert stored == record


def _json(**changes: Any) -> dict[str, Any]:
    out = _action().to_json() | {"cause": PARENT, "publish": True}
    for key, value in changes.items():
        if value is ...:
            del out[key]
        else:
            out[key] = value
    return out


def test_what_a_record_read_back_may_leave_out():
    record = ActivationRecord.from_json(_json(duration=..., cause=None, publish=...))
    assert (record.duration_ms, record.cause, record.publish) == (250, None, False)
    assert ActivationRecord.from_json(_json()).publish is True
    bare = ActivationRecord.from_json(_json(response={"statusCode": 2}))
    assert bare.response == ActivationResponse(StatusCode.DEVELOPER_ERROR, None, None)
    assert type(bare.response.status_code) is StatusCode
    odd = ActivationRecord.from_json(_json(annotations=[{"key": "k"}]))
    assert odd.annotations == (("k", None),)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], "activation record is not an object"),
        (_json(namespace=...), "activation record has no namespace"),
        (_json(name=None), "activation record has no name"),
        (_json(subject=1), "activation record subject must be of type str"),
        (_json(activationId=...), "activation record has no activationId"),
        (_json(start="1"), "activation record start must be of type int"),
        (_json(end=True), "activation record end must be of type int"),
        (_json(duration=1.5), "activation record duration must be of type int"),
        (_json(version=...), "activation record has no version"),
        (_json(cause=["x"]), "activation record cause must be of type str"),
        (_json(publish=0), "activation record publish must be of type bool"),
        (_json(logs=...), "activation record has no logs"),
        (_json(logs=["a", 1]), "activation record logs must be strings"),
        (_json(annotations={}), "activation record annotations must be of type list"),
        (_json(annotations=[[]]), "activation record annotations must be {key, value} objects"),
        (
            _json(annotations=[{"key": 1}]),
            "activation record annotations must be {key, value} objects",
        ),
        (_json(response=...), "activation record response is not an object"),
        (_json(response=[0]), "activation record response is not an object"),
        (_json(response={}), "activation record response has no statusCode"),
        (
            _json(response={"statusCode": False}),
            "activation record response statusCode must be of type int",
        ),
        (
            _json(response={"statusCode": 4}),
            "activation record response statusCode 4 is not one of 0-3",
        ),
        (
            _json(response={"statusCode": -1}),
            "activation record response statusCode -1 is not one of 0-3",
        ),
        (
            _json(response={"statusCode": 0, "size": "9"}),
            "activation record response size must be of type int",
        ),
    ],
)
def test_what_is_not_a_record_is_refused_naming_the_field(obj, message):
    with pytest.raises(ProtocolError) as e:
        ActivationRecord.from_json(obj)
    assert e.value.reason == message and e.value.kind == "invalid_field"
