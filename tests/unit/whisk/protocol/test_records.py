"""Activation records and the stored activation document (whisk/protocol/records.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.unit.whisk.protocol.test_actions import doc
from tests.unit.whisk.protocol.test_messages import message
from whisk.protocol import action_from_document, parse_activation
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


def _activation(cause: str | None = None, binding: str | None = None, started_ms: int = 900):
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
    return action_record(_activation(), ACTION, **args)


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
    # The plain record, field for field: test_{json,limits,logs,records,runtime,controller}.py.
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
    msg = _activation(cause=PARENT, binding="guest/bound", started_ms=900)
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
        _activation(started_ms=1200),
        ACTION,
        start_ms=1000,
        end_ms=1000,
        response=OK,
        timed_out=False,
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
            _activation(PARENT, "guest/b"),
            ACTION,
            start_ms=5,
            end_ms=6,
            response=OK,
            timed_out=False,
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


CODE = 'def main(args):\n    return {"greeting": "Hello " + args.get("name", "stranger")}\n'


def _msg(**changes):
    return parse_activation(dumps(message(**changes)))


def test_activation_record_and_document():
    action = action_from_document(doc({"kind": "python:3.11", "code": CODE}))
    msg = _msg(
        cause="0123456789abcdef0123456789abcdef",
        action={"path": "guest", "name": "hello", "binding": "guest/b"},
    )
    record = action_record(
        msg,
        action,
        start_ms=100,
        end_ms=350,
        response=ActivationResponse(StatusCode.SUCCESS, {"ok": 1}, 8),
        logs=["l"],
        init_time_ms=200,
        wait_time_ms=30,
        timed_out=False,
    )
    rec = record.to_json()
    assert rec["duration"] == 250 and rec["cause"] == msg.cause
    keys = [a["key"] for a in rec["annotations"]]
    assert keys == [
        "limits",
        "path",
        "kind",
        "timeout",
        "causedBy",
        "initTime",
        "waitTime",
        "binding",
    ]
    assert rec["response"] == {"statusCode": 0, "result": {"ok": 1}, "size": 8}
    d = activation_document(record, 999)
    assert d["_id"] == f"guest/{msg.activation_id}" and d["entityType"] == "activation"


def test_fallback_record():
    msg = _msg()
    rec = fallback_record(msg.partial(), StatusCode.APPLICATION_ERROR, "gone", 5).to_json()
    assert rec["start"] == rec["end"] == 5 and rec["duration"] == 0
    assert rec["response"] == {"statusCode": 1, "result": {"error": "gone"}}
    assert {"key": "kind", "value": "unknown"} in rec["annotations"]
    assert {"key": "path", "value": "guest/hello"} in rec["annotations"]


LIMITS = {"timeout": 60000, "memory": 256, "logs": 10, "concurrency": 1}


def _record(cause: str | None, binding: str | None, init_ms: int | None) -> dict:
    msg = activation_message(
        QualifiedName("guest/pkg", "hello", "0.0.3", binding),
        "1-x",
        start_ms=1,
        user=ALICE,
        activation_id="a" * 32,
        cause=cause,
    )
    action = Action("guest/pkg/hello", "1-x", "guest", "hello", "0.0.3", "python:3.11", LIMITS_OBJ)
    response = ActivationResponse(StatusCode.SUCCESS, {"ok": True}, size=11)
    return action_record(
        msg,
        action,
        start_ms=1000,
        end_ms=1250,
        response=response,
        logs=["l"],
        init_time_ms=init_ms,
        wait_time_ms=7,
        timed_out=False,
    ).to_json()


LIMITS_OBJ = ActionLimits(timeout_ms=60000, memory_mb=256, logs_mb=10, concurrency=1)


def test_an_activation_record_has_every_field_the_controller_reads():
    assert _record(None, None, None) == {
        "namespace": "guest",
        "name": "hello",
        "subject": "alice",
        "activationId": "a" * 32,
        "start": 1000,
        "end": 1250,
        "duration": 250,
        "response": {"statusCode": 0, "result": {"ok": True}, "size": 11},
        "logs": ["l"],
        "version": "0.0.3",
        "publish": False,
        "annotations": [
            {"key": "limits", "value": LIMITS},
            {"key": "path", "value": "guest/pkg/hello"},
            {"key": "kind", "value": "python:3.11"},
            {"key": "timeout", "value": False},
            {"key": "waitTime", "value": 7},
        ],
    }


def test_a_sequence_components_record_names_its_cause_init_time_and_binding():
    record = _record("b" * 32, "guest/bound", 40)
    assert record["cause"] == "b" * 32
    assert record["annotations"][4:] == [
        {"key": "causedBy", "value": "sequence"},
        {"key": "initTime", "value": 40},
        {"key": "waitTime", "value": 7},
        {"key": "binding", "value": "guest/bound"},
    ]


def test_statuses_and_responses_as_the_controller_writes_them():
    assert [c.status for c in StatusCode] == [
        "success",
        "application error",
        "action developer error",
        "whisk internal error",
    ]
    error = ActivationResponse.error(StatusCode.WHISK_ERROR, "boom")
    assert (
        error.is_system_error
        and not ActivationResponse(StatusCode.DEVELOPER_ERROR, 1).is_system_error
    )
    assert error.to_json() == {"statusCode": 3, "result": {"error": "boom"}}
    assert ActivationResponse.error(StatusCode.APPLICATION_ERROR, "x", 5).to_json() == {
        "statusCode": 1,
        "result": {"error": "x"},
        "size": 5,
    }


def test_a_fallback_record_of_a_message_that_never_ran():
    partial = Partial(
        activation_id="c" * 32,
        namespace="guest",
        subject="alice",
        action_path="guest/pkg",
        action_name="hello",
        action_version="0.0.2",
        cause="d" * 32,
    )
    assert fallback_record(partial, StatusCode.WHISK_ERROR, "gone", 99).to_json() == {
        "namespace": "guest",
        "name": "hello",
        "subject": "alice",
        "activationId": "c" * 32,
        "start": 99,
        "end": 99,
        "duration": 0,
        "response": {"statusCode": 3, "result": {"error": "gone"}},
        "logs": [],
        "version": "0.0.2",
        "publish": False,
        "annotations": [
            {"key": "path", "value": "guest/pkg/hello"},
            {"key": "kind", "value": "unknown"},
            {"key": "causedBy", "value": "sequence"},
        ],
        "cause": "d" * 32,
    }


def test_a_fallback_record_fills_in_what_the_message_did_not_say():
    bare = fallback_record(
        Partial(activation_id="e" * 32), StatusCode.WHISK_ERROR, "?", 5
    ).to_json()
    assert (bare["namespace"], bare["name"], bare["subject"], bare["version"]) == (
        "unknown",
        "unknown",
        "unknown",
        "0.0.1",
    )
    assert bare["annotations"] == [
        {"key": "path", "value": "unknown/unknown"},
        {"key": "kind", "value": "unknown"},
    ]
    assert "cause" not in bare
    only_ns = fallback_record(Partial("f" * 32, namespace="bob"), StatusCode.WHISK_ERROR, "?", 5)
    assert (only_ns.subject, only_ns.annotation("path")) == ("bob", "bob/unknown")
    both = fallback_record(
        Partial("f" * 32, namespace="bob", action_path="bob/p"), StatusCode.WHISK_ERROR, "?", 5
    )
    assert both.annotation("path") == "bob/p/unknown"


def test_the_stored_activation_document():
    record = fallback_record(Partial("f" * 32, namespace="guest"), StatusCode.WHISK_ERROR, "?", 5)
    assert activation_document(record, 123) == {
        "_id": "guest/" + "f" * 32,
        "entityType": "activation",
        "updated": 123,
        **record.to_json(),
    }
    assert list(activation_document(record, 123))[:4] == [
        "_id",
        "entityType",
        "updated",
        "namespace",
    ]
