"""Hostile action documents never crash the reader: refused with a ProtocolError (a clear
reason), never another exception (hypothesis: every field, poison in every field)."""

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import targets
from tests.unit.whisk.protocol.test_actions import doc
from tests.unit.whisk.protocol.test_messages_fuzz import POISON, json_values
from whisk.protocol import ProtocolError, action_from_document


def dumps(value: object) -> bytes:
    """The stdlib encoder: it writes what ours refuses (integers beyond 64 bits)."""
    return json.dumps(value).encode()


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


EXEC_KEYS = ["kind", "code", "binary", "main", "image", "jar", "components"]


@FUZZ
@given(st.sampled_from(EXEC_KEYS), json_values)
def test_action_document_exec_fields(key, value):
    exec_ = {"kind": "python:3.11", "code": "def main(a): return a", key: value}
    try:
        action_from_document(doc(exec_), {"python": "python:3.11"})
    except ProtocolError as e:
        assert e.reason


@FUZZ
@given(
    st.sampled_from(
        [
            "_id",
            "namespace",
            "name",
            "version",
            "limits",
            "annotations",
            "parameters",
            "entityType",
            "exec",
        ]
    ),
    json_values,
)
def test_action_document_top_level_fields(key, value):
    try:
        action_from_document(doc({"kind": "python:3.11", "code": "x"}, **{key: value}))
    except ProtocolError as e:
        assert e.reason


@FUZZ
@given(st.binary(max_size=200))
def test_attachment_names_with_bad_base64(data):
    name = "mem:" + base64.b64encode(data).decode() + "%$"
    try:
        action_from_document(doc({"kind": "python:3.11", "code": {"attachmentName": name}}))
    except ProtocolError as e:
        assert "base64" in e.reason


SENTINEL = "__POISON__"


def nested_text(depth: int, shape: str) -> bytes:
    """JSON text nested ``depth`` levels (written directly: no encoder recursion)."""
    if shape == "list":
        return b"[" * depth + b"1" + b"]" * depth
    if shape == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b'["t",1,' * depth + b'["t",1]' + b"]" * depth


# -- The action document, every field --

DOC_FIELDS = [
    "_id",
    "_rev",
    "namespace",
    "name",
    "version",
    "entityType",
    "exec",
    "limits",
    "annotations",
    "parameters",
]

EXEC_FIELDS = ["kind", "code", "binary", "main", "image", "jar"]


def _doc_with(path: str, text: bytes) -> bytes:
    d = doc({"kind": "python:3.11", "code": "def main(a): return a"})
    if path.startswith("exec."):
        d["exec"][path[5:]] = SENTINEL
    elif path.startswith("limits."):
        d["limits"][path[7:]] = SENTINEL
    else:
        d[path] = SENTINEL
    return dumps(d).replace(f'"{SENTINEL}"'.encode(), text)


@FUZZ
@given(
    st.sampled_from(
        DOC_FIELDS
        + [f"exec.{k}" for k in EXEC_FIELDS]
        + [f"limits.{k}" for k in ("timeout", "memory", "logs", "concurrency")]
    ),
    POISON,
)
def test_action_document_poison_in_every_field(path, text):
    targets.action_document(_doc_with(path, text))  # refused cleanly or usable


def test_action_document_deep_entity_type_is_refused_not_recursed():
    from whisk.protocol import loads

    d = loads(_doc_with("entityType", nested_text(1000, "list")))
    with pytest.raises(ProtocolError):
        action_from_document(d)
