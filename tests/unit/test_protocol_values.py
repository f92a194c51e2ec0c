"""What the shared JSON codec writes and what the namespace limits decide, exactly: the
fuzzers (test_fuzz_protocol.py) check that nothing unexpected is raised, these check the
answers (the mutation run, tests/mutation/run.py, uses them)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
import time

import pytest

from whisk.protocol.actions import (
    DEFAULT_LOGS_MB,
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_MS,
    Action,
    ActionLimits,
)
from whisk.protocol.controller import (
    GUEST,
    MAX_INLINE_BYTES,
    action_document,
    activation_message,
    code_attachment,
    new_activation_id,
    new_transid,
)
from whisk.protocol.errors import Partial
from whisk.protocol.json import MAX_DEPTH, JSONDecodeError, _dumps_flat, dumps, dumps_str, loads
from whisk.protocol.limits import (
    SYSTEM_PAYLOAD_MAX,
    check_user_limits,
    parse_byte_size,
    payload_limit,
)
from whisk.protocol.logs import (
    COLLECTION_FAILED,
    DEVELOPER_ERROR_NOTE,
    SENTINEL,
    TRUNCATED,
    LogCollector,
    format_line,
    iso_time,
)
from whisk.protocol.messages import ActivationMessage, Identity, QualifiedName
from whisk.protocol.records import (
    ActivationResponse,
    StatusCode,
    action_record,
    activation_document,
    fallback_record,
)
from whisk.protocol.runtime import (
    INVALID_JSON,
    init_body,
    interpret_init,
    interpret_run,
    run_body,
    split_content,
    timeout_message,
    unsupported_encryption,
)


def test_loads_is_strict_json():
    assert loads(b'{"a": [1, 2.5, "\xc3\xa9", null, true]}') == {"a": [1, 2.5, "é", None, True]}
    assert loads('"x"') == "x"
    for bad in (b"NaN", b"[1,]", b"{'a': 1}", b"1e400", b"[" * (MAX_DEPTH + 1)):
        with pytest.raises(JSONDecodeError):
            loads(bad)


def test_dumps_is_compact_and_keeps_non_ascii():
    assert dumps({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'.encode()
    assert dumps_str([True, 1.5]) == "[true,1.5]"


def test_values_orjson_refuses_are_written_by_the_flat_encoder():
    big = 2**70  # beyond 64 bits
    assert dumps({"n": big, "t": (1, 2)}) == b'{"n":1180591620717411303424,"t":[1,2]}'
    deep: object = "x"
    for _ in range(600):  # deeper than orjson writes, within what it parses
        deep = [deep]
    assert dumps(deep) == b"[" * 600 + b'"x"' + b"]" * 600
    assert loads(dumps(deep)) == deep


def test_the_flat_encoder_writes_what_the_stdlib_writes():
    value = {"a": [1, {"b": []}, {}], "c": ("d", None, False, 2.5), "é": "ü"}
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert _dumps_flat(value) == expected
    assert _dumps_flat([]) == b"[]" and _dumps_flat({}) == b"{}" and _dumps_flat(3) == b"3"


def test_the_flat_encoder_writes_non_string_keys_as_the_stdlib_does():
    value = {3: "i", 2.5: "f", True: "t", None: "n"}
    expected = json.dumps(value, separators=(",", ":")).encode()
    assert _dumps_flat(value) == expected == b'{"3":"i","2.5":"f","true":"t","null":"n"}'


def test_what_no_encoder_can_write_is_a_type_error():
    with pytest.raises(TypeError) as e:
        _dumps_flat({"a": {1, 2}})
    assert str(e.value) == "set is not JSON serializable"
    with pytest.raises(TypeError) as e:
        _dumps_flat({(1, 2): "tuple key"})
    assert str(e.value) == "keys must be str, int, float, bool or None, not tuple"
    with pytest.raises(TypeError):
        dumps(object())


@pytest.mark.parametrize(
    ("value", "size"),
    [
        (0, 0),
        (1024, 1024),
        ("1 MB", 1024**2),
        ("2147483648 B", 2**31),
        ("512KB", 512 * 1024),
        ("3k", 3 * 1024),
        ("2 g", 2 * 1024**3),
        ("1GB", 1024**3),
        ("7 m", 7 * 1024**2),
        (" 5 B ", 5),
        (" " + "9" * 30 + " GB ", int("9" * 30) * 1024**3),  # 35 characters, the longest
    ],
)
def test_byte_sizes_as_openwhisk_writes_them(value, size):
    assert parse_byte_size(value) == size


NOT_SIZES = [-1, True, None, 1.5, "", "MB", "1 TB", "1  MB", "-1 MB", "1" * 31 + " B"]


@pytest.mark.parametrize("value", [*NOT_SIZES, "1 MB" * 11, " " + "9" * 30 + " GB  "])
def test_what_is_not_a_byte_size_is_none(value):
    assert parse_byte_size(value) is None


def test_the_payload_limit_is_the_users_capped_by_the_systems():
    assert SYSTEM_PAYLOAD_MAX == 1024 * 1024
    assert payload_limit({}) == SYSTEM_PAYLOAD_MAX
    assert payload_limit({"maxPayloadSize": "512 KB"}) == 512 * 1024
    assert payload_limit({"maxPayloadSize": "2 MB"}) == SYSTEM_PAYLOAD_MAX
    assert payload_limit({"maxPayloadSize": 0}) == SYSTEM_PAYLOAD_MAX  # unset
    assert payload_limit({"maxPayloadSize": "junk"}) == SYSTEM_PAYLOAD_MAX


def _action(**limits: int) -> Action:
    return Action("guest/a", "1-x", "guest", "a", "0.0.1", "python:3.11", ActionLimits(**limits))


def test_limits_within_the_namespace_and_the_node_pass():
    action = _action(memory_mb=256, timeout_ms=60_000, logs_mb=10, concurrency=1)
    within = {
        "minActionMemory": 256,
        "maxActionMemory": 256,
        "minActionTimeout": 60_000,
        "maxActionTimeout": 60_000,
        "minActionLogs": 10,
        "maxActionLogs": 10,
        "minActionConcurrency": 1,
        "maxActionConcurrency": 1,
    }
    assert check_user_limits(action, within, node_memory_mb=256) is None
    assert check_user_limits(action, {"maxActionMemory": "256"}, 256) is None  # not a number


@pytest.mark.parametrize(
    ("limits", "user", "reason"),
    [
        (
            {"memory_mb": 128},
            {"minActionMemory": 256},
            "The memory limit of 128MB is below the namespace minimum of 256MB.",
        ),
        (
            {"memory_mb": 512},
            {"maxActionMemory": 256},
            "The memory limit of 512MB exceeds the namespace maximum of 256MB.",
        ),
        (
            {"timeout_ms": 100},
            {"minActionTimeout": 200},
            "The timeout limit of 100ms is below the namespace minimum of 200ms.",
        ),
        (
            {"timeout_ms": 300_000},
            {"maxActionTimeout": 60_000},
            "The timeout limit of 300000ms exceeds the namespace maximum of 60000ms.",
        ),
        (
            {"logs_mb": 0},
            {"minActionLogs": 1},
            "The logs limit of 0MB is below the namespace minimum of 1MB.",
        ),
        (
            {"logs_mb": 20},
            {"maxActionLogs": 10},
            "The logs limit of 20MB exceeds the namespace maximum of 10MB.",
        ),
        (
            {"concurrency": 1},
            {"minActionConcurrency": 2},
            "The concurrency limit of 1 is below the namespace minimum of 2.",
        ),
        (
            {"concurrency": 50},
            {"maxActionConcurrency": 10.5},
            "The concurrency limit of 50 exceeds the namespace maximum of 10.5.",
        ),
    ],
)
def test_a_limit_outside_the_namespace_bounds_is_refused_with_its_reason(limits, user, reason):
    assert check_user_limits(_action(**limits), user, node_memory_mb=4096) == reason


def test_an_action_larger_than_the_node_is_refused_after_the_namespace_checks():
    action = _action(memory_mb=512)
    assert check_user_limits(action, {}, node_memory_mb=512) is None
    assert check_user_limits(action, {}, node_memory_mb=511) == (
        "The memory limit of 512MB exceeds the invoker's 511MB for actions."
    )
    assert check_user_limits(action, {"maxActionMemory": 256}, 511) == (
        "The memory limit of 512MB exceeds the namespace maximum of 256MB."
    )


# -- activation logs ------------------------------------------------------------------------

T = "2024-05-29T16:26:40.590123456Z"


def test_a_log_line_is_the_time_padded_the_stream_and_the_text_stripped():
    assert format_line(T, "stdout", "  hello \n") == f"{T} stdout: hello"
    assert format_line("t", "stderr", "x") == "t" + " " * 29 + " stderr: x"


def test_sentinels_are_counted_exactly_and_only_as_written():
    c = LogCollector(limit_bytes=1000)
    for not_one in (SENTINEL + " \n", "\n" + SENTINEL, " " + SENTINEL):
        c.add(T, "stdout", not_one)
    assert c.sentinels == 0 and len(c.lines) == 3
    c.add(T, "stdout", SENTINEL + "\n")
    assert (c.sentinels, c.complete) == (1, False)
    c.add(T, "stderr", SENTINEL)
    assert (c.sentinels, c.complete) == (2, True) and len(c.lines) == 3
    c.add(T, "stderr", SENTINEL)
    assert c.sentinels == 3


def test_log_size_is_counted_as_the_reference_counts_it_up_to_the_limit():
    line = "abc"  # counted as its bytes + the time + 30, unless the raw line's size is given
    each = len(line) + len(T) + 30
    c = LogCollector(limit_bytes=2 * each + 10)
    c.add(T, "stdout", line)
    assert c.size == each
    c.add(T, "stdout", "é", raw_size=10)
    assert c.size == each + 10
    c.add(T, "stdout", line)  # exactly at the limit: kept
    assert c.size == 2 * each + 10 and not c.truncated and len(c.lines) == 3
    c.add(T, "stdout", "")  # one more byte than the limit
    assert c.truncated and len(c.lines) == 3
    c.add(T, "stdout", "x", raw_size=0)  # once truncated, nothing more
    assert len(c.lines) == 3


def test_the_notes_a_log_ends_with():
    c = LogCollector(limit_bytes=1)
    c.add(T, "stdout", "too long for the limit")
    assert c.finish(T) == [format_line(T, "stderr", TRUNCATED.format(1))]
    assert TRUNCATED.format(1).endswith("exceeds the limit of 1 bytes.")
    assert c.finish(T, developer_error=True, failed=True) == [
        f"{T} stderr: Logs were truncated because the total bytes size exceeds the limit "
        "of 1 bytes.",
        f"{T} stderr: {DEVELOPER_ERROR_NOTE}",
        f"{T} stderr: {COLLECTION_FAILED}",
    ]
    fine = LogCollector(limit_bytes=100)
    fine.add(T, "stdout", "ok")
    assert fine.finish(T) == [f"{T} stdout: ok"]


def test_iso_time_is_utc_with_nanoseconds_whatever_the_local_zone(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert iso_time(1_716_999_999_590_123_456) == "2024-05-29T16:26:39.590123456Z"
        assert iso_time(5) == "1970-01-01T00:00:00.000000005Z"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


# -- activation records ---------------------------------------------------------------------

ALICE = Identity("alice", "guest", "uuid-1", {"api_key": "k"})
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


# -- the action-container protocol ----------------------------------------------------------


def _message(**kw) -> ActivationMessage:
    base = activation_message(
        QualifiedName("guest/pkg", "hello", None),
        "1-x",
        start_ms=1,
        user=ALICE,
        activation_id="a" * 32,
        transid=["tid", 1],
    )
    return dataclasses.replace(base, **kw)


HELLO = Action(
    "guest/pkg/hello", "1-x", "guest", "hello", "0.0.4", "python:3.11", LIMITS_OBJ, code="c"
)


def test_timeout_messages():
    assert timeout_message(500) == "The action exceeded its time limits of 500 milliseconds."
    assert timeout_message(500, during_init=True) == (
        "The action exceeded its time limits of 500 milliseconds during initialization."
    )


def test_init_args_leave_the_content_for_the_init_environment():
    msg = _message(
        content={"a": 1, "s": "x", "n": None, "o": {"k": [1]}}, init_args=("s", "n", "o", "z")
    )
    assert split_content(msg) == ({"a": 1}, {"s": "x", "n": "", "o": '{"k":[1]}'})
    assert split_content(_message(content={"a": 1})) == ({"a": 1}, {})
    assert split_content(_message(content=[1], init_args=("a",))) == ([1], {})
    assert split_content(_message(content=None)) == ({}, {})


def test_only_parameters_encrypted_with_a_scheme_we_hold_are_accepted():
    assert unsupported_encryption(_message(locked_args={"a": "NOOP", "b": "Off", "c": ""})) is None
    assert unsupported_encryption(_message(locked_args={"a": "noop", "k": "aes-256"})) == (
        "Parameter 'k' is encrypted with 'aes-256', which this invoker cannot decrypt."
    )


def test_the_init_and_run_bodies_carry_the_activations_context():
    msg = _message(content={"p": 1, "secret": "s"}, init_args=("secret",))
    context = {
        "api_key": "k",
        "namespace": "guest",
        "action_name": "/guest/pkg/hello",
        "action_version": "0.0.4",  # the message names none: the action's
        "activation_id": "a" * 32,
        "transaction_id": "tid",
        "deadline": "99",
    }
    env = {f"__OW_{k.upper()}": v for k, v in context.items()}
    assert init_body(msg, HELLO, 99, {"GPU": "g"}) == {
        "value": {
            "name": "hello",
            "main": "main",
            "binary": False,
            "env": {**env, "secret": "s", "GPU": "g"},
            "code": "c",
        }
    }
    assert run_body(msg, HELLO, 99) == {"value": {"p": 1}, **context}
    versioned = _message(action=QualifiedName("guest/pkg", "hello", "0.0.9"))
    assert run_body(versioned, HELLO, 99)["action_version"] == "0.0.9"
    no_key = dataclasses.replace(HELLO, annotations=(("provide-api-key", False),), code=None)
    body = init_body(versioned, no_key, 99)["value"]
    assert "__OW_API_KEY" not in body["env"] and "code" not in body


def _answer(r: ActivationResponse | None) -> tuple:
    assert r is not None
    return r.status_code, r.result, r.size


def test_a_run_answer_becomes_a_result_and_a_status():
    ok = interpret_run(200, b'{"a":1}')
    assert _answer(ok) == (StatusCode.SUCCESS, {"a": 1}, 7)
    listed = interpret_run(200, b"[1,2]")
    assert _answer(listed) == (StatusCode.SUCCESS, [1, 2], 5)
    app = interpret_run(200, b'{"error":"no"}')
    assert _answer(app) == (
        StatusCode.APPLICATION_ERROR,
        {"error": "no"},
        14,
    )
    dev = interpret_run(502, b'{"error":"crash"}')
    assert _answer(dev) == (
        StatusCode.DEVELOPER_ERROR,
        {"error": "crash"},
        17,
    )
    for status, body in ((500, b'{"a":1}'), (200, b"oops \xff"), (200, b""), (200, b'"s"')):
        bad = interpret_run(status, body)
        text = body.decode("utf-8", "replace")
        assert bad.status_code == StatusCode.DEVELOPER_ERROR
        assert bad.result == {"error": f"{INVALID_JSON}: {text}"} and bad.size == len(text)


def test_a_run_answer_over_the_payload_limit_is_cut_and_named():
    at_limit = interpret_run(200, b'"' + b"x" * 8 + b'"', max_payload=10)
    assert at_limit.status_code == StatusCode.DEVELOPER_ERROR  # a string: not a result
    over = interpret_run(200, b"\xffabcdefghijk", max_payload=10)
    assert over.status_code == StatusCode.APPLICATION_ERROR and over.size == 12
    assert over.result == {
        "error": "The action produced a response that exceeded the allowed length: "
        "12 > 10 bytes. The truncated response was: \ufffdabcdefghi"
    }
    kept = interpret_run(200, b"x" * 11, max_payload=10, length=5000)
    assert kept.size == 5000 and "5000 > 10 bytes" in kept.result["error"]
    assert interpret_run(200, b"{}", max_payload=10, length=None).size == 2


def test_an_init_answer_is_none_or_a_developer_error():
    assert interpret_init(200, b"whatever") is None
    said = interpret_init(502, b'{"error":"bad zip"}')
    assert _answer(said) == (
        StatusCode.DEVELOPER_ERROR,
        {"error": "bad zip"},
        19,
    )
    text = interpret_init(500, b"boom \xff")
    assert text is not None and text.status_code == StatusCode.DEVELOPER_ERROR
    assert text.result == {"error": "The action failed during initialization: boom \ufffd"}
    assert text.size == len("boom \ufffd")
    empty = interpret_init(500, b"")
    assert (empty.result, empty.size) == ({"error": "The action failed during initialization."}, 0)
    listed = interpret_init(500, b"[1]")
    assert listed.result == {"error": "The action failed during initialization: [1]"}


# -- what a controller writes ---------------------------------------------------------------


def test_ids_are_as_the_controller_makes_them():
    tid, start = new_transid(42)
    assert len(tid) == 32 and re.fullmatch(r"[A-Za-z0-9_-]{32}", tid) and start == 42
    assert re.fullmatch(r"[0-9a-f]{32}", new_activation_id())


def test_an_activation_message_carries_everything_it_is_given():
    msg = activation_message(
        QualifiedName("guest", "a"),
        "3-r",
        start_ms=7,
        user=ALICE,
        blocking=False,
        content={"x": 1},
        controller="2",
        activation_id="b" * 32,
        transid=["t", 7],
        init_args=("x",),
        cause="c" * 32,
    )
    assert (msg.revision, msg.user, msg.blocking, msg.content, msg.controller) == (
        "3-r",
        ALICE,
        False,
        {"x": 1},
        "2",
    )
    assert (msg.activation_id, msg.transid, msg.init_args, msg.cause) == (
        "b" * 32,
        ["t", 7],
        ("x",),
        "c" * 32,
    )
    fresh = activation_message(QualifiedName("guest", "a"), None, start_ms=9)
    assert fresh.user == GUEST and fresh.blocking and fresh.controller == "0"
    assert fresh.transid[1] == 9 and len(fresh.activation_id) == 32 and fresh.cause is None


def test_code_is_inline_when_small_and_an_attachment_when_not():
    small = code_attachment(b"print(1)", binary=False)
    assert small == {
        "attachmentType": "text/plain; charset=UTF-8",
        "length": 8,
        "digest": "sha256-" + hashlib.sha256(b"print(1)").hexdigest(),
        "attachmentName": "mem:" + base64.urlsafe_b64encode(b"print(1)").decode(),
    }
    big = code_attachment(b"x" * MAX_INLINE_BYTES, binary=True)
    assert big["attachmentType"] == "application/octet-stream"
    assert big["length"] == MAX_INLINE_BYTES and MAX_INLINE_BYTES == 16 * 1024
    assert re.fullmatch(r"couch:[0-9a-f-]{36}", big["attachmentName"])
    assert code_attachment(b"x" * (MAX_INLINE_BYTES - 1), True)["attachmentName"].startswith("mem:")


def test_an_action_document_as_the_controller_stores_it():
    doc = action_document(
        "guest",
        "hello",
        kind="python:3.11",
        code=b"c",
        main="run",
        package="pkg",
        parameters=[{"key": "p", "value": 1}],
        timeout_ms=1000,
        memory_mb=128,
        logs_mb=5,
        concurrency=3,
        version="0.0.2",
        publish=True,
        updated_ms=77,
    )
    assert doc == {
        "_id": "guest/pkg/hello",
        "entityType": "action",
        "updated": 77,
        "namespace": "guest/pkg",
        "name": "hello",
        "version": "0.0.2",
        "publish": True,
        "exec": {
            "kind": "python:3.11",
            "binary": False,
            "code": code_attachment(b"c", False),
            "main": "run",
        },
        "parameters": [{"key": "p", "value": 1}],
        "limits": {"timeout": 1000, "memory": 128, "logs": 5, "concurrency": 3},
        "annotations": [
            {"key": "provide-api-key", "value": False},
            {"key": "exec", "value": "python:3.11"},
        ],
    }


def test_a_blackbox_and_a_sequence_document():
    box = action_document("guest", "box", kind="blackbox", image="me/img", annotations=[])
    assert box["exec"] == {"kind": "blackbox", "binary": False, "image": "me/img"}
    assert box["annotations"] == [] and box["parameters"] == [] and box["publish"] is False
    assert box["limits"] == {
        "timeout": DEFAULT_TIMEOUT_MS,
        "memory": DEFAULT_MEMORY_MB,
        "logs": DEFAULT_LOGS_MB,
        "concurrency": 1,
    }
    seq = action_document("guest", "s", kind="sequence", components=["/guest/a", "/guest/b"])
    assert seq["exec"] == {"kind": "sequence", "components": ["/guest/a", "/guest/b"]}
    assert seq["parameters"] == [{"key": "_actions", "value": ["/guest/a", "/guest/b"]}]
    assert (seq["_id"], seq["version"], seq["updated"]) == ("guest/s", "0.0.1", 0)
