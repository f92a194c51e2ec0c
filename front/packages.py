"""Package and binding documents, as the stock controller stores and shows them.

A package groups actions (``ns/pkg/action``) and gives them default parameters; a binding
is a package of the caller's that points at another package (often a shared one in another
namespace) and lays its own parameters over it. Every package document has a ``binding``
field: ``{}`` for a package, ``{"namespace", "name"}`` for a binding (the database views
tell the two apart by it).
"""

from __future__ import annotations

from typing import Any

from front.entities import entity_version, merge_pairs, updated_pairs
from front.http import BadRequest
from front.names import resolve_namespace, valid_name

RESERVED_NAMES = ("default",)
BINDING = "binding"


def binding_of(doc: dict[str, Any]) -> str | None:
    """``ns/pkg`` a binding points at, or None for a package."""
    b = doc.get(BINDING) or {}
    return f"{b['namespace']}/{b['name']}" if b else None


def _binding(value: Any, own: str) -> dict[str, str]:
    if value is None or value == {}:
        return {}
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("namespace"), str)
        or not isinstance(value.get("name"), str)
    ):
        raise BadRequest("The request content was malformed: binding needs namespace and name.")
    namespace = resolve_namespace(value["namespace"].strip("/"), own)
    return {"namespace": valid_name(namespace, "namespace"), "name": valid_name(value["name"])}


def new_package_document(
    namespace: str,
    name: str,
    body: dict[str, Any],
    *,
    now_ms: int,
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Validate a PUT body and build the stored package or binding (merged over ``old``).
    Whether the bound package exists and may be read is the caller's check."""
    valid_name(name, "package name")
    if name in RESERVED_NAMES:
        raise BadRequest(f"Package name '{name}' is reserved.")
    binding = _binding(body.get(BINDING), namespace)
    if old is not None:
        if binding and not old.get(BINDING):
            raise BadRequest("Resource is a package and cannot be converted into a binding.", 409)
        binding = binding or old.get(BINDING) or {}
    params, annotations = updated_pairs(body, old)
    # The binding annotation is always the controller's (clients list packages by it).
    annotations = [a for a in annotations if a["key"] != BINDING]
    if binding:
        annotations = merge_pairs(annotations, [{"key": BINDING, "value": binding}])
    return {
        "_id": f"{namespace}/{name}",
        "entityType": "package",
        "namespace": namespace,
        "name": name,
        BINDING: binding,
        "parameters": params,
        "version": entity_version(body, old),
        "publish": bool(body.get("publish", (old or {}).get("publish", False))),
        "annotations": annotations,
        "updated": now_ms,
    }


def package_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """A package in a listing: ``binding`` is ``false`` for a package, as stock's view has it."""
    return {
        "namespace": doc["namespace"],
        "name": doc["name"],
        "version": doc.get("version", "0.0.1"),
        "publish": doc.get("publish", False),
        "annotations": doc.get("annotations", []),
        "updated": doc.get("updated", 0),
        BINDING: doc.get(BINDING) or False,
    }


def package_view(
    doc: dict[str, Any], actions: list[dict[str, Any]], bound: dict[str, Any] | None = None
) -> dict[str, Any]:
    """GET of a package: the document with its actions (feeds, the actions annotated
    ``feed``, apart). For a binding, ``bound`` is the package it points at: the binding is
    shown with the bound package's parameters under its own, and the bound package's actions."""
    view = package_summary(doc) | {"binding": doc.get(BINDING) or {}}
    params = doc.get("parameters", [])
    if bound is not None:
        params = merge_pairs(bound.get("parameters", []), params)
    view["parameters"] = params
    entries = [
        {
            "name": a["name"],
            "version": a.get("version", "0.0.1"),
            "annotations": a.get("annotations", []),
        }
        for a in actions
    ]
    view["actions"] = [e for e in entries if not _is_feed(e)]
    view["feeds"] = [e for e in entries if _is_feed(e)]
    return view


def _is_feed(action: dict[str, Any]) -> bool:
    return any(a.get("key") == "feed" for a in action.get("annotations", []))
