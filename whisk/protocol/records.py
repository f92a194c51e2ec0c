"""Activation records (spec section 2.4) and the fallback record (section 4.8).

A record is an :class:`ActivationRecord`: immutable once built, by one builder per kind
(:func:`action_record`, :func:`kaas_record`, :func:`fallback_record`,
:func:`sequence_record`, :func:`trigger_record`), and turned into JSON in one place
(:meth:`ActivationRecord.to_json`), so a field is changed here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from whisk.protocol.actions import Action
from whisk.protocol.errors import Partial, ProtocolError
from whisk.protocol.json import dumps
from whisk.protocol.messages import ActivationMessage, Identity


class StatusCode(IntEnum):
    SUCCESS = 0
    APPLICATION_ERROR = 1
    DEVELOPER_ERROR = 2
    WHISK_ERROR = 3

    @property
    def status(self) -> str:
        """The ``status`` string the controller shows users."""
        return _STATUS_NAMES[self]


_STATUS_NAMES = {
    StatusCode.SUCCESS: "success",
    StatusCode.APPLICATION_ERROR: "application error",
    StatusCode.DEVELOPER_ERROR: "action developer error",
    StatusCode.WHISK_ERROR: "whisk internal error",
}

SEQUENCE = "sequence"  # the kind of a sequence, and the ``causedBy`` of what it started
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class ActivationResponse:
    status_code: StatusCode
    result: Any
    size: int | None = None

    @property
    def is_system_error(self) -> bool:
        return self.status_code == StatusCode.WHISK_ERROR

    @classmethod
    def error(cls, code: StatusCode, message: Any, size: int | None = None) -> ActivationResponse:
        return cls(code, {"error": message}, size)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"statusCode": int(self.status_code), "result": self.result}
        if self.size is not None:
            out["size"] = self.size
        return out

    @classmethod
    def from_json(cls, obj: Any) -> ActivationResponse:
        """A record's ``response`` read back; ProtocolError when it is not one."""
        what = "activation record response"
        if not isinstance(obj, dict):
            raise ProtocolError(f"{what} is not an object")
        code = _field(obj, "statusCode", int, what=what)
        if code not in _STATUS_NAMES:
            raise ProtocolError(f"{what} statusCode {code} is not one of 0-3")
        return cls(StatusCode(code), obj.get("result"), _field(obj, "size", int, None, what))


@dataclass(frozen=True, slots=True)
class ActivationRecord:
    """A WhiskActivation: what the result ack carries and the activations database stores.

    Immutable: what is learnt after it is built (the logs, collected once the result went
    out) makes a new value (:meth:`with_logs`). ``annotations`` are (key, value) pairs in
    the order they are sent; ``cause`` is the enclosing sequence's activation id."""

    namespace: str
    name: str
    subject: str
    activation_id: str
    start_ms: int
    end_ms: int
    duration_ms: int
    response: ActivationResponse
    logs: tuple[str, ...]
    version: str
    annotations: tuple[tuple[str, Any], ...]
    cause: str | None = None
    publish: bool = False

    def annotation(self, key: str, default: Any = None) -> Any:
        """The value of the first annotation ``key``, or ``default``."""
        return next((v for k, v in self.annotations if k == key), default)

    def with_logs(self, logs: Iterable[str]) -> ActivationRecord:
        """This record with ``logs`` (collected after the result was sent)."""
        return replace(self, logs=tuple(logs))

    def to_json(self) -> dict[str, Any]:
        """The record's JSON, field for field as the stock controller writes it; the one
        serializer of a record (acks and the database both go through it)."""
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "name": self.name,
            "subject": self.subject,
            "activationId": self.activation_id,
            "start": self.start_ms,
            "end": self.end_ms,
            "duration": self.duration_ms,
            "response": self.response.to_json(),
            "logs": list(self.logs),
            "version": self.version,
            "publish": self.publish,
            "annotations": [{"key": k, "value": v} for k, v in self.annotations],
        }
        if self.cause is not None:
            out["cause"] = self.cause
        return out

    @classmethod
    def from_json(cls, obj: Any) -> ActivationRecord:
        """A record read back (from a result ack or the activations database, whose
        ``_id``, ``_rev``, ``entityType`` and ``updated`` are left out); ProtocolError when
        it is not one. A missing ``duration`` is ``end - start``, as the controller shows it."""
        if not isinstance(obj, dict):
            raise ProtocolError("activation record is not an object")
        start = _field(obj, "start", int)
        end = _field(obj, "end", int)
        logs = _field(obj, "logs", list)
        annotations = _field(obj, "annotations", list)
        if not all(isinstance(line, str) for line in logs):
            raise ProtocolError("activation record logs must be strings")
        if not all(isinstance(a, dict) and isinstance(a.get("key"), str) for a in annotations):
            raise ProtocolError("activation record annotations must be {key, value} objects")
        return cls(
            namespace=_field(obj, "namespace", str),
            name=_field(obj, "name", str),
            subject=_field(obj, "subject", str),
            activation_id=_field(obj, "activationId", str),
            start_ms=start,
            end_ms=end,
            duration_ms=_field(obj, "duration", int, end - start),
            response=ActivationResponse.from_json(obj.get("response")),
            logs=tuple(logs),
            version=_field(obj, "version", str),
            annotations=tuple((a["key"], a.get("value")) for a in annotations),
            cause=_field(obj, "cause", str, None),
            publish=_field(obj, "publish", bool, False),
        )


def _field(
    obj: dict[str, Any],
    key: str,
    kind: type,
    default: Any = _MISSING,
    what: str = "activation record",
) -> Any:
    """``obj[key]`` when it is a ``kind`` (an int is never a bool), ``default`` when it is
    absent or null; ProtocolError naming it when it is required or of another type."""
    value = obj.get(key)
    if value is None:
        if default is _MISSING:
            raise ProtocolError(f"{what} has no {key}")
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"{what} {key} must be of type {kind.__name__}")
    return value


def _given(key: str, value: Any) -> tuple[tuple[str, Any], ...]:
    """The annotation ``key`` when it has a value, else none."""
    return () if value is None else ((key, value),)


def _caused_by(cause: str | None) -> tuple[tuple[str, Any], ...]:
    """The ``causedBy`` annotation of an activation started by a sequence."""
    return _given("causedBy", None if cause is None else SEQUENCE)


def action_record(
    msg: ActivationMessage,
    action: Action,
    *,
    start_ms: int,
    end_ms: int,
    response: ActivationResponse,
    init_time_ms: int | None,
    wait_time_ms: int,
    timed_out: bool,
    logs: Sequence[str] = (),
    cpu_time_ms: int | None = None,
) -> ActivationRecord:
    """An action's activation, ran in a container (or answered without running: start =
    end). ``initTime`` only when /init ran; ``cpuTime`` only when the run's CPU was measured
    on its own; the logs usually come later (:meth:`ActivationRecord.with_logs`)."""
    annotations: tuple[tuple[str, Any], ...] = (
        ("limits", action.limits.to_json()),
        ("path", action.path),
        ("kind", action.kind),
        ("timeout", timed_out),
        *_caused_by(msg.cause),
        *_given("initTime", init_time_ms),
        ("waitTime", wait_time_ms),
        *_given("binding", msg.action.binding),
        *_given("cpuTime", cpu_time_ms),
    )
    return ActivationRecord(
        namespace=msg.user.namespace,
        name=action.name,
        subject=msg.user.subject,
        activation_id=msg.activation_id,
        start_ms=start_ms,
        end_ms=end_ms,
        duration_ms=end_ms - start_ms,
        response=response,
        logs=tuple(logs),
        version=action.version,
        annotations=annotations,
        cause=msg.cause,
    )


def kaas_record(
    msg: ActivationMessage,
    action: Action,
    *,
    start_ms: int,
    end_ms: int,
    response: ActivationResponse,
    timed_out: bool,
) -> ActivationRecord:
    """A kTask's activation, ran by the GPU pool: no container, so no /init, no logs and
    no CPU time of its own; it waited from the transaction's start to ``start_ms``."""
    return action_record(
        msg,
        action,
        start_ms=start_ms,
        end_ms=end_ms,
        response=response,
        init_time_ms=None,
        wait_time_ms=max(0, start_ms - msg.transaction_start_ms),
        timed_out=timed_out,
    )


def fallback_record(
    partial: Partial, code: StatusCode, message: str, now_ms: int
) -> ActivationRecord:
    """A record for an activation that never reached a container (fetch failure, bad
    message, ...): start = end = now, kind ``unknown``."""
    if partial.activation_id is None:
        raise ValueError("a fallback record needs the activation id")
    path = partial.action_path or partial.namespace or "unknown"
    name = partial.action_name or "unknown"
    return ActivationRecord(
        namespace=partial.namespace or "unknown",
        name=name,
        subject=partial.subject or partial.namespace or "unknown",
        activation_id=partial.activation_id,
        start_ms=now_ms,
        end_ms=now_ms,
        duration_ms=0,
        response=ActivationResponse.error(code, message),
        logs=(),
        version=partial.action_version or "0.0.1",
        annotations=(("path", f"{path}/{name}"), ("kind", "unknown"), *_caused_by(partial.cause)),
        cause=partial.cause,
    )


def sequence_record(
    who: Identity,
    activation_id: str,
    *,
    path: str,
    name: str,
    version: str,
    binding: str | None,
    limits: Mapping[str, Any],
    response: ActivationResponse,
    components: Sequence[str],
    duration_ms: int,
    max_memory_mb: int | None,
    cause: str | None,
    start_ms: int,
    end_ms: int,
    wait_time_ms: int,
) -> ActivationRecord:
    """A sequence's activation, as the stock controller writes it: the last component's
    response, the components' activation ids as logs, the sum of their durations, and
    ``topmost`` unless an enclosing sequence (``cause``) started it. ``limits`` are the
    sequence's own, annotated with the largest component memory once a component ran."""
    annotations: tuple[tuple[str, Any], ...] = (
        ("topmost", cause is None),
        ("path", f"{path}/{name}"),
        ("kind", SEQUENCE),
        *_caused_by(cause),
        ("waitTime", wait_time_ms),
        *_given("binding", binding),
        *_given("limits", None if max_memory_mb is None else {**limits, "memory": max_memory_mb}),
    )
    return ActivationRecord(
        namespace=who.namespace,
        name=name,
        subject=who.subject,
        activation_id=activation_id,
        start_ms=start_ms,
        end_ms=end_ms,
        duration_ms=duration_ms,
        response=response,
        logs=tuple(components),
        version=version,
        annotations=annotations,
        cause=cause,
    )


def trigger_record(
    who: Identity,
    activation_id: str,
    *,
    name: str,
    version: str,
    payload: Any,
    rules: Iterable[Mapping[str, Any]],
    start_ms: int,
    end_ms: int,
) -> ActivationRecord:
    """A trigger fire's activation: its payload is the result, each rule's outcome (as an
    object) one compact JSON line of the logs; no annotations."""
    return ActivationRecord(
        namespace=who.namespace,
        name=name,
        subject=who.subject,
        activation_id=activation_id,
        start_ms=start_ms,
        end_ms=end_ms,
        duration_ms=end_ms - start_ms,
        response=ActivationResponse(StatusCode.SUCCESS, payload),
        logs=tuple(dumps(rule).decode() for rule in rules),
        version=version,
        annotations=(),
    )


def activation_document(record: ActivationRecord, now_ms: int) -> dict[str, Any]:
    """The stored form: ``_id`` is ``<invoking namespace>/<activationId>``."""
    return {
        "_id": f"{record.namespace}/{record.activation_id}",
        "entityType": "activation",
        "updated": now_ms,
        **record.to_json(),
    }
