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


class ProtocolError(ValueError):
    """A message or document that does not follow OpenWhisk's format."""

    def __init__(self, reason: str, partial: Partial | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.partial = partial or Partial()
