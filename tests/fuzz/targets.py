"""Fuzz targets: one function per parser of outside input, taking raw bytes.

Each target feeds the bytes to a parser and checks its contract: the input is either
accepted, and then usable downstream (written back, turned into ``/init`` and ``/run``
bodies, answered), or refused with the parser's own error. Any other exception, or a
broken invariant (AssertionError), is a crash for atheris and a failure for the tests.
"""

from __future__ import annotations

from collections.abc import Callable

from containers.runtimes import python_runtime
from whisk.protocol import (
    ProtocolError,
    StatusCode,
    action_from_document,
    dumps,
    fallback_record,
    loads,
    parse_activation,
)
from whisk.protocol.errors import KINDS
from whisk.protocol.json import JSONDecodeError
from whisk.protocol.limits import check_user_limits, payload_limit
from whisk.protocol.messages import combined_ack, parse_ack, parse_ping
from whisk.protocol.runtime import (
    init_body,
    interpret_init,
    interpret_run,
    run_body,
    unsupported_encryption,
)

KIND_DEFAULTS = {"python": "python:3.11", "nodejs": "nodejs:20"}
_ACTION_DOC = {
    "_id": "guest/hello",
    "_rev": "1-abc",
    "entityType": "action",
    "namespace": "guest",
    "name": "hello",
    "version": "0.0.1",
    "exec": {"kind": "python:3.11", "code": "def main(a):\n    return a\n"},
    "limits": {"timeout": 60000, "memory": 256, "logs": 10, "concurrency": 1},
    "annotations": [{"key": "provide-api-key", "value": True}],
}
ACTION = action_from_document(_ACTION_DOC)


def _refused(e: ProtocolError) -> None:
    assert e.reason, "a refusal must say why"
    assert e.kind in KINDS, e.kind
    p = e.partial
    if p.answerable:
        # What the invoker sends back for a poison message it can still answer.
        record = fallback_record(p, StatusCode.WHISK_ERROR, f"invalid: {e.reason}", 0)
        dumps(combined_ack(p.transid, record.to_json(), True, {"instance": 0}))
        assert "/" not in (p.activation_id or "")


def activation(data: bytes) -> None:
    """``invoker<N>`` messages, as far as the container: parse, answer, build both bodies."""
    try:
        msg = parse_activation(data)
    except ProtocolError as e:
        _refused(e)
        return
    assert "/" not in msg.activation_id and ".." not in msg.action.docid.split("/")
    assert loads(dumps(msg.to_json()))["activationId"] == msg.activation_id
    unsupported_encryption(msg)
    payload_limit(msg.user.limits)
    check_user_limits(ACTION, msg.user.limits, 2048)
    deadline = msg.transaction_start_ms + 60_000
    init = dumps(init_body(msg, ACTION, deadline))
    run = dumps(run_body(msg, ACTION, deadline))
    # The runtime reads what we write (or refuses it with a clear answer).
    for parse, body in ((python_runtime.parse_init, init), (python_runtime.parse_run, run)):
        try:
            parse(body)
        except python_runtime.BadBody as e:
            assert e.status in (400, 403) and e.message


def action_document(data: bytes) -> None:
    """Documents of the whisks database, as the store returns them."""
    try:
        doc = loads(data)
    except JSONDecodeError:
        doc = data  # not JSON: still must be refused cleanly
    try:
        action = action_from_document(doc, KIND_DEFAULTS)
    except ProtocolError as e:
        assert e.reason
        return
    assert action.docid and action.limits.memory_mb >= 0
    action.limits.to_json()
    dumps([list(a) for a in action.annotations])


def _runtime(parse: Callable[[bytes], object], data: bytes) -> None:
    try:
        parse(data)
    except python_runtime.BadBody as e:
        assert e.status in (400, 403) and e.message


def runtime_init(data: bytes) -> None:
    """The Python runtime's ``/init`` body."""
    _runtime(python_runtime.parse_init, data)


def runtime_run(data: bytes) -> None:
    """The Python runtime's ``/run`` body."""
    _runtime(python_runtime.parse_run, data)


def container_response(data: bytes) -> None:
    """What a container answers to ``/init`` and ``/run`` (first byte picks the status)."""
    status = (200, 400, 404, 500, 502)[data[0] % 5] if data else 200
    body = data[1:]
    response = interpret_run(status, body, max_payload=4096)
    dumps(response.to_json())
    failed = interpret_init(status, body)
    if failed is not None:
        dumps(failed.to_json())


def ack(data: bytes) -> None:
    """Acks on ``completed<C>``, as the front reads them."""
    try:
        a = parse_ack(data)
    except ProtocolError as e:
        assert e.reason and e.kind in KINDS
        return
    assert isinstance(a.activation_id, str) and a.activation_id
    assert a.instance is None or a.instance >= 0


def ping(data: bytes) -> None:
    """Pings on ``health``, as the front reads them."""
    try:
        p = parse_ping(data)
    except ProtocolError as e:
        assert e.reason and e.kind in KINDS
        return
    assert p.instance >= 0 and p.user_memory_bytes >= 0


TARGETS: dict[str, Callable[[bytes], None]] = {
    "activation": activation,
    "action_document": action_document,
    "runtime_init": runtime_init,
    "runtime_run": runtime_run,
    "container_response": container_response,
    "ack": ack,
    "ping": ping,
}
