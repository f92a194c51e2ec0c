"""Hostile input never crashes the readers: every malformed message or action document is
refused with a ProtocolError (a clear reason), never another exception. Structured
generation (hypothesis) reaches every field of the activation message, the action document,
the runtime's /init and /run bodies, acks and pings; tests/fuzz holds the coverage-guided
(atheris) targets and their seed corpus, run for a bounded time by test_fuzz_atheris.py."""

import base64
import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import targets
from tests.unit.test_protocol_actions import doc
from tests.unit.test_protocol_messages import message
from whisk.protocol import ProtocolError, action_from_document, fallback_record, parse_activation
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


POISON = (
    st.tuples(DEPTHS, SHAPES).map(lambda a: nested_text(*a))
    | RAW_NUMBERS
    | BAD_STRINGS
    | st.sampled_from([b"[]", b"{}", b"null", b"true", b'""'])
)


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


# -- The runtime's /init and /run bodies, every field --

INIT_FIELDS = ["name", "main", "binary", "code", "env"]
ENV_NAMES = st.sampled_from(["A", "", "A=B", "A\x00", "\ud800", "é", "__OW_X", "a" * 300])


@FUZZ
@given(st.sampled_from(INIT_FIELDS), POISON)
def test_runtime_init_body_poison_in_every_field(field, text):
    value = {"name": "a", "main": "main", "binary": False, "code": "x=1", "env": {"A": "b"}}
    value[field] = SENTINEL
    targets.runtime_init(dumps({"value": value}).replace(f'"{SENTINEL}"'.encode(), text))


@FUZZ
@given(st.dictionaries(ENV_NAMES, json_values | st.just("a\x00b"), max_size=4))
def test_runtime_init_env_refuses_what_the_os_cannot_hold(env):
    body = json.dumps({"value": {"code": "x=1", "env": env}}).encode()
    targets.runtime_init(body)


@pytest.mark.parametrize(
    "env", [{"A=B": "x"}, {"=": "x"}, {"A\x00": "x"}, {"A": "a\x00b"}, {"": "x"}]
)
def test_runtime_init_env_names_the_os_cannot_hold_are_refused(env):
    """Refused with a 400 naming the variable: not dropped, not truncated, and not accepted
    to crash later where the action's environment is set."""
    from containers.runtimes.python_runtime import BadBody, parse_init

    with pytest.raises(BadBody, match="invalid variable name or value") as refused:
        parse_init(json.dumps({"value": {"code": "x=1", "env": env}}).encode())
    assert refused.value.status == 400


@FUZZ
@given(st.dictionaries(ENV_NAMES, json_values | st.just("a\x00b"), max_size=4))
def test_runtime_init_env_that_is_accepted_is_whole_and_settable(env):
    from containers.runtimes.python_runtime import BadBody, parse_init

    try:
        _, _, _, accepted = parse_init(json.dumps({"value": {"code": "x=1", "env": env}}).encode())
    except BadBody:
        return
    assert accepted.keys() == env.keys()  # nothing dropped
    with pytest.MonkeyPatch.context() as mp:
        for name, value in accepted.items():
            mp.setenv(name, value)  # os.putenv: raises on "=" or NUL


@pytest.mark.parametrize("key", ["a=b", "a\x00"])
def test_runtime_run_context_names_the_os_cannot_hold_are_refused(key):
    from containers.runtimes.python_runtime import BadBody, parse_run

    with pytest.raises(BadBody, match="invalid variable name or value"):
        parse_run(json.dumps({"value": {}, key: "x"}).encode())


RUN_FIELDS = ["value", "namespace", "action_name", "activation_id", "deadline", "api_key"]


@FUZZ
@given(st.sampled_from(RUN_FIELDS), POISON)
def test_runtime_run_body_poison_in_every_field(field, text):
    body = {k: "x" for k in RUN_FIELDS}
    body[field] = SENTINEL
    targets.runtime_run(dumps(body).replace(f'"{SENTINEL}"'.encode(), text))


@FUZZ
@given(st.dictionaries(ENV_NAMES, json_values, max_size=4))
def test_runtime_run_context_names(context):
    targets.runtime_run(json.dumps({"value": {}, **context}).encode())


def test_runtime_bodies_nested_too_deeply_get_a_clear_answer():
    from containers.runtimes.python_runtime import BadBody, parse_init, parse_run

    deep = nested_text(5000, "list")
    with pytest.raises(BadBody, match="nested too deeply"):
        parse_run(b'{"value":' + deep + b"}")
    with pytest.raises(BadBody, match="nested too deeply"):
        parse_init(b'{"value":{"code":"x","env":{"A":' + deep + b"}}}")


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


# -- The committed seed corpus stays green (every crash atheris ever found is in there) --


@pytest.mark.parametrize("target", sorted(targets.TARGETS))
def test_seed_corpus(target):
    from pathlib import Path

    folder = Path(targets.__file__).parent / "corpus" / target
    seeds = sorted(folder.iterdir())
    assert seeds, f"no seeds for {target}"
    for seed in seeds:
        targets.TARGETS[target](seed.read_bytes())


# -- The Node.js runtime's /init and /run parsers, through a long-lived node process --


class _NodeParsers:
    def __init__(self) -> None:
        import subprocess
        from pathlib import Path

        script = Path(targets.__file__).parent / "node_bodies.js"
        self.proc = subprocess.Popen(
            ["node", str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def __call__(self, which: str, body: bytes) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{which} {base64.b64encode(body).decode()}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def node_parsers():
    parsers = _NodeParsers()
    yield parsers
    parsers.close()


def _node_accepts_or_refuses(node_parsers, which: str, body: bytes) -> None:
    answer = node_parsers(which, body)
    assert "crash" not in answer, (answer, body[:200])


@FUZZ
@given(field=st.sampled_from(INIT_FIELDS), text=POISON)
def test_node_runtime_init_poison_in_every_field(node_parsers, field, text):
    value = {"name": "a", "main": "main", "binary": False, "code": "x=1", "env": {"A": "b"}}
    value[field] = SENTINEL
    body = dumps({"value": value}).replace(f'"{SENTINEL}"'.encode(), text)
    _node_accepts_or_refuses(node_parsers, "init", body)


@FUZZ
@given(env=st.dictionaries(ENV_NAMES, json_values | st.just("a\x00b"), max_size=4))
def test_node_runtime_init_env(node_parsers, env):
    body = json.dumps({"value": {"code": "x=1", "env": env}}).encode()
    _node_accepts_or_refuses(node_parsers, "init", body)


@FUZZ
@given(field=st.sampled_from(RUN_FIELDS), text=POISON)
def test_node_runtime_run_poison_in_every_field(node_parsers, field, text):
    body = {k: "x" for k in RUN_FIELDS}
    body[field] = SENTINEL
    raw = dumps(body).replace(f'"{SENTINEL}"'.encode(), text)
    _node_accepts_or_refuses(node_parsers, "run", raw)


@FUZZ
@given(raw=st.binary(max_size=300))
def test_node_runtime_random_bodies(node_parsers, raw):
    _node_accepts_or_refuses(node_parsers, "init", raw)
    _node_accepts_or_refuses(node_parsers, "run", raw)


def test_node_runtime_deep_env_is_refused_not_thrown(node_parsers):
    deep = nested_text(5000, "list")
    body = b'{"value":{"code":"x","env":{"A":' + deep + b"}}}"
    assert node_parsers("init", body) == {"refused": 400}
