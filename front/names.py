"""Entity names as the REST API writes them: ``/ns/pkg/name`` (absolute), ``pkg/name`` and
``name`` (in the caller's namespace), ``_`` for the caller's own namespace, and the
``{"path": ..., "name": ...}`` objects stored in rules and triggers."""

from __future__ import annotations

import re
from typing import Any

from front.http import BadRequest
from whisk.protocol import QualifiedName

NAME_RE = re.compile(r"[A-Za-z0-9_@.\- ]{1,256}")
DEFAULT_NAMESPACE = "_"


def valid_name(name: str, what: str = "name") -> str:
    if not NAME_RE.fullmatch(name) or name.strip() != name or name in (".", ".."):
        raise BadRequest(f"The {what} '{name}' is not valid.")
    return name


def resolve_namespace(namespace: str, own: str) -> str:
    return own if namespace == DEFAULT_NAMESPACE else namespace


def parse_name(value: Any, own: str, what: str = "name") -> QualifiedName:
    """An entity reference from a request body: a string as above, or a stored
    ``{"path", "name"}`` object; ``_`` becomes ``own``."""
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        path = value.get("path", own)
        if not isinstance(path, str):
            raise BadRequest(f"The {what} is not a valid entity name.")
        text = "/" + path + "/" + value["name"]
    elif isinstance(value, str) and value.strip():
        text = value.strip()
    else:
        raise BadRequest(f"The {what} is not a valid entity name.")
    parts = text.split("/")
    if text.startswith("/"):
        parts = parts[1:]
        if len(parts) < 2:
            raise BadRequest(f"The {what} '{text}' is not a fully qualified name.")
    else:
        parts = [own, *parts]
    if len(parts) > 3:
        raise BadRequest(f"The {what} '{text}' has too many path segments.")
    for p in parts:
        valid_name(p, what)
    namespace = resolve_namespace(parts[0], own)
    return QualifiedName("/".join([namespace, *parts[1:-1]]), parts[-1])


def qualified(name: QualifiedName) -> str:
    """``/ns[/pkg]/name``, as stock prints a fully qualified name."""
    return f"/{name.path}/{name.name}"


def stored(name: QualifiedName) -> dict[str, str]:
    """The ``{"path", "name"}`` form kept in rule and trigger documents."""
    return {"path": name.path, "name": name.name}
