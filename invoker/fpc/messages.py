"""The scheduler mode's Kafka messages: container creation and deletion in, creation acks out.

Pure (no I/O), so the invoker parses with it and the stand-in scheduler
(``harness/fpc_scheduler.py``) writes with it: both sides agree by construction, and the unit
tests hold both to the shapes of openwhisk-protocol.md section 1.8. Field names follow the
Scala case classes ``ContainerCreationMessage``, ``ContainerDeletionMessage`` and
``ContainerCreationAckMessage`` (spray's ``jsonFormat``: every field present, no defaults
read). The action metadata (``whiskActionMetaData``) is kept verbatim: the invoker echoes it
in its ack as ``actionMetaData`` and reads only what it needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from whisk.protocol import QualifiedName, dumps, loads
from whisk.protocol.json import JSONDecodeError

CREATION_ID_RE = re.compile(r"[0-9a-f]{32}")  # CreationId.parse: 32 lowercase hex chars
WARM_UP_ACTION = QualifiedName("whisk.system", "warmUp")  # the scheduler's start-up probe

# ContainerCreationError values the scheduler can read back (its parser is case-insensitive
# but lacks ShuttingDownError and misspells NonExecutableActionError, so neither is sent).
CREATION_ERRORS = frozenset(
    {
        "NoAvailableInvokersError",
        "NoAvailableResourceInvokersError",
        "ResourceNotEnoughError",
        "WhiskError",
        "UnknownError",
        "TimeoutError",
        "DBFetchError",
        "BlackBoxError",
        "ZeroNamespaceLimit",
        "TooManyConcurrentRequests",
    }
)
_ERRORS_BY_UPPER = {e.upper(): e for e in CREATION_ERRORS}


class MalformedMessage(ValueError):
    """A container message that does not follow the scheduler's format. ``creation_id`` is
    set when the message still names a valid one, so the invoker can answer it with an
    error ack (:func:`error_ack_for`); ``fields`` is the JSON object, when it was one."""

    def __init__(
        self, reason: str, creation_id: str | None = None, fields: dict[str, Any] | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.creation_id = creation_id
        self.fields = fields or {}


def _object(raw: bytes | str | dict[str, Any], what: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = loads(raw)
    except (JSONDecodeError, UnicodeDecodeError) as e:
        raise MalformedMessage(f"{what} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise MalformedMessage(f"{what} is not a JSON object")
    return value


class _Reader:
    """Typed field access that names the message and the field in every error."""

    def __init__(self, obj: dict[str, Any], what: str) -> None:
        self.obj, self.what = obj, what
        cid = obj.get("creationId")
        self.creation_id = cid if isinstance(cid, str) and CREATION_ID_RE.fullmatch(cid) else None

    def fail(self, reason: str) -> MalformedMessage:
        return MalformedMessage(f"{self.what}: {reason}", self.creation_id, self.obj)

    def get(self, key: str) -> Any:
        if key not in self.obj:
            raise self.fail(f"{key} is missing")
        return self.obj[key]

    def text(self, key: str, *, empty: bool = False) -> str:
        value = self.get(key)
        if not isinstance(value, str) or (not empty and not value):
            raise self.fail(f"{key} must be a{'' if empty else ' non-empty'} string")
        return value

    def number(self, key: str) -> int:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(f"{key} must be a non-negative integer")
        return value

    def object(self, key: str) -> dict[str, Any]:
        value = self.get(key)
        if not isinstance(value, dict):
            raise self.fail(f"{key} must be an object")
        return value

    def transid(self) -> list[Any]:
        value = self.get("transid")
        if (
            not isinstance(value, list)
            or not 2 <= len(value) <= 4
            or not isinstance(value[0], str)
            or not value[0]
            or isinstance(value[1], bool)
            or not isinstance(value[1], int)
        ):
            raise self.fail('transid must be ["<id>", <start millis>, ...]')
        return value

    def action(self) -> QualifiedName:
        value = self.object("action")
        path, name, version = value.get("path"), value.get("name"), value.get("version")
        if not isinstance(path, str) or not path or not isinstance(name, str) or not name:
            raise self.fail("action must have a non-empty path and name")
        if version is not None and not isinstance(version, str):
            raise self.fail("action.version must be a string")
        binding = value.get("binding")
        if binding is not None and not isinstance(binding, str):
            raise self.fail("action.binding must be a string")
        return QualifiedName(path, name, version, binding)

    def revision(self) -> str | None:
        # DocRevision: the action document's _rev (the scheduler keys its queues with it),
        # JSON null for an action with no document (the warm-up creation's).
        if self.get("revision") is None:
            return None
        return self.text("revision")

    def metadata(self, key: str) -> dict[str, Any]:
        meta = self.object(key)
        exec_ = meta.get("exec")
        if not isinstance(exec_, dict) or not isinstance(exec_.get("kind"), str):
            raise self.fail(f"{key}.exec must be an object with a kind")
        for k in ("name", "namespace"):
            if not isinstance(meta.get(k), str):
                raise self.fail(f"{key}.{k} must be a string")
        return meta

    def required_creation_id(self) -> str:
        self.get("creationId")
        if self.creation_id is None:
            raise self.fail("creationId must be 32 lowercase hex characters")
        return self.creation_id


@dataclass(frozen=True, slots=True)
class ContainerCreation:
    """ContainerCreationMessage on ``<prefix>invoker<N>``: start a container for ``action``
    whose activation client pulls from ``scheduler_host:rpc_port``."""

    transid: list[Any]
    invocation_namespace: str
    action: QualifiedName
    revision: str | None
    metadata: dict[str, Any]  # whiskActionMetaData, verbatim
    scheduler_index: dict[str, Any]  # rootSchedulerIndex, verbatim ({"asString": "0"})
    scheduler_host: str
    rpc_port: int
    creation_id: str
    retry_count: int = 0

    @property
    def is_warm_up(self) -> bool:
        """The scheduler's start-up probe (``whisk.system/warmUp``, revision null, ``rpcPort``
        0, ``schedulerHost`` ""), or anything else naming no scheduler: drop it."""
        return (
            self.rpc_port == 0
            or not self.scheduler_host
            or (self.action.path == WARM_UP_ACTION.path and self.action.name == WARM_UP_ACTION.name)
        )

    @property
    def kind(self) -> str:
        return str(self.metadata["exec"]["kind"])

    @classmethod
    def from_json(cls, raw: bytes | str | dict[str, Any]) -> ContainerCreation:
        r = _Reader(_object(raw, "container creation"), "container creation")
        index = r.object("rootSchedulerIndex")
        if not isinstance(index.get("asString"), str):
            raise r.fail("rootSchedulerIndex.asString must be a string")
        return cls(
            transid=r.transid(),
            invocation_namespace=r.text("invocationNamespace"),
            action=r.action(),
            revision=r.revision(),
            metadata=r.metadata("whiskActionMetaData"),
            scheduler_index=index,
            scheduler_host=r.text("schedulerHost", empty=True),
            rpc_port=r.number("rpcPort"),
            creation_id=r.required_creation_id(),
            retry_count=r.number("retryCount"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action.to_json(),
            "creationId": self.creation_id,
            "invocationNamespace": self.invocation_namespace,
            "retryCount": self.retry_count,
            "revision": self.revision,
            "rootSchedulerIndex": self.scheduler_index,
            "schedulerHost": self.scheduler_host,
            "rpcPort": self.rpc_port,
            "transid": self.transid,
            "whiskActionMetaData": self.metadata,
        }


@dataclass(frozen=True, slots=True)
class ContainerDeletion:
    """ContainerDeletionMessage: remove the containers of this revision of ``action`` (the
    scheduler sends it when an action is updated and the old revision's queue goes away)."""

    transid: list[Any]
    invocation_namespace: str
    action: QualifiedName
    revision: str | None
    metadata: dict[str, Any]

    @classmethod
    def from_json(cls, raw: bytes | str | dict[str, Any]) -> ContainerDeletion:
        r = _Reader(_object(raw, "container deletion"), "container deletion")
        return cls(
            transid=r.transid(),
            invocation_namespace=r.text("invocationNamespace"),
            action=r.action(),
            revision=r.revision(),
            metadata=r.metadata("whiskActionMetaData"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action.to_json(),
            "invocationNamespace": self.invocation_namespace,
            "revision": self.revision,
            "transid": self.transid,
            "whiskActionMetaData": self.metadata,
        }


def parse_container_message(raw: bytes | str) -> ContainerCreation | ContainerDeletion:
    """What arrives on ``invoker<N>`` in this mode: a creation when the object has a
    ``creationId`` (as upstream's ``ContainerMessage`` reader decides), else a deletion.
    Raises :class:`MalformedMessage`."""
    obj = _object(raw, "container message")
    if "creationId" in obj:
        return ContainerCreation.from_json(obj)
    return ContainerDeletion.from_json(obj)


@dataclass(frozen=True, slots=True)
class CreationAck:
    """ContainerCreationAckMessage on ``<prefix>creationAck<S>``: the container for
    ``creation_id`` is up (sent just before its first fetch), or, with ``error`` (one of
    :data:`CREATION_ERRORS`) and ``reason``, could not be made."""

    transid: list[Any]
    creation_id: str
    invocation_namespace: str
    action: QualifiedName
    revision: str | None
    metadata: dict[str, Any]  # actionMetaData: the creation's whiskActionMetaData
    invoker: dict[str, Any]  # rootInvokerIndex: InvokerInstanceId JSON
    scheduler_host: str
    rpc_port: int
    retry_count: int = 0
    error: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.error is not None and self.error not in CREATION_ERRORS:
            raise ValueError(f"the scheduler cannot read the creation error {self.error!r}")

    @classmethod
    def for_creation(
        cls,
        creation: ContainerCreation,
        invoker: dict[str, Any],
        error: str | None = None,
        reason: str | None = None,
    ) -> CreationAck:
        return cls(
            transid=creation.transid,
            creation_id=creation.creation_id,
            invocation_namespace=creation.invocation_namespace,
            action=creation.action,
            revision=creation.revision,
            metadata=creation.metadata,
            invoker=invoker,
            scheduler_host=creation.scheduler_host,
            rpc_port=creation.rpc_port,
            retry_count=creation.retry_count,
            error=error,
            reason=reason,
        )

    @classmethod
    def from_json(cls, raw: bytes | str | dict[str, Any]) -> CreationAck:
        r = _Reader(_object(raw, "creation ack"), "creation ack")
        invoker = r.object("rootInvokerIndex")
        if isinstance(invoker.get("instance"), bool) or not isinstance(
            invoker.get("instance"), int
        ):
            raise r.fail("rootInvokerIndex.instance must be an integer")
        error, reason = r.obj.get("error"), r.obj.get("reason")
        if error is not None:
            # The scheduler reads the name case-insensitively, trimmed.
            known = _ERRORS_BY_UPPER.get(error.strip().upper()) if isinstance(error, str) else None
            if known is None:
                raise r.fail(f"error {error!r} is not a ContainerCreationError")
            error = known
        if reason is not None and not isinstance(reason, str):
            raise r.fail("reason must be a string")
        return cls(
            transid=r.transid(),
            creation_id=r.required_creation_id(),
            invocation_namespace=r.text("invocationNamespace"),
            action=r.action(),
            revision=r.revision(),
            metadata=r.metadata("actionMetaData"),
            invoker=invoker,
            scheduler_host=r.text("schedulerHost", empty=True),
            rpc_port=r.number("rpcPort"),
            retry_count=r.number("retryCount"),
            error=error,
            reason=reason,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "action": self.action.to_json(),
            "actionMetaData": self.metadata,
            "creationId": self.creation_id,
            "invocationNamespace": self.invocation_namespace,
            "retryCount": self.retry_count,
            "revision": self.revision,
            "rootInvokerIndex": self.invoker,
            "schedulerHost": self.scheduler_host,
            "rpcPort": self.rpc_port,
            "transid": self.transid,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def error_ack_for(
    error: MalformedMessage, invoker: dict[str, Any], code: str = "WhiskError"
) -> dict[str, Any] | None:
    """The error ack answering a malformed creation, or None when it names no valid
    ``creationId`` (then the invoker can only log it). The fields it does carry are echoed
    as received, so the scheduler can still find the creation it is waiting on."""
    if error.creation_id is None:
        return None
    if code not in CREATION_ERRORS:
        raise ValueError(f"the scheduler cannot read the creation error {code!r}")
    f = error.fields
    out = {
        "action": f.get("action"),
        "actionMetaData": f.get("whiskActionMetaData"),
        "creationId": error.creation_id,
        "invocationNamespace": f.get("invocationNamespace"),
        "retryCount": f.get("retryCount", 0),
        "revision": f.get("revision"),
        "rootInvokerIndex": invoker,
        "schedulerHost": f.get("schedulerHost"),
        "rpcPort": f.get("rpcPort"),
        "transid": f.get("transid"),
        "error": code,
        "reason": error.reason,
    }
    return out


def encode(message: ContainerCreation | ContainerDeletion | CreationAck) -> bytes:
    """The message as it goes on Kafka: compact UTF-8 JSON."""
    return dumps(message.to_json())
