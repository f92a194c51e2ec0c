"""Trigger and rule documents, as the stock controller stores and shows them.

A rule links a trigger to an action. The link that firing reads lives in the trigger
document (``rules``: rule docid -> ``{"action": {"path", "name"}, "status"}``), so a fire
needs one read; the rule document keeps the names it was made with. A rule's status
(``active``/``inactive``) is the trigger's copy.
"""

from __future__ import annotations

from typing import Any

from front.entities import entity_version, updated_pairs
from front.http import BadRequest
from front.names import valid_name
from whisk.protocol import QualifiedName

ACTIVE = "active"
INACTIVE = "inactive"


def new_trigger_document(
    namespace: str,
    name: str,
    body: dict[str, Any],
    *,
    now_ms: int,
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Validate a PUT body and build the stored trigger (merged over ``old``, whose rules
    it keeps)."""
    valid_name(name, "trigger name")
    params, annotations = updated_pairs(body, old)
    feed = next((a.get("value") for a in annotations if a["key"] == "feed"), None)
    if feed is not None and not (isinstance(feed, str) and feed.strip("/")):
        raise BadRequest("Feed name is not valid")
    limits = body.get("limits")
    if limits is not None and not isinstance(limits, dict):
        raise BadRequest("The request content was malformed: limits must be an object.")
    doc: dict[str, Any] = {
        "_id": f"{namespace}/{name}",
        "entityType": "trigger",
        "namespace": namespace,
        "name": name,
        "parameters": params,
        "limits": limits if limits is not None else (old or {}).get("limits", {}),
        "version": entity_version(body, old),
        "publish": bool(body.get("publish", (old or {}).get("publish", False))),
        "annotations": annotations,
        "updated": now_ms,
    }
    if old is not None and old.get("rules"):
        doc["rules"] = old["rules"]
    return doc


def trigger_view(doc: dict[str, Any]) -> dict[str, Any]:
    keys = ("namespace", "name", "parameters", "limits", "version", "publish", "annotations")
    view = {k: doc[k] for k in keys if k in doc}
    view["updated"] = doc.get("updated", 0)
    if doc.get("rules"):
        view["rules"] = doc["rules"]
    return view


def link_rule(
    trigger: dict[str, Any], rule_docid: str, action: QualifiedName, status: str
) -> dict[str, Any]:
    """The trigger with ``rule`` linked (or relinked) to ``action``."""
    rules = dict(trigger.get("rules") or {})
    rules[rule_docid] = {"action": {"path": action.path, "name": action.name}, "status": status}
    return trigger | {"rules": rules}


def unlink_rule(trigger: dict[str, Any], rule_docid: str) -> dict[str, Any]:
    rules = {k: v for k, v in (trigger.get("rules") or {}).items() if k != rule_docid}
    return trigger | {"rules": rules}


def rule_status(trigger: dict[str, Any] | None, rule_docid: str) -> str:
    """The rule's status as its trigger holds it; inactive when the trigger or link is gone."""
    link = ((trigger or {}).get("rules") or {}).get(rule_docid)
    return link.get("status", INACTIVE) if isinstance(link, dict) else INACTIVE


def new_rule_document(
    namespace: str,
    name: str,
    body: dict[str, Any],
    trigger: QualifiedName,
    action: QualifiedName,
    *,
    now_ms: int,
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    valid_name(name, "rule name")
    _, annotations = updated_pairs(body, old)
    return {
        "_id": f"{namespace}/{name}",
        "entityType": "rule",
        "namespace": namespace,
        "name": name,
        "trigger": {"path": trigger.path, "name": trigger.name},
        "action": {"path": action.path, "name": action.name},
        "version": entity_version(body, old),
        "publish": bool(body.get("publish", (old or {}).get("publish", False))),
        "annotations": annotations,
        "updated": now_ms,
    }


def rule_view(doc: dict[str, Any], status: str | None = None) -> dict[str, Any]:
    keys = ("namespace", "name", "trigger", "action", "version", "publish", "annotations")
    view = {k: doc[k] for k in keys if k in doc}
    view["updated"] = doc.get("updated", 0)
    if status is not None:
        view["status"] = status
    return view
