"""Hostile input never crashes the Kafka messages' readers: every malformed activation message,
ack or ping is refused with a ProtocolError (a clear reason), never another exception
(hypothesis: every field, poison in every field); tests/fuzz holds the coverage-guided
(atheris) targets and their seed corpus."""

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import targets
from tests.unit.whisk.protocol.test_messages import message
from whisk.protocol import ProtocolError, fallback_record, parse_activation
from whisk.protocol import dumps as wire_dumps
from whisk.protocol.errors import KINDS
from whisk.protocol.messages import parse_ack, parse_ping

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


def test_anything_parsed_can_be_written_back():
    from whisk.protocol import dumps as wire_dumps
    from whisk.protocol import loads

    deep = b"[" * 1000 + b"]" * 1000
    m = parse_activation(b'{"content":{"a":' + deep + b"}," + dumps(message())[1:])
    assert loads(wire_dumps(m.to_json()))["content"] == m.content


# -- Poison in every field: deep nesting, numbers out of range, bad UTF-8, odd shapes. --
#
# Each field of the message (and of the action document and the runtime bodies) is replaced
# by values that broke parsers before: nesting from a few hundred levels to beyond the JSON
# parser's limit, integers and floats no double holds, invalid UTF-8 and lone surrogates.
# The contract: a clean ProtocolError (with what can still be answered) or a message whose
# every downstream use works; never another exception.


AID = "5a64676ec8aa46b5a4676ec8aaf6b5d2"

SENTINEL = "__POISON__"

DEPTHS = st.sampled_from([2, 100, 255, 300, 999, 1000, 1023, 1024, 1025, 3000])

SHAPES = st.sampled_from(["list", "object", "transid"])

RAW_NUMBERS = st.sampled_from(
    [
        b"1" + b"0" * 400,
        b"-" + b"9" * 5000,
        b"1e400",
        b"-1e999",
        b"18446744073709551616",
        b"9223372036854775808",
        b"-9223372036854775809",
        b"1.7976931348623157e309",
        b"0." + b"0" * 5000 + b"1",
        b"1E-400",
    ]
)

BAD_STRINGS = st.sampled_from(
    [b'"\xff\xfe"', b'"\xc3"', b'"\\ud800"', b'"\\udfff x"', b'"a\x00b"', b'"\xed\xa0\x80"']
)


def nested_text(depth: int, shape: str) -> bytes:
    """JSON text nested ``depth`` levels (written directly: no encoder recursion)."""
    if shape == "list":
        return b"[" * depth + b"1" + b"]" * depth
    if shape == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b'["t",1,' * depth + b'["t",1]' + b"]" * depth


def with_field(field: str, text: bytes) -> bytes:
    """The good message with ``field`` (a dotted path) replaced by raw JSON ``text``."""
    msg = message()
    obj = msg
    parts = field.split(".")
    for part in parts[:-1]:
        obj[part] = dict(obj[part])
        obj = obj[part]
    obj[parts[-1]] = SENTINEL
    return dumps(msg).replace(f'"{SENTINEL}"'.encode(), text)


NESTED_FIELDS = [
    *FIELDS,
    "action.path",
    "action.name",
    "action.version",
    "user.subject",
    "user.namespace",
    "user.authkey",
    "user.rights",
    "user.limits",
    "rootControllerIndex.asString",
    "content.name",
]


def _refused_cleanly(raw: bytes, *, answerable: bool | None = None) -> None:
    try:
        targets.activation(raw)  # parse, answer or build both bodies: never another error
        parse_activation(raw)
    except ProtocolError as e:
        assert e.reason and e.kind in KINDS
        if answerable is not None:
            assert e.partial.answerable is answerable, e.reason
        if e.partial.answerable:
            assert e.partial.activation_id == AID
            rec = fallback_record(e.partial, 3, "bad", 0)
            wire_dumps(rec.to_json())


@FUZZ
@given(st.sampled_from(NESTED_FIELDS), DEPTHS, SHAPES)
def test_deep_nesting_in_every_field(field, depth, shape):
    raw = with_field(field, nested_text(depth, shape))
    # Unless the id itself is buried, the poison is answered (deep transid included).
    buried = field in ("activationId", "rootControllerIndex", "rootControllerIndex.asString")
    _refused_cleanly(raw, answerable=None if buried or depth < 3 else True)


@FUZZ
@given(st.sampled_from(NESTED_FIELDS), RAW_NUMBERS)
def test_numbers_out_of_range_in_every_field(field, number):
    buried = field in ("activationId", "rootControllerIndex", "rootControllerIndex.asString")
    _refused_cleanly(with_field(field, number), answerable=None if buried else True)


@FUZZ
@given(st.sampled_from(NESTED_FIELDS), BAD_STRINGS)
def test_invalid_utf8_and_lone_surrogates_in_every_field(field, text):
    buried = field in ("activationId", "rootControllerIndex", "rootControllerIndex.asString")
    _refused_cleanly(with_field(field, text), answerable=None if buried else True)


def test_the_transid_seen_in_the_wild_is_answered():
    # ~4 KB, a few hundred levels of extras: once a RecursionError that killed the feed.
    raw = with_field("transid", nested_text(400, "transid"))
    assert 3000 < len(raw) < 5000
    with pytest.raises(ProtocolError) as e:
        parse_activation(raw)
    assert e.value.partial.answerable and e.value.partial.activation_id == AID
    assert e.value.partial.transid == ["sid_invalid", 0]


@pytest.mark.parametrize(
    "raw,kind",
    [
        (b"", "empty"),
        (b"[" + dumps(message()) + b"]", "not_object"),
        (b'"a string"', "not_object"),
        (b"null", "not_object"),
        (dumps(message()).replace(b"World", b"W\xffrld"), "not_utf8"),
        (dumps(message(content={"x": "y" * 1_100_000})), "too_large"),
        (dumps(message(content=[])).replace(b"[]", nested_text(1100, "list")), "too_deep"),
        (dumps(message()).replace(b"true", b"1" + b"0" * 400), "number_out_of_range"),
        (dumps(message())[:-5], "not_json"),
        (dumps(message(blocking="yes")), "invalid_field"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_each_kind_of_poison_is_named(raw, kind):
    with pytest.raises(ProtocolError) as e:
        parse_activation(raw)
    assert e.value.kind == kind
    # Where the id can be read, it is read (all but the empty, array and scalar messages).
    assert e.value.partial.answerable is (kind not in ("empty", "not_object"))


def test_huge_message_is_refused_fast_and_answered():
    raw = dumps(message(content={"x": "y" * 1_100_000}))
    with pytest.raises(ProtocolError) as e:
        parse_activation(raw)
    assert e.value.partial.activation_id == AID and e.value.partial.controller == "0"


@pytest.mark.parametrize("depth", [253, 254, 255, 1000, 1023])
def test_deep_values_are_written_back_without_recursion(depth):
    from whisk.protocol import loads

    text = nested_text(depth, "object")
    # Compared as text: == on such values would itself recurse too deeply.
    assert wire_dumps({"value": loads(text)}) == b'{"value":' + text + b"}"


POISON = (
    st.tuples(DEPTHS, SHAPES).map(lambda a: nested_text(*a))
    | RAW_NUMBERS
    | BAD_STRINGS
    | st.sampled_from([b"[]", b"{}", b"null", b"true", b'""'])
)


# -- Acks and pings, as the front reads them --


@FUZZ
@given(
    st.sampled_from(["transid", "activationId", "response", "isSystemError", "instance"]), POISON
)
def test_ack_poison_in_every_field(field, text):
    ack = {
        "transid": ["t", 1],
        "activationId": AID,
        "isSystemError": False,
        "instance": {"instance": 0, "userMemory": "1 B"},
        field: SENTINEL,
    }
    targets.ack(dumps(ack).replace(f'"{SENTINEL}"'.encode(), text))


def test_the_ack_seen_in_the_wild_is_refused():
    with pytest.raises(ProtocolError):
        parse_ack(b'{"transid":["t",1],"activationId":["x"],"isSystemError":false,"instance":{}}')


@FUZZ
@given(st.sampled_from(["name", "name.instance", "name.userMemory", "isEnabled"]), POISON)
def test_ping_poison_in_every_field(field, text):
    ping = {"name": {"instance": 0, "userMemory": "1024 MB"}, "isEnabled": True}
    if field.startswith("name."):
        ping["name"][field[5:]] = SENTINEL
    else:
        ping[field] = SENTINEL
    raw = dumps(ping).replace(f'"{SENTINEL}"'.encode(), text)
    targets.ping(raw)
    with pytest.raises(ProtocolError):
        parse_ping(b"[" + raw + b"]")
