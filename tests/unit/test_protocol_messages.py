"""ActivationMessage parsing in every form of the spec, and the ack/ping formats."""

import pytest

from whisk.protocol import (
    InvokerInstance,
    ProtocolError,
    combined_ack,
    completion_ack,
    dumps,
    loads,
    parse_activation,
    ping_message,
    result_ack,
)

USER = {
    "subject": "guest",
    "namespace": {"name": "guest", "uuid": "23bc46b1-71f6-4ed5-8c54-816aa4f8c502"},
    "authkey": {"api_key": "23bc46b1-71f6-4ed5-8c54-816aa4f8c502:123zO3xZ"},
    "rights": ["READ", "PUT", "DELETE", "ACTIVATE"],
    "limits": {},
}
AID = "5a64676ec8aa46b5a4676ec8aaf6b5d2"


def message(**changes):
    msg = {
        "transid": ["K3uS0t1qQ9bVvJc2mO0fLZxX8rP4yT7a", 1717000000123],
        "action": {"path": "guest", "name": "hello", "version": "0.0.1"},
        "revision": "1-8c4f2d0e5a1b7c9d3e6f0a2b4c6d8e0f",
        "user": USER,
        "activationId": AID,
        "rootControllerIndex": {"asString": "0", "instanceType": "controller"},
        "blocking": True,
        "content": {"name": "World"},
        "initArgs": [],
        "lockedArgs": {},
    }
    msg.update(changes)
    return {k: v for k, v in msg.items() if v is not ...}


def test_blocking_user_invocation():
    m = parse_activation(dumps(message()))
    assert m.activation_id == AID
    assert m.controller == "0"
    assert m.blocking is True
    assert m.action.docid == "guest/hello"
    assert m.action.version == "0.0.1"
    assert m.content == {"name": "World"}
    assert m.user.namespace == "guest"
    assert m.transaction_id == "K3uS0t1qQ9bVvJc2mO0fLZxX8rP4yT7a"


def test_health_action_message_with_null_revision_and_no_content():
    raw = message(
        transid=["sid_invokerHealth", 1717000000001],
        action={"path": "whisk.system", "name": "invokerHealthTestAction0", "version": "0.0.1"},
        revision=None,
        blocking=False,
        content=...,
    )
    m = parse_activation(dumps(raw))
    assert m.revision is None
    assert m.content is None
    assert m.action.namespace == "whisk.system"
    assert m.transid == ["sid_invokerHealth", 1717000000001]


@pytest.mark.parametrize(
    "action,path,name",
    [
        ("guest/hello", "guest", "hello"),
        ("/guest/pkg/hello", "guest/pkg", "hello"),
        ({"path": "guest/pkg", "name": "hello"}, "guest/pkg", "hello"),
    ],
)
def test_action_as_object_or_string(action, path, name):
    m = parse_activation(dumps(message(action=action)))
    assert (m.action.path, m.action.name) == (path, name)
    assert m.action.package == (path.split("/", 1)[1] if "/" in path else None)


def test_content_array_init_args_locked_args_cause_binding_and_parent_transid():
    parent = ["sid_parent", 1717000000000]
    m = parse_activation(
        dumps(
            message(
                transid=["abc", 1717000000123, True, parent],
                action={"path": "guest", "name": "hello", "binding": "guest/bound"},
                content=[1, 2, 3],
                initArgs=["secret"],
                lockedArgs={"secret": "noop"},
                cause="0123456789abcdef0123456789abcdef",
                traceContext={"x": "y"},
            )
        )
    )
    assert m.content == [1, 2, 3]
    assert m.init_args == ("secret",)
    assert m.locked_args == {"secret": "noop"}
    assert m.cause == "0123456789abcdef0123456789abcdef"
    assert m.action.binding == "guest/bound"
    assert m.transid == ["abc", 1717000000123, True, parent]


def test_round_trip_through_to_json():
    m = parse_activation(dumps(message()))
    assert parse_activation(dumps(m.to_json())) == m


@pytest.mark.parametrize(
    "raw,answerable",
    [
        (b"not json", False),
        (b"[1,2]", False),
        (dumps(message(activationId=...)), False),
        (dumps(message(rootControllerIndex=...)), False),
        (dumps(message(user="nobody")), True),
        (dumps(message(action=42)), True),
        (dumps(message(action={"path": "guest", "name": "../../etc"})), True),
        (dumps(message(transid="x")), True),
        (dumps(message(content="a string")), True),
        (dumps(message(blocking="yes")), True),
        (dumps(message(revision=3)), True),
        (dumps(message(activationId="../../x")), False),
    ],
)
def test_malformed_messages_raise_with_what_could_be_read(raw, answerable):
    with pytest.raises(ProtocolError) as err:
        parse_activation(raw)
    assert err.value.partial.answerable is answerable
    if answerable:
        assert err.value.partial.activation_id == AID
        assert err.value.partial.controller == "0"


def test_partial_keeps_a_valid_transid_and_falls_back_otherwise():
    with pytest.raises(ProtocolError) as err:
        parse_activation(dumps(message(user=None)))
    assert err.value.partial.transid == ["K3uS0t1qQ9bVvJc2mO0fLZxX8rP4yT7a", 1717000000123]
    with pytest.raises(ProtocolError) as err:
        parse_activation(dumps(message(transid=[1, 2])))
    assert err.value.partial.transid == ["sid_invalid", 0]


def test_acks_and_ping_shapes_echo_transid_exactly():
    transid = ["sid_invokerHealth", 1717000000001, True, ["p", 1]]
    inst = InvokerInstance(0, 2147483648, unique_name="0", displayed_name="invoker0")
    j = inst.to_json()
    assert j == {
        "instance": 0,
        "userMemory": "2147483648 B",
        "instanceType": "invoker",
        "tags": [],
        "dedicatedNamespaces": [],
        "uniqueName": "0",
        "displayedName": "invoker0",
    }
    c = loads(dumps(completion_ack(transid, AID, False, j)))
    assert c == {"transid": transid, "activationId": AID, "isSystemError": False, "instance": j}
    assert set(result_ack(transid, AID)) == {"transid", "response"}
    assert set(combined_ack(transid, {"a": 1}, True, j)) == {
        "transid",
        "response",
        "isSystemError",
        "instance",
    }
    assert ping_message(j, False) == {"name": j, "isEnabled": False}
    assert inst.label == "invoker0/0/invoker0"
