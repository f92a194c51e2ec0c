"""Errors raised while reading wire formats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Partial:
    """What could be read from a message that failed to parse.

    With an ``activation_id`` and a ``controller`` the invoker can still answer with a
    whisk-error ack and store a fallback record, as the controller expects for every message.
    """

    activation_id: str | None = None
    controller: str | None = None
    transid: Any = None
    namespace: str | None = None
    subject: str | None = None
    action_path: str | None = None
    action_name: str | None = None
    action_version: str | None = None
    blocking: bool = False
    cause: str | None = None

    @property
    def answerable(self) -> bool:
        return self.activation_id is not None and self.controller is not None


# What made a message unreadable, as counted on ``/metrics`` (label ``kind``).
TOO_LARGE = "too_large"
EMPTY = "empty"
NOT_UTF8 = "not_utf8"
NOT_JSON = "not_json"
TOO_DEEP = "too_deep"
NUMBER = "number_out_of_range"
NOT_OBJECT = "not_object"
INVALID = "invalid_field"
INTERNAL = "internal"
KINDS = (TOO_LARGE, EMPTY, NOT_UTF8, NOT_JSON, TOO_DEEP, NUMBER, NOT_OBJECT, INVALID, INTERNAL)


class ProtocolError(ValueError):
    """A message or document that does not follow OpenWhisk's format. ``kind`` says which
    way it failed (one of :data:`KINDS`), for counting poison messages."""

    def __init__(self, reason: str, partial: Partial | None = None, kind: str = INVALID) -> None:
        super().__init__(reason)
        self.reason = reason
        self.partial = partial or Partial()
        self.kind = kind
