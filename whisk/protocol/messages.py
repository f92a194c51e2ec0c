"""Kafka messages: ActivationMessage in, acknowledgements and pings out.

See ``openwhisk-protocol.md`` sections 1.3-1.6. The ``transid`` JSON value is kept exactly
as received and echoed verbatim in every ack: the controller compares it structurally to
recognise its health-action acks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from whisk.protocol import errors
from whisk.protocol.errors import Partial, ProtocolError
from whisk.protocol.json import JSONDecodeError, loads
from whisk.protocol.limits import parse_byte_size
from whisk.protocol.salvage import classify, shallow_object

T = TypeVar("T")

MAX_MESSAGE_BYTES = 1_054_644  # whisk.activation.payload.max (1 MiB) + serdes overhead
MAX_TRANSID_DEPTH = 16  # a transid with its chain of parents: the controller nests a few

_ID_RE = re.compile(r"[A-Za-z0-9]{1,64}")
_CONTROLLER_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
# An entity path segment: OpenWhisk allows letters, digits, and `@ . _ - space` (not leading).
_SEGMENT_RE = re.compile(r"[A-Za-z0-9_@.\- ]{1,256}")


@dataclass(frozen=True, slots=True)
class QualifiedName:
    """FullyQualifiedEntityName: ``path`` is ``namespace[/package]``."""

    path: str
    name: str
    version: str | None = None
    binding: str | None = None

    @property
    def docid(self) -> str:
        return f"{self.path}/{self.name}"

    @property
    def namespace(self) -> str:
        return self.path.split("/", 1)[0]

    @property
    def package(self) -> str | None:
        parts = self.path.split("/", 1)
        return parts[1] if len(parts) == 2 else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "name": self.name}
        if self.version is not None:
            out["version"] = self.version
        if self.binding is not None:
            out["binding"] = self.binding
        return out


@dataclass(frozen=True, slots=True)
class Identity:
    subject: str
    namespace: str
    namespace_uuid: str
    authkey: dict[str, Any]
    rights: tuple[str, ...] = ()
    limits: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "namespace": {"name": self.namespace, "uuid": self.namespace_uuid},
            "authkey": self.authkey,
            "rights": list(self.rights),
            "limits": self.limits,
        }


@dataclass(frozen=True, slots=True)
class ActivationMessage:
    transid: Any
    action: QualifiedName
    revision: str | None
    user: Identity
    activation_id: str
    controller: str
    blocking: bool
    content: Any = None
    init_args: tuple[str, ...] = ()
    locked_args: dict[str, str] = field(default_factory=dict)
    cause: str | None = None
    trace_context: dict[str, str] | None = None

    @property
    def transaction_id(self) -> str:
        return str(self.transid[0])

    @property
    def transaction_start_ms(self) -> int:
        return int(self.transid[1])

    def partial(self) -> Partial:
        return Partial(
            activation_id=self.activation_id,
            controller=self.controller,
            transid=self.transid,
            namespace=self.user.namespace,
            subject=self.user.subject,
            action_path=self.action.path,
            action_name=self.action.name,
            action_version=self.action.version,
            blocking=self.blocking,
            cause=self.cause,
        )

    def to_json(self) -> dict[str, Any]:
        """The controller's wire form (used by our front and by tests)."""
        out: dict[str, Any] = {
            "transid": self.transid,
            "action": self.action.to_json(),
            "revision": self.revision,
            "user": self.user.to_json(),
            "activationId": self.activation_id,
            "rootControllerIndex": {"asString": self.controller, "instanceType": "controller"},
            "blocking": self.blocking,
            "initArgs": list(self.init_args),
            "lockedArgs": self.locked_args,
        }
        if self.content is not None:
            out["content"] = self.content
        if self.cause is not None:
            out["cause"] = self.cause
        if self.trace_context is not None:
            out["traceContext"] = self.trace_context
        return out


def _str(value: Any, what: str, partial: Partial, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"{what} must be a string", partial)
    if pattern is not None and not pattern.fullmatch(value):
        raise ProtocolError(f"{what} has an invalid value", partial)
    return value


def _valid_transid(value: Any) -> bool:
    """``[id, startMillis]`` plus an optional extra-logging flag and/or a parent transid of
    the same form, nested at most :data:`MAX_TRANSID_DEPTH` levels (checked without
    recursion: a message nested a thousand levels deep must not exhaust the stack)."""
    pending = [value]
    for _ in range(MAX_TRANSID_DEPTH):
        if not pending:
            return True
        value = pending.pop()
        if not isinstance(value, list) or len(value) < 2 or len(value) > 4:
            return False
        if not isinstance(value[0], str) or not 0 < len(value[0]) <= 256:
            return False
        if isinstance(value[1], bool) or not isinstance(value[1], int):
            return False
        for extra in value[2:]:
            if not isinstance(extra, bool):
                pending.append(extra)
        if len(pending) > 1:
            return False  # at most one parent per level
    return not pending


def _qualified_name(value: Any, partial: Partial) -> QualifiedName:
    if isinstance(value, str):
        parts = value.strip("/").split("/")
        if len(parts) < 2 or len(parts) > 3:
            raise ProtocolError("action must name namespace[/package]/name", partial)
        path, name, version, binding = "/".join(parts[:-1]), parts[-1], None, None
    elif isinstance(value, dict):
        path = _str(value.get("path"), "action.path", partial)
        name = _str(value.get("name"), "action.name", partial)
        version = value.get("version")
        if version is not None:
            version = _str(version, "action.version", partial)
        binding = value.get("binding")
        if binding is not None:
            binding = _str(binding, "action.binding", partial)
    else:
        raise ProtocolError("action must be an object or a string", partial)
    segments = [*path.split("/"), name]
    if len(segments) > 3 or not all(_SEGMENT_RE.fullmatch(s) for s in segments):
        raise ProtocolError("action name or path has invalid characters", partial)
    if any(s in (".", "..") for s in segments):
        raise ProtocolError("action name or path has invalid segments", partial)
    return QualifiedName(path, name, version, binding)


def _identity(value: Any, partial: Partial) -> Identity:
    if not isinstance(value, dict):
        raise ProtocolError("user must be an object", partial)
    subject = _str(value.get("subject"), "user.subject", partial)
    ns = value.get("namespace")
    if not isinstance(ns, dict):
        raise ProtocolError("user.namespace must be an object", partial)
    name = _str(ns.get("name"), "user.namespace.name", partial, _SEGMENT_RE)
    uuid = ns.get("uuid", "")
    if not isinstance(uuid, str):
        raise ProtocolError("user.namespace.uuid must be a string", partial)
    authkey = value.get("authkey", {})
    if not isinstance(authkey, dict):
        raise ProtocolError("user.authkey must be an object", partial)
    rights = value.get("rights", [])
    if not isinstance(rights, list) or not all(isinstance(r, str) for r in rights):
        raise ProtocolError("user.rights must be a list of strings", partial)
    limits = value.get("limits", {})
    if not isinstance(limits, dict):
        raise ProtocolError("user.limits must be an object", partial)
    return Identity(subject, name, uuid, authkey, tuple(rights), limits)


def _salvage(obj: dict[str, Any]) -> Partial:
    """Read what can be read for an error answer, never raising."""

    def s(v: Any, pattern: re.Pattern[str] | None = None) -> str | None:
        if isinstance(v, str) and (pattern is None or pattern.fullmatch(v)):
            return v
        return None

    rci = obj.get("rootControllerIndex")
    user = obj.get("user")
    user = user if isinstance(user, dict) else {}
    ns = user.get("namespace")
    ns = ns if isinstance(ns, dict) else {}
    action = obj.get("action")
    path = name = version = None
    if isinstance(action, dict):
        path, name, version = s(action.get("path")), s(action.get("name")), s(action.get("version"))
    elif isinstance(action, str) and "/" in action.strip("/"):
        path, _, name = action.strip("/").rpartition("/")
    transid = obj.get("transid")
    return Partial(
        activation_id=s(obj.get("activationId"), _ID_RE),
        controller=s(rci.get("asString"), _CONTROLLER_RE) if isinstance(rci, dict) else None,
        transid=transid if _valid_transid(transid) else ["sid_invalid", 0],
        namespace=s(ns.get("name"), _SEGMENT_RE) or s(user.get("subject"), _SEGMENT_RE),
        subject=s(user.get("subject")),
        action_path=path,
        action_name=name,
        action_version=version,
        blocking=obj.get("blocking") is True,
        cause=s(obj.get("cause"), _ID_RE),
    )


_JSON_TYPES = {
    type(None): "null",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "number",
    float: "number",
}


def _json_type(value: Any) -> str:
    """The JSON name of a value that is not an object (what the codec reads: no other)."""
    return _JSON_TYPES[type(value)]


def _salvage_raw(raw: Any) -> Partial:
    """What an unparseable message still tells, read leniently; never raises."""
    try:
        return _salvage(shallow_object(raw))
    except Exception:
        return Partial()


def parse_activation(raw: bytes | bytearray | memoryview | str) -> ActivationMessage:
    """Parse a controller's ActivationMessage, accepting every form the spec lists.

    Total: any input either parses or raises :class:`ProtocolError` (with what could be
    salvaged for an answer); no other exception escapes, whatever the nesting, size,
    encoding or numbers."""
    try:
        return _parse_activation(raw)
    except ProtocolError:
        raise
    except Exception as e:  # RecursionError, MemoryError, OverflowError, ...: still poison
        raise ProtocolError(
            f"message could not be read ({e.__class__.__name__})",
            _salvage_raw(raw),
            errors.INTERNAL,
        ) from None


def _parse_activation(raw: bytes | bytearray | memoryview | str) -> ActivationMessage:
    if not isinstance(raw, bytes | bytearray | memoryview | str):
        raise ProtocolError(f"message is a {raw.__class__.__name__}, not bytes", kind=errors.EMPTY)
    if len(raw) == 0:
        raise ProtocolError("message is empty", kind=errors.EMPTY)
    if len(raw) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            f"message of {len(raw)} bytes exceeds {MAX_MESSAGE_BYTES} bytes",
            _salvage_raw(raw),
            errors.TOO_LARGE,
        )
    try:
        obj = loads(raw)
    except (JSONDecodeError, UnicodeDecodeError) as e:
        raise ProtocolError(
            f"message is not valid JSON: {e}", _salvage_raw(raw), classify(raw, e)
        ) from None
    if not isinstance(obj, dict):
        raise ProtocolError(
            f"message is a JSON {_json_type(obj)}, not an object", kind=errors.NOT_OBJECT
        )
    partial = _salvage(obj)
    transid = obj.get("transid")
    if not _valid_transid(transid):
        raise ProtocolError("transid must be [id, startMillis, ...]", partial)
    activation_id = _str(obj.get("activationId"), "activationId", partial, _ID_RE)
    rci = obj.get("rootControllerIndex")
    if not isinstance(rci, dict):
        raise ProtocolError("rootControllerIndex must be an object", partial)
    controller = _str(rci.get("asString"), "rootControllerIndex.asString", partial, _CONTROLLER_RE)
    action = _qualified_name(obj.get("action"), partial)
    revision = obj.get("revision")
    if revision is not None and not isinstance(revision, str):
        raise ProtocolError("revision must be a string or null", partial)
    user = _identity(obj.get("user"), partial)
    blocking = obj.get("blocking", False)
    if not isinstance(blocking, bool):
        raise ProtocolError("blocking must be a boolean", partial)
    content = obj.get("content")
    if content is not None and not isinstance(content, dict | list):
        raise ProtocolError("content must be an object or an array", partial)
    init_args = obj.get("initArgs", [])
    if not isinstance(init_args, list) or not all(isinstance(a, str) for a in init_args):
        raise ProtocolError("initArgs must be a list of strings", partial)
    locked_args = obj.get("lockedArgs", {})
    if not isinstance(locked_args, dict) or not all(
        isinstance(v, str) for v in locked_args.values()
    ):
        raise ProtocolError("lockedArgs must map names to encryption schemes", partial)
    cause = obj.get("cause")
    if cause is not None:
        cause = _str(cause, "cause", partial, _ID_RE)
    trace = obj.get("traceContext")
    if trace is not None and not isinstance(trace, dict):
        raise ProtocolError("traceContext must be an object", partial)
    return ActivationMessage(
        transid=transid,
        action=action,
        revision=revision,
        user=user,
        activation_id=activation_id,
        controller=controller,
        blocking=blocking,
        content=content,
        init_args=tuple(init_args),
        locked_args=locked_args,
        cause=cause,
        trace_context=trace,
    )


@dataclass(frozen=True, slots=True)
class InvokerInstance:
    """InvokerInstanceId as the controller reads it from pings and acks."""

    instance: int
    user_memory_bytes: int
    unique_name: str | None = None
    displayed_name: str | None = None
    tags: tuple[str, ...] = ()
    dedicated_namespaces: tuple[str, ...] = ()

    def to_json(self, busy_memory_bytes: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instance": self.instance,
            "userMemory": f"{self.user_memory_bytes} B",
            "instanceType": "invoker",
            "tags": list(self.tags),
            "dedicatedNamespaces": list(self.dedicated_namespaces),
        }
        if busy_memory_bytes is not None:
            out["busyMemory"] = f"{busy_memory_bytes} B"
        if self.unique_name is not None:
            out["uniqueName"] = self.unique_name
        if self.displayed_name is not None:
            out["displayedName"] = self.displayed_name
        return out

    @property
    def label(self) -> str:
        """``invoker<N>[/<uniqueName>][/<displayedName>]`` as the admin endpoints print it."""
        parts = [f"invoker{self.instance}"]
        parts += [p for p in (self.unique_name, self.displayed_name) if p]
        return "/".join(parts)


def completion_ack(
    transid: Any, activation_id: str, system_error: bool, instance: dict[str, Any]
) -> dict[str, Any]:
    """CompletionMessage: frees the activation's slot in the controller."""
    return {
        "transid": transid,
        "activationId": activation_id,
        "isSystemError": system_error,
        "instance": instance,
    }


def result_ack(transid: Any, response: dict[str, Any] | str) -> dict[str, Any]:
    """ResultMessage: the record (or, shrunk, just its activation id) for a blocking caller."""
    return {"transid": transid, "response": response}


def combined_ack(
    transid: Any, response: dict[str, Any] | str, system_error: bool, instance: dict[str, Any]
) -> dict[str, Any]:
    """CombinedCompletionAndResultMessage; ``response`` is the activation id when shrunk."""
    return {
        "transid": transid,
        "response": response,
        "isSystemError": system_error,
        "instance": instance,
    }


def ping_message(instance: dict[str, Any], enabled: bool = True) -> dict[str, Any]:
    return {"name": instance, "isEnabled": enabled}


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledgement on ``completed<C>`` as the controller reads it: a ResultMessage
    (``response`` only), a CompletionMessage (``instance`` only) or both combined.
    ``record`` is the activation record, None when shrunk to the id or absent."""

    activation_id: str
    transid: Any
    has_response: bool
    record: dict[str, Any] | None
    instance: int | None  # the invoker, for completions; None for a result alone
    system_error: bool


def _total(parse: Callable[[Any], T], what: str, raw: Any) -> T:
    """``parse(raw)``, total like :func:`parse_activation`: any other exception becomes a
    ProtocolError of kind ``internal``."""
    try:
        return parse(raw)
    except ProtocolError:
        raise
    except Exception as e:
        raise ProtocolError(
            f"{what} could not be read ({e.__class__.__name__})", kind=errors.INTERNAL
        ) from None


def parse_ack(raw: bytes | bytearray | memoryview | str) -> Ack:
    """Read one ack; total like :func:`parse_activation` (ProtocolError or an Ack)."""
    return _total(_parse_ack, "ack", raw)


def _object(raw: Any, what: str) -> dict[str, Any]:
    if not isinstance(raw, bytes | bytearray | memoryview | str) or len(raw) == 0:
        raise ProtocolError(f"{what} is empty", kind=errors.EMPTY)
    if len(raw) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"{what} of {len(raw)} bytes is too large", kind=errors.TOO_LARGE)
    try:
        obj = loads(raw)
    except (JSONDecodeError, UnicodeDecodeError) as e:
        raise ProtocolError(f"{what} is not valid JSON: {e}", kind=classify(raw, e)) from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what} is a JSON {_json_type(obj)}", kind=errors.NOT_OBJECT)
    return obj


def _parse_ack(raw: Any) -> Ack:
    obj = _object(raw, "ack")
    response = obj.get("response")
    aid = obj.get("activationId")
    record: dict[str, Any] | None = None
    if isinstance(response, dict):
        record = response
        aid = response.get("activationId", aid)
    elif isinstance(response, str):
        aid = response
    elif response is not None:
        raise ProtocolError("ack response must be a record or an activation id")
    if not isinstance(aid, str) or not _ID_RE.fullmatch(aid):
        raise ProtocolError("ack has no valid activationId")
    instance: int | None = None
    if "instance" in obj:
        inst = obj["instance"]
        n = inst.get("instance") if isinstance(inst, dict) else None
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 2**31:
            raise ProtocolError("ack instance must be an InvokerInstanceId")
        instance = n
    elif response is None:
        raise ProtocolError("ack has neither a response nor an instance")
    system_error = obj.get("isSystemError", False)
    if not isinstance(system_error, bool):
        raise ProtocolError("ack isSystemError must be a boolean")
    return Ack(aid, obj.get("transid"), response is not None, record, instance, system_error)


@dataclass(frozen=True, slots=True)
class Ping:
    """A PingMessage on ``health``."""

    instance: int
    user_memory_bytes: int
    enabled: bool
    name: dict[str, Any]  # the InvokerInstanceId as sent


def parse_ping(raw: bytes | bytearray | memoryview | str) -> Ping:
    """Read one ping; total like :func:`parse_activation`."""
    return _total(_parse_ping, "ping", raw)


def _parse_ping(raw: Any) -> Ping:
    obj = _object(raw, "ping")
    name = obj.get("name")
    if not isinstance(name, dict):
        raise ProtocolError("ping name must be an InvokerInstanceId")
    n = name.get("instance")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 2**31:
        raise ProtocolError("ping instance must be a non-negative integer")
    memory = parse_byte_size(name.get("userMemory", 0))
    if memory is None or memory < 0:
        raise ProtocolError("ping userMemory must be a byte size")
    enabled = obj.get("isEnabled", True)
    if not isinstance(enabled, bool):
        raise ProtocolError("ping isEnabled must be a boolean")
    return Ping(n, memory, enabled, name)
