"""Translating between the REST API's JSON and the action documents stored in the database,
and what every entity kind shares (parameters, annotations, versions, views).

Documents keep the stock controller's exact format (``whisk.protocol.controller``), so a
stock controller and our invoker read each other's documents.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from front.http import BadRequest
from front.names import valid_name
from gpu.kaas.action import KIND as KAAS
from gpu.kaas.action import validate as validate_ktask
from gpu.kaas.spec import KTaskError
from whisk.protocol.actions import resolve_kind, valid_image
from whisk.protocol.controller import action_document
from whisk.protocol.records import SEQUENCE, StatusCode

__all__ = ["BadRequest", "Limits", "new_action_document", "valid_name"]

MAX_CODE_BYTES = 48 * 1024 * 1024
# Fields of a stored document that are the database's, not the entity's.
_INTERNAL = ("_id", "_rev", "_attachments", "entityType")


@dataclass(frozen=True)
class Limits:
    """System bounds on action limits (the stock defaults, with a larger timeout and memory
    maximum so experiments can raise them as the paper did)."""

    min_timeout_ms: int = 100
    max_timeout_ms: int = 600_000
    min_memory_mb: int = 128
    max_memory_mb: int = 2048
    max_logs_mb: int = 10
    max_concurrency: int = 1


def pairs(value: Any, what: str) -> list[dict[str, Any]]:
    """``parameters`` or ``annotations`` of a request body: a list of ``{"key", "value"}``."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(p, dict) and isinstance(p.get("key"), str) for p in value
    ):
        raise BadRequest(f"The request content was malformed: {what} must be key/value pairs.")
    return [{k: v for k, v in p.items() if k in ("key", "value", "init")} for p in value]


def merge_pairs(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``old`` with ``new`` laid over it, key by key (the later wins)."""
    merged = {p["key"]: p for p in old}
    merged.update({p["key"]: p for p in new})
    return list(merged.values())


def pair_values(params: list[dict[str, Any]]) -> dict[str, Any]:
    return {p["key"]: p.get("value") for p in params}


def entity_view(doc: dict[str, Any]) -> dict[str, Any]:
    """The REST form of a stored entity: the document without the database's fields."""
    return {k: v for k, v in doc.items() if k not in _INTERNAL}


def updated_pairs(
    body: dict[str, Any], old: dict[str, Any] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(parameters, annotations) of a package, trigger or rule PUT: each the body's, or the
    old entity's when the body leaves it out (stock replaces them whole)."""
    out = []
    for field in ("parameters", "annotations"):
        given = body.get(field)
        if given is None and old is not None:
            out.append(list(old.get(field, [])))
        else:
            out.append(pairs(given, field))
    return out[0], out[1]


def entity_version(body: dict[str, Any], old: dict[str, Any] | None) -> str:
    """The request's version, else the old one's patch level bumped, else 0.0.1."""
    version = body.get("version")
    if version is None and old is not None:
        version = bump(old.get("version", "0.0.1"))
    return str(version or "0.0.1")


def _limit(limits: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = limits.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"The request content was malformed: limits.{key} must be an integer.")
    if not lo <= value <= hi:
        raise BadRequest(f"{key} limit {value} is not in the allowed range [{lo}, {hi}].")
    return value


def _code_bytes(exec_: dict[str, Any], binary: bool) -> bytes | None:
    code = exec_.get("code")
    if code is None:
        return None
    if not isinstance(code, str):
        raise BadRequest("The request content was malformed: exec.code must be a string.")
    if len(code) > MAX_CODE_BYTES:
        raise BadRequest("The action code exceeds the allowed size.", status=413)
    if binary:
        try:
            return base64.b64decode(code, validate=True)
        except (binascii.Error, ValueError):
            raise BadRequest(
                "The request content was malformed: exec.code is not base64."
            ) from None
    return code.encode()


def new_action_document(
    namespace: str,
    name: str,
    body: dict[str, Any],
    *,
    kinds: set[str],
    kind_defaults: dict[str, str],
    limits: Limits,
    now_ms: int,
    old: dict[str, Any] | None = None,
    old_code: bytes | None = None,
    components: list[str] | None = None,
) -> tuple[dict[str, Any], bytes | None]:
    """Validate a PUT body and build the stored document (merged over ``old`` on update).
    A sequence's ``components`` come resolved and checked by the caller (it reads the
    database); a sequence keeps its components when the body has no ``exec``.

    Returns the document and the code bytes (to be stored as an attachment when the document
    names one)."""
    if not isinstance(body, dict):
        raise BadRequest("The request content was malformed: expected a JSON object.")
    package, _, short = name.rpartition("/")
    valid_name(short)
    if package:
        valid_name(package, "package")
    exec_ = body.get("exec")
    if exec_ is None and old is None:
        raise BadRequest("The request content was malformed: exec is required.")
    code: bytes | None
    if exec_ is not None:
        if not isinstance(exec_, dict) or not isinstance(exec_.get("kind"), str):
            raise BadRequest("The request content was malformed: exec.kind is required.")
        try:
            kind = resolve_kind(exec_["kind"], kind_defaults)
        except ValueError as e:
            raise BadRequest(str(e)) from None
        if kind == SEQUENCE:
            if components is None:
                raise BadRequest("No component specified for the sequence.")
            code, image, binary, main = None, None, False, None
        elif kind not in ("blackbox", KAAS) and kind not in kinds:
            raise BadRequest(f"kind '{exec_['kind']}' not in {sorted({*kinds, KAAS})}")
        else:
            code, image, binary, main = _exec_fields(exec_, kind)
            if kind == KAAS:
                _check_ktask(code, bool(binary))
    else:
        assert old is not None  # refused above: no exec and nothing to update
        old_exec = old["exec"]
        kind, image, binary, main = (
            old_exec["kind"],
            old_exec.get("image"),
            old_exec.get("binary", False),
            old_exec.get("main"),
        )
        code = old_code
        if kind == SEQUENCE:
            components = old_exec.get("components", [])
    old_limits = (old or {}).get("limits", {})
    req_limits = body.get("limits") or {}
    if not isinstance(req_limits, dict):
        raise BadRequest("The request content was malformed: limits must be an object.")
    merged_limits = {**old_limits, **req_limits}
    params = pairs(body.get("parameters"), "parameters")
    annotations = pairs(body.get("annotations"), "annotations")
    if old is not None:
        if body.get("parameters") is None:
            params = old.get("parameters", [])
        annotations = merge_pairs(old.get("annotations", []), annotations)
    # Stock always sets the exec annotation to the kind, replacing what was there.
    annotations = merge_pairs(annotations, [{"key": "exec", "value": kind}])
    if old is None and not any(a["key"] == "provide-api-key" for a in annotations):
        annotations.insert(0, {"key": "provide-api-key", "value": False})
    doc = action_document(
        namespace,
        short,
        package=package or None,
        kind=kind,
        code=code,
        binary=bool(binary),
        main=main if isinstance(main, str) and main else None,
        image=image if kind == "blackbox" else None,
        components=components if kind == SEQUENCE else None,
        parameters=params,
        annotations=annotations,
        timeout_ms=_limit(
            merged_limits, "timeout", 60_000, limits.min_timeout_ms, limits.max_timeout_ms
        ),
        memory_mb=_limit(merged_limits, "memory", 256, limits.min_memory_mb, limits.max_memory_mb),
        logs_mb=_limit(merged_limits, "logs", 10, 0, limits.max_logs_mb),
        concurrency=_limit(merged_limits, "concurrency", 1, 1, limits.max_concurrency),
        version=entity_version(body, old),
        publish=bool(body.get("publish", (old or {}).get("publish", False))),
        updated_ms=now_ms,
    )
    return doc, code


def _exec_fields(
    exec_: dict[str, Any], kind: str
) -> tuple[bytes | None, str | None, bool, str | None]:
    """(code, image, binary, main) of a runtime or blackbox ``exec``."""
    image = exec_.get("image")
    if kind == "blackbox" and not isinstance(image, str):
        raise BadRequest("The request content was malformed: blackbox needs exec.image.")
    if kind == "blackbox" and isinstance(image, str) and not valid_image(image):
        raise BadRequest(
            f"The request content was malformed: image name {image[:128]!r} is not valid."
        )
    binary = exec_.get("binary")
    code_text = exec_.get("code")
    if kind == "blackbox" and isinstance(code_text, str) and not code_text.strip():
        exec_ = {k: v for k, v in exec_.items() if k != "code"}  # blank: pure blackbox
        code_text = None
    if binary is None:
        binary = isinstance(code_text, str) and _looks_zip(code_text)
    code = _code_bytes(exec_, bool(binary))
    if code is None and kind != "blackbox":
        raise BadRequest("The request content was malformed: exec.code is required.")
    main = exec_.get("main")
    return code, image if kind == "blackbox" else None, bool(binary), main


def _check_ktask(code: bytes | None, binary: bool) -> None:
    """A ``kaas`` action's code is a kTask graph: refused at create time when it is not
    one, with the graph's own error (``gpu.kaas.format``), not at its first invocation."""
    try:
        if binary or code is None:
            raise KTaskError("the code must be the kTask's JSON text, not a binary")
        validate_ktask(code.decode("utf-8"))
    except (KTaskError, UnicodeDecodeError) as e:
        raise BadRequest(f"The kTask of this kaas action is not valid: {e}") from None


def _looks_zip(code: str) -> bool:
    return code.startswith("UEsDB")  # base64 of the zip magic "PK\x03\x04"


def bump(version: str) -> str:
    parts = version.split(".")
    try:
        parts[-1] = str(int(parts[-1]) + 1)
    except ValueError:
        return version
    return ".".join(parts)


def action_view(doc: dict[str, Any], code: str | None) -> dict[str, Any]:
    """The REST form of an action; ``code`` is text, or base64 for binary actions."""
    exec_ = {k: v for k, v in doc["exec"].items() if k != "code"}
    if code is not None:
        exec_["code"] = code
    return {
        "namespace": doc["namespace"],
        "name": doc["name"],
        "version": doc.get("version", "0.0.1"),
        "publish": doc.get("publish", False),
        "exec": exec_,
        "annotations": doc.get("annotations", []),
        "parameters": doc.get("parameters", []),
        "limits": doc.get("limits", {}),
        "updated": doc.get("updated", 0),
    }


def action_summary(doc: dict[str, Any]) -> dict[str, Any]:
    view = action_view(doc, None)
    view["exec"] = {"binary": doc["exec"].get("binary", False)}
    return view


def annotation(doc: dict[str, Any], key: str, default: Any = None) -> Any:
    for a in doc.get("annotations", []):
        if a.get("key") == key:
            return a.get("value")
    return default


def activation_view(doc: dict[str, Any]) -> dict[str, Any]:
    """The REST form of an activation record: ``response`` gains ``status`` and ``success``
    and loses ``statusCode``, as the stock controller returns it."""
    out = {k: v for k, v in doc.items() if k not in ("_id", "_rev", "entityType", "updated")}
    response = dict(doc.get("response", {}))
    code = StatusCode(response.pop("statusCode", StatusCode.WHISK_ERROR))
    response["status"] = code.status
    response["success"] = code == StatusCode.SUCCESS
    out["response"] = response
    out.setdefault("duration", doc.get("end", 0) - doc.get("start", 0))
    return out


def activation_summary(doc: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "activationId",
        "annotations",
        "duration",
        "end",
        "name",
        "namespace",
        "publish",
        "start",
        "version",
        "cause",
    )
    out = {k: doc[k] for k in keys if k in doc}
    out["statusCode"] = doc.get("response", {}).get("statusCode", 0)
    return out
