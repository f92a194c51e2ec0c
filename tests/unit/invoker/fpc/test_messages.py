"""The scheduler mode's Kafka messages against the shapes of openwhisk-protocol.md 1.8."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from invoker.fpc.messages import (
    ContainerCreation,
    ContainerDeletion,
    CreationAck,
    MalformedMessage,
    encode,
    error_ack_for,
    parse_container_message,
)
from whisk.protocol import QualifiedName, loads

CID = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
META = {
    "annotations": [{"key": "exec", "value": "python:3.11"}],
    "exec": {"kind": "python:3.11", "binary": False},
    "limits": {"concurrency": 1, "logs": 10, "memory": 256, "timeout": 60000},
    "name": "hello",
    "namespace": "guest",
    "parameters": [],
    "publish": False,
    "updated": 1717000000000,
    "version": "0.0.1",
}
# A creation as the scheduler writes it (every field of section 1.8).
CREATION = (
    '{"action":{"path":"guest","name":"hello","version":"0.0.1"},"creationId":"' + CID + '",'
    '"invocationNamespace":"guest","retryCount":0,"revision":"1-8c4f2d0e5a1b7c9d",'
    '"rootSchedulerIndex":{"asString":"0"},"schedulerHost":"10.0.0.5","rpcPort":13001,'
    '"transid":["K3uS0t1qQ9bVvJc2mO0fLZxX8rP4yT7a",1717000000123],'
    '"whiskActionMetaData":{"annotations":[{"key":"exec","value":"python:3.11"}],'
    '"exec":{"kind":"python:3.11","binary":false},"limits":{"concurrency":1,"logs":10,'
    '"memory":256,"timeout":60000},"name":"hello","namespace":"guest","parameters":[],'
    '"publish":false,"updated":1717000000000,"version":"0.0.1"}}'
)
DELETION = (
    '{"action":{"path":"guest","name":"hello","version":"0.0.1"},"invocationNamespace":"guest",'
    '"revision":"1-8c4f2d0e5a1b7c9d","transid":["sid_x",1717000000123],"whiskActionMetaData":'
    '{"exec":{"kind":"python:3.11","binary":false},"name":"hello","namespace":"guest"}}'
)
INVOKER = {
    "instance": 0,
    "instanceType": "invoker",
    "uniqueName": "node-a",
    "userMemory": "2147483648 B",
    "tags": [],
    "dedicatedNamespaces": [],
}


def test_a_creation_reads_every_field_and_writes_the_same_json_back():
    c = ContainerCreation.from_json(CREATION)
    assert c.action == QualifiedName("guest", "hello", "0.0.1")
    assert (c.creation_id, c.invocation_namespace, c.revision) == (
        CID,
        "guest",
        "1-8c4f2d0e5a1b7c9d",
    )
    assert (c.scheduler_host, c.rpc_port, c.retry_count) == ("10.0.0.5", 13001, 0)
    assert c.scheduler_index == {"asString": "0"} and c.kind == "python:3.11"
    assert c.metadata == META and not c.is_warm_up
    assert loads(encode(c)) == loads(CREATION)


def test_a_deletion_round_trips_and_is_told_from_a_creation_by_its_creation_id():
    d = parse_container_message(DELETION.encode())
    assert isinstance(d, ContainerDeletion)
    assert d.action.docid == "guest/hello" and d.revision == "1-8c4f2d0e5a1b7c9d"
    assert loads(encode(d)) == loads(DELETION)
    assert isinstance(parse_container_message(CREATION), ContainerCreation)


def test_the_schedulers_warm_up_creation_is_read_and_recognised():
    obj = loads(CREATION)
    obj.update(
        action={"path": "whisk.system", "name": "warmUp"},
        invocationNamespace="whisk.system",
        revision=None,  # DocRevision.empty: the warm-up action has no document
        schedulerHost="",
        rpcPort=0,
    )
    warm_up = ContainerCreation.from_json(obj)
    assert warm_up.is_warm_up and warm_up.revision is None
    assert loads(encode(warm_up))["revision"] is None


def _changed(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(loads(CREATION))
    target = obj
    for key in path[:-1]:
        target = target[key]
    if value is _DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return obj


_DROP = object()


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (("transid",), _DROP, "transid is missing"),
        (("transid",), "tid", "transid must be"),
        (("transid",), ["tid", "later"], "transid must be"),
        (("action",), "guest/hello", "action must be an object"),
        (("action", "name"), "", "action must have a non-empty path and name"),
        (("revision",), 5, "revision must be a non-empty string"),
        (("revision",), "", "revision must be a non-empty string"),
        (("revision",), _DROP, "revision is missing"),
        (("rpcPort",), "13001", "rpcPort must be a non-negative integer"),
        (("rpcPort",), True, "rpcPort must be a non-negative integer"),
        (("retryCount",), _DROP, "retryCount is missing"),
        (("rootSchedulerIndex",), {"asString": 0}, "rootSchedulerIndex.asString"),
        (
            ("whiskActionMetaData", "exec"),
            {"binary": False},
            "whiskActionMetaData.exec must be an object",
        ),
        (("whiskActionMetaData", "name"), 3, "whiskActionMetaData.name must be a string"),
        (("invocationNamespace",), "", "invocationNamespace must be a non-empty string"),
    ],
)
def test_a_malformed_creation_names_the_field_and_keeps_its_creation_id(path, value, says):
    with pytest.raises(MalformedMessage, match=re.escape(f"container creation: {says}")) as e:
        ContainerCreation.from_json(_changed(path, value))
    assert e.value.creation_id == CID
    ack = error_ack_for(e.value, INVOKER)
    assert ack is not None
    assert (ack["creationId"], ack["error"], ack["rootInvokerIndex"]) == (
        CID,
        "WhiskError",
        INVOKER,
    )
    assert says in ack["reason"]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'"creationId"', "not a JSON object"),
    ],
)
def test_what_is_not_a_json_object_is_malformed_with_no_creation_id(raw, says):
    with pytest.raises(MalformedMessage, match=says) as e:
        parse_container_message(raw)
    assert e.value.creation_id is None
    assert error_ack_for(e.value, INVOKER) is None  # nothing to answer: only a log line


@pytest.mark.parametrize("cid", ["", "0A1B2C3D4E5F60718293A4B5C6D7E8F9", "abc", 12])
def test_a_creation_id_that_is_not_32_lowercase_hex_cannot_be_answered(cid):
    with pytest.raises(MalformedMessage, match="creationId must be 32 lowercase hex") as e:
        ContainerCreation.from_json(_changed(("creationId",), cid))
    assert error_ack_for(e.value, INVOKER) is None


def test_an_ack_carries_the_creation_and_the_invoker_and_reads_back():
    creation = ContainerCreation.from_json(CREATION)
    ack = CreationAck.for_creation(creation, INVOKER)
    out = loads(encode(ack))
    assert out == {
        "action": {"path": "guest", "name": "hello", "version": "0.0.1"},
        "actionMetaData": META,
        "creationId": CID,
        "invocationNamespace": "guest",
        "retryCount": 0,
        "revision": "1-8c4f2d0e5a1b7c9d",
        "rootInvokerIndex": INVOKER,
        "schedulerHost": "10.0.0.5",
        "rpcPort": 13001,
        "transid": ["K3uS0t1qQ9bVvJc2mO0fLZxX8rP4yT7a", 1717000000123],
    }
    assert CreationAck.from_json(encode(ack)) == ack


def test_a_failed_creations_ack_has_error_and_reason():
    creation = ContainerCreation.from_json(CREATION)
    ack = CreationAck.for_creation(creation, INVOKER, "DBFetchError", "no such action")
    out = loads(encode(ack))
    assert (out["error"], out["reason"]) == ("DBFetchError", "no such action")
    assert CreationAck.from_json(out) == ack


def test_an_error_the_scheduler_cannot_read_is_refused_when_written_and_when_read():
    creation = ContainerCreation.from_json(CREATION)
    # Upstream's parser lacks ShuttingDownError and misspells NonExecutableActionError.
    for error in ("ShuttingDownError", "NonExecutableActionError", "Oops"):
        with pytest.raises(ValueError, match="cannot read the creation error"):
            CreationAck.for_creation(creation, INVOKER, error)
    ok = loads(encode(CreationAck.for_creation(creation, INVOKER)))
    with pytest.raises(MalformedMessage, match="not a ContainerCreationError"):
        CreationAck.from_json({**ok, "error": "Oops"})
    # ... and reads the names case-insensitively, as the scheduler does.
    assert CreationAck.from_json({**ok, "error": " whiskerror "}).error == "WhiskError"


def test_an_ack_without_an_invoker_instance_is_malformed():
    ok = loads(encode(CreationAck.for_creation(ContainerCreation.from_json(CREATION), INVOKER)))
    with pytest.raises(
        MalformedMessage, match=re.escape("rootInvokerIndex.instance must be an integer")
    ):
        CreationAck.from_json({**ok, "rootInvokerIndex": {"instance": "0"}})


def test_the_error_ack_for_a_creation_with_an_unread_field_is_one_the_scheduler_reads():
    with pytest.raises(MalformedMessage) as e:
        ContainerCreation.from_json(_changed(("rootSchedulerIndex",), "0"))
    ack = error_ack_for(e.value, INVOKER, "UnknownError")
    assert ack is not None
    read = CreationAck.from_json(ack)
    assert (read.creation_id, read.error, read.retry_count) == (CID, "UnknownError", 0)
    assert read.reason == "container creation: rootSchedulerIndex must be an object"
    assert read.action == QualifiedName("guest", "hello", "0.0.1") and read.metadata == META
    with pytest.raises(ValueError, match="cannot read the creation error"):
        error_ack_for(e.value, INVOKER, "ShuttingDownError")
