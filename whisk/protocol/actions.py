"""Action documents of the whisks database (spec section 2.2).

``action_from_document`` turns a stored document into an :class:`Action`. Code kept in a
real CouchDB attachment is named by ``code_attachment``; the store fetches those bytes and
calls :meth:`Action.with_attachment`.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field, replace
from typing import Any

from whisk.protocol.errors import INTERNAL, ProtocolError

DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_MEMORY_MB = 256
DEFAULT_LOGS_MB = 10
MAX_CODE_BYTES = 48 * 1024 * 1024  # the controller's exec size limit

_BASE64_RE = re.compile(r"[A-Za-z0-9+/]*={0,2}")


@dataclass(frozen=True, slots=True)
class ActionLimits:
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    memory_mb: int = DEFAULT_MEMORY_MB
    logs_mb: int = DEFAULT_LOGS_MB
    concurrency: int = 1
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The ``limits`` annotation value: the action's limits as stored."""
        if self.raw:
            return self.raw
        return {
            "timeout": self.timeout_ms,
            "memory": self.memory_mb,
            "logs": self.logs_mb,
            "concurrency": self.concurrency,
        }


@dataclass(frozen=True, slots=True)
class Action:
    """An executable action, code resolved (or named as an attachment still to fetch)."""

    docid: str
    revision: str | None
    namespace: str
    name: str
    version: str
    kind: str
    limits: ActionLimits
    annotations: tuple[tuple[str, Any], ...] = ()
    parameters: tuple[dict[str, Any], ...] = ()
    code: str | None = None
    binary: bool = False
    main: str | None = None
    image: str | None = None
    code_attachment: str | None = None

    @property
    def path(self) -> str:
        """The ``path`` annotation: ``namespace[/package]/name``."""
        return self.docid

    @property
    def is_blackbox(self) -> bool:
        return self.kind == "blackbox"

    def annotation(self, key: str, default: Any = None) -> Any:
        for k, v in self.annotations:
            if k == key:
                return v
        return default

    @property
    def provide_api_key(self) -> bool:
        """The API key is exported unless ``provide-api-key`` is present and falsy."""
        for k, v in self.annotations:
            if k == "provide-api-key":
                return bool(v)
        return True

    def with_attachment(self, data: bytes) -> Action:
        return replace(self, code=encode_code(data, self.binary), code_attachment=None)


def decode_attachment(name: str) -> bytes | None:
    """The bytes of an inlined ``mem:<base64url>`` attachment, or None for stored ones."""
    if not name.startswith("mem:"):
        return None
    payload = name[4:]
    try:
        padded = payload + "=" * (-len(payload) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as e:
        raise ProtocolError(f"inline attachment is not valid base64url: {e}") from None


def encode_code(data: bytes, binary: bool) -> str:
    """What ``/init`` receives: base64 for binary code (zips), UTF-8 text otherwise."""
    if binary:
        return base64.b64encode(data).decode("ascii")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("action code is not UTF-8 text and not marked binary") from None


def looks_binary(code: str) -> bool:
    """The controller's rule for inline code: a base64 blob counts as binary (a zip)."""
    t = code.strip()
    return bool(t) and len(t) % 4 == 0 and _BASE64_RE.fullmatch(t) is not None


# A Docker image reference: [registry[:port]/]path[:tag][@digest], lower-case path parts.
_IMAGE_RE = re.compile(
    r"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?"
)


def valid_image(image: str) -> bool:
    """Whether ``image`` is a Docker image reference (``--docker IMAGE``), so a bad name is
    refused when the action is created, not when a container is."""
    return len(image) <= 255 and _IMAGE_RE.fullmatch(image) is not None


def resolve_kind(kind: str, defaults: dict[str, str]) -> str:
    k = kind.strip().lower()
    if k.endswith(":default"):
        family = k.split(":", 1)[0]
        if family not in defaults:
            raise ProtocolError(f"no default runtime for kind {kind[:64]!r}")
        return defaults[family]
    return k


def _int_limit(limits: dict[str, Any], key: str, default: int) -> int:
    v = limits.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or v > 2**31:
        raise ProtocolError(f"limits.{key} must be a non-negative number")
    return int(v)


def _limits(value: Any) -> ActionLimits:
    if value is None:
        return ActionLimits()
    if not isinstance(value, dict):
        raise ProtocolError("limits must be an object")
    return ActionLimits(
        timeout_ms=_int_limit(value, "timeout", DEFAULT_TIMEOUT_MS),
        memory_mb=_int_limit(value, "memory", DEFAULT_MEMORY_MB),
        logs_mb=_int_limit(value, "logs", DEFAULT_LOGS_MB),
        concurrency=max(1, _int_limit(value, "concurrency", 1)),
        raw=value,
    )


def _pairs(value: Any, what: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(p, dict) and isinstance(p.get("key"), str) for p in value
    ):
        raise ProtocolError(f"{what} must be a list of {{key, value}} objects")
    return value


def action_from_document(
    doc: Any, kind_defaults: dict[str, str] | None = None, revision: str | None = None
) -> Action:
    """Read an action document in any stored form (inline code, ``mem:`` names, attachments,
    binary zips, blackbox images). Total: anything unusable raises :class:`ProtocolError`,
    never another exception."""
    try:
        return _action_from_document(doc, kind_defaults, revision)
    except ProtocolError:
        raise
    except Exception as e:  # RecursionError, OverflowError, ...: a document we cannot read
        raise ProtocolError(
            f"action document could not be read ({e.__class__.__name__})", kind=INTERNAL
        ) from None


def _action_from_document(
    doc: Any, kind_defaults: dict[str, str] | None, revision: str | None
) -> Action:
    if not isinstance(doc, dict):
        raise ProtocolError("action document is not an object")
    entity_type = doc.get("entityType", "action")
    if entity_type != "action":
        shown = entity_type if isinstance(entity_type, str) else type(entity_type).__name__
        raise ProtocolError(f"document is a {shown[:64]!r}, not an action")
    docid = doc.get("_id")
    namespace, name = doc.get("namespace"), doc.get("name")
    if not (
        isinstance(docid, str) and isinstance(namespace, str) and isinstance(name, str)
    ) or not (docid and namespace and name):
        raise ProtocolError("action document lacks _id, namespace or name")
    exec_ = doc.get("exec")
    if not isinstance(exec_, dict) or not isinstance(exec_.get("kind"), str):
        raise ProtocolError("action document has no exec.kind")
    kind = resolve_kind(exec_["kind"], kind_defaults or {})
    if kind == "sequence":
        raise ProtocolError("sequences are run by the controller, not by an invoker")
    version = doc.get("version", "0.0.1")
    if not isinstance(version, str):
        raise ProtocolError("version must be a string")
    main = exec_.get("main")
    if main is not None and not isinstance(main, str):
        raise ProtocolError("exec.main must be a string")
    image = exec_.get("image")
    if kind == "blackbox" and not (isinstance(image, str) and valid_image(image)):
        raise ProtocolError("blackbox action has no valid exec.image")
    binary = exec_.get("binary", False)
    if not isinstance(binary, bool):
        raise ProtocolError("exec.binary must be a boolean")
    code_value = exec_.get("code", exec_.get("jar"))
    if kind == "blackbox" and isinstance(code_value, str) and not code_value.strip():
        code_value = None  # as the stock controller: blank code is no code (pure blackbox)
    code: str | None = None
    attachment: str | None = None
    if isinstance(code_value, str):
        if len(code_value) > MAX_CODE_BYTES:
            raise ProtocolError("inline code exceeds the size limit")
        code, binary = code_value, looks_binary(code_value)
    elif isinstance(code_value, dict):
        att = code_value.get("attachmentName")
        if not isinstance(att, str) or not att:
            raise ProtocolError("exec.code attachment has no attachmentName")
        inline = decode_attachment(att)
        if inline is not None:
            code = encode_code(inline, binary)
        else:
            attachment = stored_attachment_name(att)
    elif code_value is not None:
        raise ProtocolError("exec.code must be a string or an attachment reference")
    elif kind != "blackbox":
        raise ProtocolError("action has no code")
    annotations = tuple(
        (a["key"], a.get("value")) for a in _pairs(doc.get("annotations"), "annotations")
    )
    rev = doc.get("_rev", revision)
    return Action(
        docid=docid,
        revision=rev if isinstance(rev, str) else None,
        namespace=namespace,
        name=name,
        version=version,
        kind=kind,
        limits=_limits(doc.get("limits")),
        annotations=annotations,
        parameters=tuple(_pairs(doc.get("parameters"), "parameters")),
        code=code,
        binary=binary,
        main=main,
        image=image if isinstance(image, str) else None,
        code_attachment=attachment,
    )


_ATTACHMENT_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")


def stored_attachment_name(name: str) -> str:
    """``couch:<uuid>`` or a legacy relative name -> the CouchDB attachment's name."""
    if name.startswith("couch:"):
        name = name[len("couch:") :]
    elif ":" in name:
        raise ProtocolError(f"attachment store {name.split(':', 1)[0]!r} is not supported")
    if not _ATTACHMENT_RE.fullmatch(name):
        raise ProtocolError("attachment name has invalid characters")
    return name
