"""Action documents in every stored form, and the container protocol bodies/results."""

import base64
import io
import zipfile

import pytest

from tests.unit.test_protocol_messages import message
from whisk.protocol import (
    ActivationResponse,
    ProtocolError,
    StatusCode,
    action_from_document,
    action_record,
    activation_document,
    dumps,
    fallback_record,
    parse_activation,
)
from whisk.protocol.runtime import init_body, interpret_init, interpret_run, run_body

CODE = 'def main(args):\n    return {"greeting": "Hello " + args.get("name", "stranger")}\n'


def doc(exec_, **extra):
    d = {
        "_id": "guest/hello",
        "_rev": "1-abc",
        "entityType": "action",
        "namespace": "guest",
        "name": "hello",
        "version": "0.0.1",
        "publish": False,
        "exec": exec_,
        "parameters": [],
        "limits": {"timeout": 60000, "memory": 256, "logs": 10, "concurrency": 1},
        "annotations": [{"key": "exec", "value": "python:3.11"}],
    }
    d.update(extra)
    return d


def test_inline_code():
    a = action_from_document(doc({"kind": "nodejs:20", "code": "function main(p){return p}"}))
    assert a.code == "function main(p){return p}"
    assert not a.binary and a.code_attachment is None
    assert a.limits.memory_mb == 256


def test_mem_attachment_name_is_base64url_of_the_code():
    name = "mem:" + base64.urlsafe_b64encode(CODE.encode()).decode()
    a = action_from_document(
        doc({"kind": "python:3.11", "binary": False, "code": {"attachmentName": name}})
    )
    assert a.code == CODE


def test_mem_attachment_of_binary_zip_becomes_standard_base64():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("__main__.py", CODE)
    raw = buf.getvalue()
    name = "mem:" + base64.urlsafe_b64encode(raw).decode()
    a = action_from_document(
        doc({"kind": "python:3.11", "binary": True, "code": {"attachmentName": name}})
    )
    assert a.binary and base64.b64decode(a.code) == raw


def test_real_attachment_is_named_for_the_store_then_resolved():
    a = action_from_document(
        doc(
            {
                "kind": "python:3.11",
                "binary": False,
                "code": {"attachmentName": "couch:3f1f1c5e-aaaa-bbbb-cccc-0123456789ab"},
            }
        )
    )
    assert a.code is None and a.code_attachment == "3f1f1c5e-aaaa-bbbb-cccc-0123456789ab"
    assert a.with_attachment(CODE.encode()).code == CODE


def test_inline_base64_code_counts_as_binary():
    b64 = base64.b64encode(b"PK\x03\x04zipbytes").decode()
    a = action_from_document(doc({"kind": "python:3.11", "code": b64}))
    assert a.binary


def test_default_kind_resolution_and_blackbox():
    a = action_from_document(doc({"kind": "nodejs:default", "code": "x"}), {"nodejs": "nodejs:20"})
    assert a.kind == "nodejs:20"
    b = action_from_document(doc({"kind": "blackbox", "image": "user/img:tag"}))
    assert b.is_blackbox and b.image == "user/img:tag" and b.code is None


@pytest.mark.parametrize(
    "bad",
    [
        "not a dict",
        doc({"kind": "python:3.11", "code": "x"}, entityType="trigger"),
        doc({"kind": "sequence", "components": ["/guest/a"]}),
        doc({"kind": "python:3.11"}),
        doc({"kind": "python:3.11", "code": {"attachmentName": "mem:@@@"}}),
        doc({"kind": "python:3.11", "code": {"attachmentName": "s3:bucket/key"}}),
        doc({"kind": "python:3.11", "code": {"attachmentName": "couch:../../etc/passwd"}}),
        doc({"kind": "python:3.11", "code": "x"}, limits={"memory": "lots"}),
        doc({"kind": "python:3.11", "code": "x"}, annotations="nope"),
    ],
)
def test_bad_documents_raise_protocol_errors(bad):
    with pytest.raises(ProtocolError):
        action_from_document(bad)


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
