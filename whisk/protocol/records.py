"""Activation records (spec section 2.4) and the fallback record (section 4.8)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from whisk.protocol.actions import Action
from whisk.protocol.errors import Partial
from whisk.protocol.messages import ActivationMessage


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


def activation_record(
    msg: ActivationMessage,
    action: Action,
    *,
    start_ms: int,
    end_ms: int,
    response: ActivationResponse,
    logs: list[str],
    init_time_ms: int | None,
    wait_time_ms: int,
    timed_out: bool,
) -> dict[str, Any]:
    """The WhiskActivation JSON, as sent in result acks and stored in the database."""
    annotations: list[dict[str, Any]] = [
        {"key": "limits", "value": action.limits.to_json()},
        {"key": "path", "value": action.path},
        {"key": "kind", "value": action.kind},
        {"key": "timeout", "value": timed_out},
    ]
    if msg.cause is not None:
        annotations.append({"key": "causedBy", "value": "sequence"})
    if init_time_ms is not None:
        annotations.append({"key": "initTime", "value": init_time_ms})
    annotations.append({"key": "waitTime", "value": wait_time_ms})
    if msg.action.binding is not None:
        annotations.append({"key": "binding", "value": msg.action.binding})
    record: dict[str, Any] = {
        "namespace": msg.user.namespace,
        "name": action.name,
        "subject": msg.user.subject,
        "activationId": msg.activation_id,
        "start": start_ms,
        "end": end_ms,
        "duration": end_ms - start_ms,
        "response": response.to_json(),
        "logs": logs,
        "version": action.version,
        "publish": False,
        "annotations": annotations,
    }
    if msg.cause is not None:
        record["cause"] = msg.cause
    return record


def fallback_record(
    partial: Partial, code: StatusCode, message: str, now_ms: int
) -> dict[str, Any]:
    """A record for an activation that never reached a container (fetch failure, bad
    message, ...): start = end = now, kind ``unknown``."""
    path = partial.action_path or partial.namespace or "unknown"
    name = partial.action_name or "unknown"
    annotations: list[dict[str, Any]] = [
        {"key": "path", "value": f"{path}/{name}"},
        {"key": "kind", "value": "unknown"},
    ]
    if partial.cause is not None:
        annotations.append({"key": "causedBy", "value": "sequence"})
    record: dict[str, Any] = {
        "namespace": partial.namespace or "unknown",
        "name": name,
        "subject": partial.subject or partial.namespace or "unknown",
        "activationId": partial.activation_id,
        "start": now_ms,
        "end": now_ms,
        "duration": 0,
        "response": ActivationResponse.error(code, message).to_json(),
        "logs": [],
        "version": partial.action_version or "0.0.1",
        "publish": False,
        "annotations": annotations,
    }
    if partial.cause is not None:
        record["cause"] = partial.cause
    return record


def activation_document(record: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The stored form: ``_id`` is ``<invoking namespace>/<activationId>``."""
    return {
        "_id": f"{record['namespace']}/{record['activationId']}",
        "entityType": "activation",
        "updated": now_ms,
        **record,
    }
