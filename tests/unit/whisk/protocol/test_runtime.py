"""The action-container protocol (whisk/protocol/runtime.py): the /init and /run bodies and
what their answers become, in every form and exactly."""

from __future__ import annotations

import dataclasses

import pytest

from tests.unit.whisk.protocol.test_actions import doc
from tests.unit.whisk.protocol.test_messages import message
from whisk.protocol import (
    ActivationResponse,
    StatusCode,
    action_from_document,
    dumps,
    parse_activation,
)
from whisk.protocol.actions import Action, ActionLimits
from whisk.protocol.controller import activation_message
from whisk.protocol.messages import ActivationMessage, Identity, QualifiedName
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

CODE = 'def main(args):\n    return {"greeting": "Hello " + args.get("name", "stranger")}\n'


def _msg(**changes):
    return parse_activation(dumps(message(**changes)))


def test_init_and_run_bodies():
    action = action_from_document(doc({"kind": "python:3.11", "code": CODE}))
    msg = _msg(content={"name": "World", "secret": {"a": 1}}, initArgs=["secret"])
    init = init_body(msg, action, 1717000060358, {"__OW_GPU_POOL": "unix:/x"})["value"]
    assert init["name"] == "hello" and init["main"] == "main" and init["code"] == CODE
    env = init["env"]
    assert env["__OW_API_KEY"].startswith("23bc46b1")
    assert env["__OW_ACTION_NAME"] == "/guest/hello"
    assert env["__OW_DEADLINE"] == "1717000060358"
    assert env["secret"] == '{"a":1}'
    assert env["__OW_GPU_POOL"] == "unix:/x"
    assert all(isinstance(v, str) for v in env.values())
    run = run_body(msg, action, 1717000060601)
    assert run["value"] == {"name": "World"}
    assert run["deadline"] == "1717000060601"
    assert run["activation_id"] == msg.activation_id
    assert all(isinstance(v, str) for k, v in run.items() if k != "value")


def test_provide_api_key_false_hides_the_key():
    action = action_from_document(
        doc(
            {"kind": "python:3.11", "code": CODE},
            annotations=[{"key": "provide-api-key", "value": False}],
        )
    )
    msg = _msg()
    assert "api_key" not in run_body(msg, action, 1)
    assert "__OW_API_KEY" not in init_body(msg, action, 1)["value"]["env"]


@pytest.mark.parametrize(
    "status,body,code,result",
    [
        (200, b'{"a":1}', StatusCode.SUCCESS, {"a": 1}),
        (200, b"[1,2]", StatusCode.SUCCESS, [1, 2]),
        (200, b'{"error":"boom","x":1}', StatusCode.APPLICATION_ERROR, {"error": "boom"}),
        (502, b'{"error":"crash"}', StatusCode.DEVELOPER_ERROR, {"error": "crash"}),
        (502, b"[1]", StatusCode.DEVELOPER_ERROR, None),
        (200, b"not json", StatusCode.DEVELOPER_ERROR, None),
        (200, b"42", StatusCode.DEVELOPER_ERROR, None),
    ],
)
def test_run_response_mapping(status, body, code, result):
    r = interpret_run(status, body)
    assert r.status_code == code
    if result is not None:
        assert r.result == result
    else:
        assert "did not produce a valid JSON" in r.result["error"]


def test_oversized_result_is_an_application_error_with_truncation():
    r = interpret_run(200, b'{"a":"' + b"x" * 2000 + b'"}', max_payload=1000)
    assert r.status_code == StatusCode.APPLICATION_ERROR
    assert "exceeded the allowed length: 2008 > 1000 bytes" in r.result["error"]


def test_init_failures():
    assert interpret_init(200, b'{"ok":true}') is None
    r = interpret_init(502, b'{"error":"syntax error"}')
    assert r.status_code == StatusCode.DEVELOPER_ERROR and r.result == {"error": "syntax error"}
    r = interpret_init(500, b"")
    assert r.result["error"] == "The action failed during initialization."


# -- activation records ---------------------------------------------------------------------

ALICE = Identity("alice", "guest", "uuid-1", {"api_key": "k"})


LIMITS_OBJ = ActionLimits(timeout_ms=60000, memory_mb=256, logs_mb=10, concurrency=1)


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
