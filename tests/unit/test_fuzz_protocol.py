"""Hostile input never crashes the readers: every malformed message or action document is
refused with a ProtocolError (a clear reason), never another exception."""

import base64
import json
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoker.protocol import ProtocolError, action_from_document, parse_activation
from tests.unit.test_protocol_actions import doc
from tests.unit.test_protocol_messages import message

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=50)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)
FIELDS = [
    "transid",
    "action",
    "revision",
    "user",
    "activationId",
    "rootControllerIndex",
    "blocking",
    "content",
    "initArgs",
    "lockedArgs",
    "cause",
    "traceContext",
]


def dumps(value: object) -> bytes:
    """The stdlib encoder: it writes what ours refuses (integers beyond 64 bits)."""
    return json.dumps(value).encode()


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _parse_or_refuse(raw: bytes) -> None:
    try:
        msg = parse_activation(raw)
    except ProtocolError as e:
        assert e.reason
        return
    # Whatever is accepted is safe to use as a document id and a topic name.
    assert "/" not in msg.activation_id and ".." not in msg.action.docid.split("/")
    assert msg.controller.replace("-", "").replace("_", "").replace(".", "").isalnum()


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes(raw):
    _parse_or_refuse(raw)


@FUZZ
@given(st.sampled_from(FIELDS), json_values)
def test_one_field_replaced_by_any_json(field, value):
    _parse_or_refuse(dumps(message(**{field: value})))


@FUZZ
@given(st.text(alphabet=string.printable + "é/\\..\x00", max_size=300))
def test_hostile_names(name):
    _parse_or_refuse(dumps(message(action={"path": "guest", "name": name})))
    _parse_or_refuse(dumps(message(action=name)))


def test_deep_nesting_and_huge_strings_are_refused_cleanly():
    deep = b"[" * 5000 + b"]" * 5000
    _parse_or_refuse(b'{"content":' + deep + b"}")
    _parse_or_refuse(dumps(message(content={"x": "y" * 2_000_000})))
    _parse_or_refuse(b'{"content":' + b'{"a":' * 2000 + b"{}" + b"}" * 2001)


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


def test_anything_parsed_can_be_written_back():
    from invoker.protocol import dumps as wire_dumps
    from invoker.protocol import loads

    deep = b"[" * 1000 + b"]" * 1000
    m = parse_activation(b'{"content":{"a":' + deep + b"}," + dumps(message())[1:])
    assert loads(wire_dumps(m.to_json()))["content"] == m.content
