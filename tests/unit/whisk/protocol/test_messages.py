"""ActivationMessage parsing in every form of the spec, and the ack/ping formats.

What the Kafka messages' readers and writers (whisk/protocol/messages.py) answer, exactly:
every refusal's words and kind, what a refused message still tells, each bound, each default
and every field written. test_messages.py shows the forms the spec lists; the
fuzzers check that nothing unexpected escapes; these pin the answers, so a changed value
fails a test (the mutation run, tests/mutation/run.py, uses them)."""

from __future__ import annotations

from typing import Any

import pytest

from whisk.protocol import (
    InvokerInstance,
    ProtocolError,
    combined_ack,
    completion_ack,
    dumps,
    errors,
    loads,
    messages,
    parse_activation,
    ping_message,
    result_ack,
)
from whisk.protocol.errors import Partial
from whisk.protocol.messages import (
    MAX_MESSAGE_BYTES,
    MAX_TRANSID_DEPTH,
    ActivationMessage,
    Identity,
    QualifiedName,
    parse_ack,
    parse_ping,
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


TRANSID = ["tid", 1717000000123]

ALICE = {
    "subject": "alice",
    "namespace": {"name": "ns1", "uuid": "u-1"},
    "authkey": {"api_key": "k"},
    "rights": ["READ"],
    "limits": {"memory": 1},
}


# What message() tells for an answer when not blocking.
ANSWER = Partial(
    activation_id=AID,
    controller="c.0",
    transid=TRANSID,
    namespace="ns1",
    subject="alice",
    action_path="ns1/pkg",
    action_name="act",
    action_version="0.0.2",
    blocking=False,
    cause="0123456789abcdef",
)


def full_message(**changes: Any) -> dict[str, Any]:
    """A whole ActivationMessage; a field set to ``...`` is left out."""
    msg: dict[str, Any] = {
        "transid": TRANSID,
        "action": {"path": "ns1/pkg", "name": "act", "version": "0.0.2"},
        "revision": "3-abc",
        "user": ALICE,
        "activationId": AID,
        "rootControllerIndex": {"asString": "c.0", "instanceType": "controller"},
        "blocking": True,
        "content": {"x": 1},
        "initArgs": ["a"],
        "lockedArgs": {"a": "aes"},
        "cause": "0123456789abcdef",
        "traceContext": {"t": "1"},
    }
    msg.update(changes)
    return {k: v for k, v in msg.items() if v is not ...}


def refusal(raw: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as err:
        parse_activation(raw)
    return err.value


def refused(**changes: Any) -> ProtocolError:
    return refusal(dumps(full_message(**changes)))


# -- what is read --------------------------------------------------------------------------


def test_every_field_of_a_whole_message_is_read() -> None:
    m = parse_activation(dumps(full_message()))
    assert m == ActivationMessage(
        transid=TRANSID,
        action=QualifiedName("ns1/pkg", "act", "0.0.2", None),
        revision="3-abc",
        user=Identity("alice", "ns1", "u-1", {"api_key": "k"}, ("READ",), {"memory": 1}),
        activation_id=AID,
        controller="c.0",
        blocking=True,
        content={"x": 1},
        init_args=("a",),
        locked_args={"a": "aes"},
        cause="0123456789abcdef",
        trace_context={"t": "1"},
    )
    assert m.transaction_id == "tid"
    assert m.transaction_start_ms == 1717000000123


def test_the_optional_fields_default() -> None:
    user = {"subject": "alice", "namespace": {"name": "ns1"}}
    m = parse_activation(
        dumps(
            full_message(
                user=user,
                revision=...,
                blocking=...,
                content=...,
                initArgs=...,
                lockedArgs=...,
                cause=...,
                traceContext=...,
                action={"path": "ns1", "name": "act"},
            )
        )
    )
    assert m.user == Identity("alice", "ns1", "", {}, (), {})
    assert (m.revision, m.blocking, m.content, m.cause, m.trace_context) == (
        None,
        False,
        None,
        None,
        None,
    )
    assert (m.init_args, m.locked_args) == ((), {})
    assert m.action == QualifiedName("ns1", "act", None, None)


def test_nulls_where_they_are_allowed() -> None:
    m = parse_activation(dumps(full_message(revision=None, cause=None, traceContext=None)))
    assert (m.revision, m.cause, m.trace_context) == (None, None, None)
    m = parse_activation(dumps(full_message(action={"path": "ns1", "name": "a", "version": None})))
    assert m.action.version is None


@pytest.mark.parametrize(
    ("action", "path"),
    [("ns1/act", "ns1"), ("/ns1/pkg/act/", "ns1/pkg"), ("//ns1/act", "ns1"), ("/Xns/act", "Xns")],
)
def test_an_action_given_as_a_string(action: str, path: str) -> None:
    m = parse_activation(dumps(full_message(action=action)))
    assert m.action == QualifiedName(path, "act", None, None)
    m = parse_activation(dumps(full_message(action=f"{path}/actX/")))  # only slashes are trimmed
    assert m.action == QualifiedName(path, "actX", None, None)


def test_an_action_string_with_an_empty_segment_is_refused() -> None:
    assert refused(action="ns1//act").reason == "action name or path has invalid characters"


def test_an_action_string_of_one_or_four_parts_is_refused_in_words() -> None:
    for action in ("act", "/act/", "a/b/c/d"):
        err = refused(action=action)
        assert err.reason == "action must name namespace[/package]/name"
        assert err.kind == errors.INVALID
        assert err.partial.activation_id == AID


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        (42, "action must be an object or a string"),
        (["ns1", "act"], "action must be an object or a string"),
        ({"name": "act"}, "action.path must be a string"),
        ({"path": "ns1"}, "action.name must be a string"),
        ({"path": "ns1", "name": "a", "version": 1}, "action.version must be a string"),
        ({"path": "ns1", "name": "a", "binding": 1}, "action.binding must be a string"),
        ({"path": "a/b/c", "name": "d"}, "action name or path has invalid characters"),
        ({"path": "ns1", "name": "a*b"}, "action name or path has invalid characters"),
        ({"path": "ns1", "name": ""}, "action name or path has invalid characters"),
        ({"path": "ns1", "name": "x" * 257}, "action name or path has invalid characters"),
        ({"path": "ns1", "name": ".."}, "action name or path has invalid segments"),
        ({"path": ".", "name": "a"}, "action name or path has invalid segments"),
        ({"path": "ns1/..", "name": "a"}, "action name or path has invalid segments"),
    ],
)
def test_each_bad_action_is_refused_in_its_own_words(action: Any, reason: str) -> None:
    err = refused(action=action)
    assert err.reason == reason
    assert err.kind == errors.INVALID
    assert err.partial.answerable


def test_the_characters_and_length_a_segment_may_have() -> None:
    name = "A-z_0.9@ b" + "x" * 246  # 256 characters, every allowed kind
    m = parse_activation(
        dumps(full_message(action={"path": "ns1/p", "name": name, "binding": "b"}))
    )
    assert m.action == QualifiedName("ns1/p", name, None, "b")


def test_a_qualified_name_tells_its_parts_and_writes_only_what_it_has() -> None:
    plain = QualifiedName("ns1", "act")
    assert (plain.docid, plain.namespace, plain.package) == ("ns1/act", "ns1", None)
    assert plain.to_json() == {"path": "ns1", "name": "act"}
    whole = QualifiedName("ns1/pkg", "act", "0.0.1", "ns2/bound")
    assert (whole.docid, whole.namespace, whole.package) == ("ns1/pkg/act", "ns1", "pkg")
    assert whole.to_json() == {
        "path": "ns1/pkg",
        "name": "act",
        "version": "0.0.1",
        "binding": "ns2/bound",
    }


@pytest.mark.parametrize(
    ("user", "reason"),
    [
        ("alice", "user must be an object"),
        ({"namespace": {"name": "ns1"}}, "user.subject must be a string"),
        ({"subject": "a", "namespace": "ns1"}, "user.namespace must be an object"),
        ({"subject": "a", "namespace": {}}, "user.namespace.name must be a string"),
        (
            {"subject": "a", "namespace": {"name": "n/s"}},
            "user.namespace.name has an invalid value",
        ),
        (
            {"subject": "a", "namespace": {"name": "ns1", "uuid": 7}},
            "user.namespace.uuid must be a string",
        ),
        (
            {"subject": "a", "namespace": {"name": "ns1"}, "authkey": "k"},
            "user.authkey must be an object",
        ),
        (
            {"subject": "a", "namespace": {"name": "ns1"}, "rights": "READ"},
            "user.rights must be a list of strings",
        ),
        (
            {"subject": "a", "namespace": {"name": "ns1"}, "rights": ["READ", 1]},
            "user.rights must be a list of strings",
        ),
        (
            {"subject": "a", "namespace": {"name": "ns1"}, "limits": []},
            "user.limits must be an object",
        ),
    ],
)
def test_each_bad_identity_is_refused_in_its_own_words(user: Any, reason: str) -> None:
    err = refused(user=user)
    assert err.reason == reason
    assert err.kind == errors.INVALID
    assert (err.partial.activation_id, err.partial.controller) == (AID, "c.0")


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"transid": ...}, "transid must be [id, startMillis, ...]"),
        ({"rootControllerIndex": "c.0"}, "rootControllerIndex must be an object"),
        ({"rootControllerIndex": {}}, "rootControllerIndex.asString must be a string"),
        (
            {"rootControllerIndex": {"asString": "c/0"}},
            "rootControllerIndex.asString has an invalid value",
        ),
        (
            {"rootControllerIndex": {"asString": "c" * 65}},
            "rootControllerIndex.asString has an invalid value",
        ),
        ({"activationId": 1}, "activationId must be a string"),
        ({"activationId": "a-b"}, "activationId has an invalid value"),
        ({"activationId": "a" * 65}, "activationId has an invalid value"),
        ({"activationId": ""}, "activationId has an invalid value"),
        ({"revision": 3}, "revision must be a string or null"),
        ({"blocking": 1}, "blocking must be a boolean"),
        ({"blocking": None}, "blocking must be a boolean"),
        ({"content": "x"}, "content must be an object or an array"),
        ({"content": 0}, "content must be an object or an array"),
        ({"initArgs": "a"}, "initArgs must be a list of strings"),
        ({"initArgs": ["a", 1]}, "initArgs must be a list of strings"),
        ({"lockedArgs": []}, "lockedArgs must map names to encryption schemes"),
        ({"lockedArgs": {"a": 1}}, "lockedArgs must map names to encryption schemes"),
        ({"cause": 5}, "cause must be a string"),
        ({"cause": "not-an-id"}, "cause has an invalid value"),
        ({"traceContext": "t"}, "traceContext must be an object"),
    ],
)
def test_each_bad_field_is_refused_in_its_own_words(changes: dict[str, Any], reason: str) -> None:
    err = refused(**changes)
    assert err.reason == reason
    assert err.kind == errors.INVALID
    if "transid" not in changes:
        assert err.partial.transid == TRANSID  # what could be read is kept


def test_the_longest_ids_are_accepted() -> None:
    m = parse_activation(
        dumps(full_message(activationId="a" * 64, rootControllerIndex={"asString": "c" * 64}))
    )
    assert (m.activation_id, m.controller) == ("a" * 64, "c" * 64)


# -- transaction ids -----------------------------------------------------------------------


def nested(depth: int) -> list[Any]:
    """A transid with ``depth`` levels: itself and ``depth - 1`` parents."""
    tid: list[Any] = ["t0", 0]
    for level in range(1, depth):
        tid = [f"t{level}", level, tid]
    return tid


@pytest.mark.parametrize(
    "transid",
    [
        ["t", 0],
        ["t", -5],
        ["t" * 256, 1],
        ["t", 1, True],
        ["t", 1, False, ["p", 2]],
        ["t", 1, ["p", 2]],
        ["t", 1, ["p", 2, True, ["q", 3]]],
        nested(MAX_TRANSID_DEPTH),
    ],
)
def test_a_valid_transid_is_kept_exactly(transid: list[Any]) -> None:
    assert parse_activation(dumps(full_message(transid=transid))).transid == transid


@pytest.mark.parametrize(
    "transid",
    [
        "t",
        ["t"],
        ["t", 1, True, False, True],
        ["", 1],
        ["t" * 257, 1],
        [1, 1],
        ["t", True],
        ["t", 1.5],
        ["t", "1"],
        ["t", 1, "extra"],
        ["t", 1, ["p", 2], ["q", 3]],  # two parents
        ["t", 1, ["p"]],
        nested(MAX_TRANSID_DEPTH + 1),
    ],
)
def test_an_invalid_transid_is_refused_and_answered_with_the_placeholder(transid: Any) -> None:
    err = refused(transid=transid)
    assert err.reason == "transid must be [id, startMillis, ...]"
    assert err.partial.transid == ["sid_invalid", 0]
    assert err.partial.activation_id == AID


def test_a_transid_a_thousand_levels_deep_is_refused_without_recursion() -> None:
    err = refused(transid=nested(1000))
    assert err.reason == "transid must be [id, startMillis, ...]"


# -- what a refused message still tells ----------------------------------------------------


def test_a_refused_message_tells_every_field_of_its_answer() -> None:
    err = refused(blocking="yes")
    assert err.partial == ANSWER


def test_a_refusal_after_the_fields_are_read_tells_blocking() -> None:
    assert refused(traceContext="t").partial.blocking is True


def test_what_a_refused_message_tells_leaves_out_what_is_invalid() -> None:
    err = refused(
        activationId="not/an/id",
        rootControllerIndex={"asString": "c/0"},
        user={"subject": 7, "namespace": {"name": "bad/ns"}},
        action={"path": 1, "name": 2, "version": 3},
        cause="not-an-id",
        blocking=1,
    )
    assert err.partial == Partial(transid=TRANSID)
    assert not err.partial.answerable


def test_the_namespace_told_falls_back_to_a_valid_subject() -> None:
    user = {"subject": "alice", "namespace": {"name": "bad/ns"}}
    assert refused(user=user).partial.namespace == "alice"
    user = {"subject": "al/ice", "namespace": "ns1"}
    partial = refused(user=user).partial
    assert (partial.namespace, partial.subject) == (None, "al/ice")


def test_the_action_told_from_a_string_or_an_object() -> None:
    partial = refused(action="/ns1/pkg/act/", blocking=1).partial
    assert (partial.action_path, partial.action_name, partial.action_version) == (
        "ns1/pkg",
        "act",
        None,
    )
    for action in ("act", "/act/"):
        partial = refused(action=action).partial
        assert (partial.action_path, partial.action_name) == (None, None)
    for action, path, name in (("Xns/pkg/actX/", "Xns/pkg", "actX"), ("X/X", "X", "X")):
        partial = refused(action=action, blocking=1).partial
        assert (partial.action_path, partial.action_name) == (path, name)
    partial = refused(user=None, rootControllerIndex=[]).partial
    assert (partial.controller, partial.namespace, partial.subject) == (None, None, None)


def test_an_unreadable_message_still_tells_who_to_answer() -> None:
    raw = dumps(full_message())[:-1]  # cut short: not JSON any more
    err = refusal(raw)
    assert err.reason.startswith("message is not valid JSON: ")
    assert err.kind == errors.NOT_JSON
    assert (err.partial.activation_id, err.partial.controller) == (AID, "c.0")
    assert err.partial.transid == TRANSID


def test_the_kind_of_an_unreadable_message_is_what_broke_it() -> None:
    assert refusal(b'{"a": "\xff"}').kind == errors.NOT_UTF8
    assert refusal(b"[" * 100_000).kind == errors.TOO_DEEP


# -- the message as a whole ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "message is empty"),
        ("", "message is empty"),
        (None, "message is a NoneType, not bytes"),
        (17, "message is a int, not bytes"),
    ],
)
def test_nothing_to_read_is_refused_as_empty(raw: Any, reason: str) -> None:
    err = refusal(raw)
    assert (err.reason, err.kind, err.partial) == (reason, errors.EMPTY, Partial())


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"[1]", "message is a JSON array, not an object"),
        (b'"s"', "message is a JSON string, not an object"),
        (b"true", "message is a JSON boolean, not an object"),
        (b"3", "message is a JSON number, not an object"),
        (b"3.5", "message is a JSON number, not an object"),
        (b"null", "message is a JSON null, not an object"),
    ],
)
def test_json_that_is_not_an_object_is_named(raw: bytes, reason: str) -> None:
    err = refusal(raw)
    assert (err.reason, err.kind, err.partial) == (reason, errors.NOT_OBJECT, Partial())


def padded(size: int, **changes: Any) -> bytes:
    """A valid message padded with spaces to exactly ``size`` bytes."""
    raw = dumps(full_message(**changes))
    return raw + b" " * (size - len(raw))


def test_the_largest_message_is_read_and_a_byte_more_is_refused_but_answered() -> None:
    assert parse_activation(padded(MAX_MESSAGE_BYTES)).activation_id == AID
    err = refusal(padded(MAX_MESSAGE_BYTES + 1))
    assert err.reason == f"message of {MAX_MESSAGE_BYTES + 1} bytes exceeds 1054644 bytes"
    assert err.kind == errors.TOO_LARGE
    assert (err.partial.activation_id, err.partial.controller) == (AID, "c.0")
    assert MAX_MESSAGE_BYTES == 1_054_644


def test_any_other_failure_is_an_internal_refusal_that_still_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(raw: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(messages, "loads", broken)
    err = refusal(dumps(full_message()))
    assert err.reason == "message could not be read (MemoryError)"
    assert err.kind == errors.INTERNAL
    assert (err.partial.activation_id, err.partial.controller) == (AID, "c.0")


def test_what_cannot_be_salvaged_is_an_empty_partial(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(raw: Any, keep: int = 0) -> Any:
        raise RecursionError

    monkeypatch.setattr(messages, "shallow_object", broken)
    err = refusal(b"{")
    assert err.partial == Partial()
    assert err.kind == errors.NOT_JSON


# -- what is written -----------------------------------------------------------------------


def test_a_message_writes_the_controllers_wire_form_and_reads_back_the_same() -> None:
    m = parse_activation(dumps(full_message()))
    assert m.to_json() == {
        **full_message(),
        "user": {**ALICE, "rights": ["READ"]},
    }
    assert parse_activation(dumps(m.to_json())) == m


def test_a_message_writes_the_optional_fields_only_when_it_has_them() -> None:
    m = parse_activation(
        dumps(full_message(content=..., cause=..., traceContext=..., user={**ALICE, "rights": []}))
    )
    out = m.to_json()
    assert set(out) == {
        "transid",
        "action",
        "revision",
        "user",
        "activationId",
        "rootControllerIndex",
        "blocking",
        "initArgs",
        "lockedArgs",
    }
    assert out["initArgs"] == ["a"]
    assert out["user"]["rights"] == []


def test_the_partial_of_a_message_is_every_field_of_its_answer() -> None:
    m = parse_activation(dumps(full_message(blocking=False)))
    assert m.partial() == ANSWER


def test_an_invoker_instance_writes_its_memory_and_names() -> None:
    bare = InvokerInstance(3, 1024)
    assert bare.to_json() == {
        "instance": 3,
        "userMemory": "1024 B",
        "instanceType": "invoker",
        "tags": [],
        "dedicatedNamespaces": [],
    }
    assert bare.label == "invoker3"
    whole = InvokerInstance(1, 2048, "u", "d", ("gpu",), ("ns1",))
    assert whole.to_json(busy_memory_bytes=512) == {
        "instance": 1,
        "userMemory": "2048 B",
        "instanceType": "invoker",
        "tags": ["gpu"],
        "dedicatedNamespaces": ["ns1"],
        "busyMemory": "512 B",
        "uniqueName": "u",
        "displayedName": "d",
    }
    assert bare.to_json(busy_memory_bytes=0)["busyMemory"] == "0 B"
    assert InvokerInstance(2, 1, None, "d").label == "invoker2/d"
    assert InvokerInstance(2, 1, "", "d").label == "invoker2/d"


def test_the_acks_and_the_ping_written() -> None:
    inst = {"instance": 0}
    assert result_ack(TRANSID, AID) == {"transid": TRANSID, "response": AID}
    assert completion_ack(TRANSID, AID, True, inst) == {
        "transid": TRANSID,
        "activationId": AID,
        "isSystemError": True,
        "instance": inst,
    }
    assert combined_ack(TRANSID, {"r": 1}, False, inst) == {
        "transid": TRANSID,
        "response": {"r": 1},
        "isSystemError": False,
        "instance": inst,
    }
    assert ping_message(inst) == {"name": inst, "isEnabled": True}


# -- acks ----------------------------------------------------------------------------------


def ack(**fields: Any) -> bytes:
    return dumps(fields)


def test_each_kind_of_ack_is_read() -> None:
    record = {"activationId": AID, "response": {"statusCode": 0}}
    assert parse_ack(ack(transid=TRANSID, response=record)) == messages.Ack(
        AID, TRANSID, True, record, None, False
    )
    assert parse_ack(ack(response=AID, instance={"instance": 4})) == messages.Ack(
        AID, None, True, None, 4, False
    )
    assert parse_ack(
        ack(activationId=AID, instance={"instance": 2**31 - 1}, isSystemError=True)
    ) == messages.Ack(AID, None, False, None, 2**31 - 1, True)
    assert parse_ack(ack(activationId=AID, instance={"instance": 0})).instance == 0


def test_the_id_of_an_ack_with_a_record_falls_back_to_its_own() -> None:
    got = parse_ack(ack(activationId=AID, response={"r": 1}))
    assert (got.activation_id, got.record, got.has_response) == (AID, {"r": 1}, True)


@pytest.mark.parametrize(
    ("raw", "reason", "kind"),
    [
        (b"", "ack is empty", errors.EMPTY),
        (None, "ack is empty", errors.EMPTY),
        (b"{", None, errors.NOT_JSON),
        (b"[]", "ack is a JSON array", errors.NOT_OBJECT),
        (ack(response=5), "ack response must be a record or an activation id", errors.INVALID),
        (ack(instance={"instance": 0}), "ack has no valid activationId", errors.INVALID),
        (ack(response="a-b"), "ack has no valid activationId", errors.INVALID),
        (ack(response={"activationId": 1}), "ack has no valid activationId", errors.INVALID),
        (ack(activationId=AID), "ack has neither a response nor an instance", errors.INVALID),
        (
            ack(activationId=AID, instance=0),
            "ack instance must be an InvokerInstanceId",
            errors.INVALID,
        ),
        (
            ack(activationId=AID, instance={"instance": True}),
            "ack instance must be an InvokerInstanceId",
            errors.INVALID,
        ),
        (
            ack(activationId=AID, instance={"instance": -1}),
            "ack instance must be an InvokerInstanceId",
            errors.INVALID,
        ),
        (
            ack(activationId=AID, instance={"instance": 2**31}),
            "ack instance must be an InvokerInstanceId",
            errors.INVALID,
        ),
        (
            ack(activationId=AID, instance={"instance": "1"}),
            "ack instance must be an InvokerInstanceId",
            errors.INVALID,
        ),
        (
            ack(response=AID, isSystemError="no"),
            "ack isSystemError must be a boolean",
            errors.INVALID,
        ),
    ],
)
def test_each_bad_ack_is_refused_in_its_own_words(raw: Any, reason: str | None, kind: str) -> None:
    with pytest.raises(ProtocolError) as err:
        parse_ack(raw)
    if reason is None:
        assert err.value.reason.startswith("ack is not valid JSON: ")
    else:
        assert err.value.reason == reason
    assert err.value.kind == kind


def test_the_largest_ack_is_read_and_a_byte_more_is_refused() -> None:
    raw = ack(response=AID)
    assert parse_ack(raw + b" " * (MAX_MESSAGE_BYTES - len(raw))).activation_id == AID
    with pytest.raises(ProtocolError) as err:
        parse_ack(raw + b" " * (MAX_MESSAGE_BYTES + 1 - len(raw)))
    assert err.value.reason == f"ack of {MAX_MESSAGE_BYTES + 1} bytes is too large"
    assert err.value.kind == errors.TOO_LARGE


def test_any_other_failure_reading_an_ack_or_ping_is_internal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(raw: Any) -> Any:
        raise OverflowError

    monkeypatch.setattr(messages, "loads", broken)
    for parse, what in ((parse_ack, "ack"), (parse_ping, "ping")):
        with pytest.raises(ProtocolError) as err:
            parse(b"{}")
        assert err.value.reason == f"{what} could not be read (OverflowError)"
        assert err.value.kind == errors.INTERNAL


# -- pings ---------------------------------------------------------------------------------


def test_a_ping_is_read_with_its_defaults() -> None:
    name = {"instance": 7, "userMemory": "2 MB"}
    assert parse_ping(dumps({"name": name, "isEnabled": False})) == messages.Ping(
        7, 2 * 1024 * 1024, False, name
    )
    got = parse_ping(dumps({"name": {"instance": 2**31 - 1}}))
    assert (got.instance, got.user_memory_bytes, got.enabled) == (2**31 - 1, 0, True)
    assert parse_ping(dumps({"name": {"instance": 0, "userMemory": 5}})).user_memory_bytes == 5


@pytest.mark.parametrize(
    ("ping", "reason"),
    [
        ({}, "ping name must be an InvokerInstanceId"),
        ({"name": 0}, "ping name must be an InvokerInstanceId"),
        ({"name": {}}, "ping instance must be a non-negative integer"),
        ({"name": {"instance": False}}, "ping instance must be a non-negative integer"),
        ({"name": {"instance": -1}}, "ping instance must be a non-negative integer"),
        ({"name": {"instance": 2**31}}, "ping instance must be a non-negative integer"),
        ({"name": {"instance": 0, "userMemory": "lots"}}, "ping userMemory must be a byte size"),
        ({"name": {"instance": 0, "userMemory": -1}}, "ping userMemory must be a byte size"),
        ({"name": {"instance": 0}, "isEnabled": "yes"}, "ping isEnabled must be a boolean"),
    ],
)
def test_each_bad_ping_is_refused_in_its_own_words(ping: dict[str, Any], reason: str) -> None:
    with pytest.raises(ProtocolError) as err:
        parse_ping(dumps(ping))
    assert (err.value.reason, err.value.kind) == (reason, errors.INVALID)


@pytest.mark.parametrize("parse", [parse_ack, parse_ping])
def test_an_unreadable_ack_or_ping_is_refused_by_kind(parse: Any) -> None:
    for raw, kind in (
        (b"", errors.EMPTY),
        (b"[]", errors.NOT_OBJECT),
        (b"{", errors.NOT_JSON),
        (b"[" * 100_000, errors.TOO_DEEP),
        (b'{"a": "\xff"}', errors.NOT_UTF8),
    ):
        with pytest.raises(ProtocolError) as err:
            parse(raw)
        assert err.value.kind == kind
    with pytest.raises(ProtocolError) as err:
        parse_ping(b"[]")
    assert err.value.reason == "ping is a JSON array"
