"""Action documents in every stored form, and the container protocol bodies/results.

Action documents read exactly (whisk/protocol/actions.py): every field of the Action, every
refusal's words, the limits' bounds and the attachment names. The fuzzers beside them only
check that nothing but ProtocolError is raised."""

from __future__ import annotations

import base64
import io
import zipfile
from typing import Any

import pytest

from whisk.protocol import ProtocolError, action_from_document, actions
from whisk.protocol.actions import (
    DEFAULT_LOGS_MB,
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_MS,
    Action,
    ActionLimits,
    decode_attachment,
    encode_code,
    looks_binary,
    resolve_kind,
    stored_attachment_name,
    valid_image,
)
from whisk.protocol.errors import INTERNAL

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


ZIP = base64.b64encode(b"PK\x03\x04 a zip").decode()


def action_doc(**fields: Any) -> dict[str, Any]:
    exec_ = fields.pop("exec", {"kind": "python:3.11", "code": "def main(a): return a"})
    return {"_id": "guest/hello", "namespace": "guest", "name": "hello", "exec": exec_, **fields}


def test_a_full_document_is_read_field_by_field() -> None:
    limits = {"timeout": 3000, "memory": 128, "logs": 5, "concurrency": 4}
    a = action_from_document(
        action_doc(
            _rev="3-abc",
            version="0.0.7",
            limits=limits,
            annotations=[{"key": "provide-api-key", "value": False}, {"key": "exec"}],
            parameters=[{"key": "p", "value": 1}],
            exec={"kind": " Python:3.11 ", "code": "def f(a): return a", "main": "f"},
        ),
        revision="ignored-when-the-document-has-one",
    )
    assert a == Action(
        docid="guest/hello",
        revision="3-abc",
        namespace="guest",
        name="hello",
        version="0.0.7",
        kind="python:3.11",
        limits=ActionLimits(3000, 128, 5, 4),
        annotations=(("provide-api-key", False), ("exec", None)),
        parameters=({"key": "p", "value": 1},),
        code="def f(a): return a",
        binary=False,
        main="f",
        image=None,
        code_attachment=None,
    )
    assert a.limits.to_json() is limits and a.path == "guest/hello"
    assert not a.provide_api_key and not a.is_blackbox
    assert a.annotation("exec", "d") is None and a.annotation("nope", "d") == "d"


def test_defaults_of_a_minimal_document() -> None:
    a = action_from_document(action_doc(), revision="1-x")
    assert (a.revision, a.version, a.limits, a.main, a.image) == (
        "1-x",
        "0.0.1",
        ActionLimits(),
        None,
        None,
    )
    assert (a.annotations, a.parameters, a.binary, a.provide_api_key) == ((), (), False, True)
    assert a.limits.to_json() == {
        "timeout": DEFAULT_TIMEOUT_MS,
        "memory": DEFAULT_MEMORY_MB,
        "logs": DEFAULT_LOGS_MB,
        "concurrency": 1,
    }
    assert action_from_document(action_doc(_rev=7), revision="1-x").revision is None
    assert action_from_document(action_doc(entityType="action")).revision is None


def test_code_forms() -> None:
    assert action_from_document(action_doc(exec={"kind": "nodejs:20", "code": ZIP})).binary
    assert action_from_document(action_doc(exec={"kind": "java:8", "jar": ZIP})).code == ZIP
    inline = base64.urlsafe_b64encode(b"print(1)").decode().rstrip("=")
    a = action_from_document(
        action_doc(exec={"kind": "python:3", "code": {"attachmentName": f"mem:{inline}"}})
    )
    assert (a.code, a.binary, a.code_attachment) == ("print(1)", False, None)
    zipped = base64.urlsafe_b64encode(b"PK\x03\x04").decode()
    a = action_from_document(
        action_doc(
            exec={"kind": "python:3", "binary": True, "code": {"attachmentName": f"mem:{zipped}"}}
        )
    )
    assert (a.code, a.binary) == (base64.b64encode(b"PK\x03\x04").decode(), True)
    a = action_from_document(
        action_doc(exec={"kind": "java:8", "binary": True, "code": {"attachmentName": "couch:u-1"}})
    )
    assert (a.code, a.code_attachment, a.binary) == (None, "u-1", True)
    assert a.with_attachment(b"\x00\x01") == Action(
        **{**_fields(a), "code": "AAE=", "code_attachment": None}
    )
    text = action_from_document(
        action_doc(exec={"kind": "python:3", "code": {"attachmentName": "a.py"}})
    )
    assert text.with_attachment(b"x = 1").code == "x = 1"


def _fields(a: Action) -> dict[str, Any]:
    return {name: getattr(a, name) for name in Action.__slots__}


def test_blackbox_documents() -> None:
    a = action_from_document(
        action_doc(exec={"kind": "blackbox", "image": "openwhisk/example:1.0", "code": "  "})
    )
    assert (a.kind, a.image, a.code, a.is_blackbox) == (
        "blackbox",
        "openwhisk/example:1.0",
        None,
        True,
    )
    a = action_from_document(
        action_doc(exec={"kind": "blackbox", "image": "me/img", "code": "echo"})
    )
    assert a.code == "echo"
    a = action_from_document(action_doc(exec={"kind": "blackbox", "image": "me/img"}))
    assert a.code is None and a.code_attachment is None
    # An image on a kind that is not blackbox is kept only when it is a string.
    assert (
        action_from_document(action_doc(exec={"kind": "python:3", "code": "x", "image": 5})).image
        is None
    )


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ([], "action document is not an object"),
        (action_doc(entityType="trigger"), "document is a 'trigger', not an action"),
        (action_doc(entityType=["x"]), "document is a 'list', not an action"),
        (action_doc(entityType="r" * 100), f"document is a {'r' * 64!r}, not an action"),
        ({**action_doc(), "_id": ""}, "action document lacks _id, namespace or name"),
        ({**action_doc(), "_id": 1}, "action document lacks _id, namespace or name"),
        ({**action_doc(), "namespace": ""}, "action document lacks _id, namespace or name"),
        ({**action_doc(), "namespace": 2}, "action document lacks _id, namespace or name"),
        ({**action_doc(), "name": ""}, "action document lacks _id, namespace or name"),
        ({**action_doc(), "name": None}, "action document lacks _id, namespace or name"),
        (action_doc(exec="python"), "action document has no exec.kind"),
        (action_doc(exec={"kind": 3, "code": "x"}), "action document has no exec.kind"),
        (
            action_doc(exec={"kind": "sequence", "code": "x"}),
            "sequences are run by the controller, not by an invoker",
        ),
        (
            action_doc(exec={"kind": "Ruby:Default", "code": "x"}),
            "no default runtime for kind 'Ruby:Default'",
        ),
        (action_doc(version=1), "version must be a string"),
        (
            action_doc(exec={"kind": "python:3", "code": "x", "main": 1}),
            "exec.main must be a string",
        ),
        (action_doc(exec={"kind": "blackbox"}), "blackbox action has no valid exec.image"),
        (
            action_doc(exec={"kind": "blackbox", "image": 5}),
            "blackbox action has no valid exec.image",
        ),
        (
            action_doc(exec={"kind": "blackbox", "image": "Bad/Image"}),
            "blackbox action has no valid exec.image",
        ),
        (
            action_doc(exec={"kind": "python:3", "code": "x", "binary": 1}),
            "exec.binary must be a boolean",
        ),
        (
            action_doc(exec={"kind": "python:3", "code": {}}),
            "exec.code attachment has no attachmentName",
        ),
        (
            action_doc(exec={"kind": "python:3", "code": {"attachmentName": ""}}),
            "exec.code attachment has no attachmentName",
        ),
        (
            action_doc(exec={"kind": "python:3", "code": {"attachmentName": 4}}),
            "exec.code attachment has no attachmentName",
        ),
        (
            action_doc(exec={"kind": "python:3", "code": 12}),
            "exec.code must be a string or an attachment reference",
        ),
        (action_doc(exec={"kind": "python:3"}), "action has no code"),
        (action_doc(limits=[]), "limits must be an object"),
        (action_doc(annotations={}), "annotations must be a list of {key, value} objects"),
        (
            action_doc(annotations=[{"key": 1}]),
            "annotations must be a list of {key, value} objects",
        ),
        (action_doc(parameters=["p"]), "parameters must be a list of {key, value} objects"),
        (
            action_doc(exec={"kind": "python:3", "code": {"attachmentName": "s3:bucket/x"}}),
            "attachment store 's3' is not supported",
        ),
        (
            action_doc(exec={"kind": "python:3", "code": {"attachmentName": "couch:a/b"}}),
            "attachment name has invalid characters",
        ),
    ],
)
def test_each_refusal_says_what_is_wrong(document: Any, words: str) -> None:
    with pytest.raises(ProtocolError) as e:
        action_from_document(document, {"python": "python:3.11"})
    assert str(e.value) == words and e.value.kind != INTERNAL


def test_inline_code_at_the_size_limit_and_beyond(monkeypatch: pytest.MonkeyPatch) -> None:
    assert actions.MAX_CODE_BYTES == 48 * 1024 * 1024  # the controller's exec size limit
    monkeypatch.setattr(actions, "MAX_CODE_BYTES", 8)  # not 48 MB strings for every mutant
    assert (
        action_from_document(action_doc(exec={"kind": "python:3", "code": "x" * 8})).code == "x" * 8
    )
    with pytest.raises(ProtocolError, match=r"^inline code exceeds the size limit$"):
        action_from_document(action_doc(exec={"kind": "python:3", "code": "x" * 9}))


def test_an_unreadable_document_is_an_internal_protocol_error() -> None:
    class Weird(dict):
        def get(self, *a: Any) -> Any:
            raise OverflowError

    with pytest.raises(ProtocolError) as e:
        action_from_document(Weird())
    assert str(e.value) == "action document could not be read (OverflowError)"
    assert e.value.kind == INTERNAL


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({}, ActionLimits()),
        ({"timeout": 0, "memory": 0, "logs": 0, "concurrency": 0}, ActionLimits(0, 0, 0, 1)),
        ({"timeout": 2**31, "memory": 1.9}, ActionLimits(2**31, 1)),
        ({"concurrency": 3}, ActionLimits(concurrency=3)),
    ],
)
def test_limits_read(limits: dict[str, Any], expected: ActionLimits) -> None:
    assert action_from_document(action_doc(limits=limits)).limits == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("timeout", -1),
        ("memory", 2**31 + 1),
        ("logs", True),
        ("concurrency", "2"),
        ("timeout", None),
    ],
)
def test_limits_refused(key: str, value: Any) -> None:
    with pytest.raises(ProtocolError) as e:
        action_from_document(action_doc(limits={key: value}))
    assert str(e.value) == f"limits.{key} must be a non-negative number"


def test_kinds_and_images() -> None:
    defaults = {"nodejs": "nodejs:20"}
    assert resolve_kind(" NodeJS:Default ", defaults) == "nodejs:20"
    assert resolve_kind("nodejs:default", defaults) == "nodejs:20"
    assert resolve_kind("Python:3.11", defaults) == "python:3.11"
    assert resolve_kind("nodejsdefault", defaults) == "nodejsdefault"
    assert resolve_kind("nodejs:x:default", defaults) == "nodejs:20"  # the first part
    long = "r" * 100 + ":default"
    with pytest.raises(ProtocolError) as e:
        resolve_kind(long, defaults)
    assert str(e.value) == f"no default runtime for kind {long[:64]!r}"
    with pytest.raises(ProtocolError, match=r"^no default runtime for kind 'go:default'$"):
        resolve_kind("go:default", defaults)
    good = ["busybox", "me/img:1.0", "reg.io:5000/a/b_c__d-e:tag", "x@sha256:" + "a" * 64]
    assert all(valid_image(i) for i in good)
    bad = ["", "me/Img", "a:", "-a", "a" * 256, "x@sha256:abc", "a//b"]
    assert not any(valid_image(i) for i in bad)
    assert valid_image("a" * 255)


def test_attachment_names_and_codes() -> None:
    assert stored_attachment_name("couch:abc-1.2_3") == "abc-1.2_3"
    assert stored_attachment_name("legacy.zip") == "legacy.zip"
    assert stored_attachment_name("a" * 128) == "a" * 128
    for name, words in [
        ("couch:", "attachment name has invalid characters"),
        ("a" * 129, "attachment name has invalid characters"),
        ("a b", "attachment name has invalid characters"),
        ("store:x:y", "attachment store 'store' is not supported"),
    ]:
        with pytest.raises(ProtocolError) as e:
            stored_attachment_name(name)
        assert str(e.value) == words
    assert decode_attachment("couch:x") is None and decode_attachment("mem") is None
    assert decode_attachment("mem:") == b""
    assert decode_attachment("mem:-_8") == b"\xfb\xff"
    with pytest.raises(ProtocolError, match=r"^inline attachment is not valid base64url: "):
        decode_attachment("mem:a*b")
    assert encode_code(b"\xff", True) == "/w==" and encode_code("é".encode(), False) == "é"
    with pytest.raises(
        ProtocolError, match=r"^action code is not UTF-8 text and not marked binary$"
    ):
        encode_code(b"\xff", False)
    assert looks_binary(" QUJD ") and looks_binary("QUI=")
    assert not looks_binary("QUJ") and not looks_binary("    ") and not looks_binary("def main")
