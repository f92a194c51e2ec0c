"""The ``/whisk.system`` packages every user can read: ``utils`` (echo, split, sort, head, cat,
date), written by this project (``front/system_actions``), so sequences and bindings have
something to try on a fresh platform (``wsk action invoke /whisk.system/utils/echo``).

Seeded once: an existing package or action of that name is left alone, so a deployment
whose catalog installed its own ``utils`` keeps it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from front.packages import new_package_document
from front.resolve import SYSTEM_NAMESPACE
from whisk.protocol.actions import resolve_kind
from whisk.protocol.controller import action_document
from whisk.store import Conflict, Store

log = logging.getLogger(__name__)

ACTIONS = Path(__file__).with_name("system_actions")
DESCRIPTIONS = {"utils": "Building blocks that format and assemble data"}


async def seed_system_packages(
    store: Store, db: str, kind_defaults: dict[str, str], now_ms: int
) -> int:
    """Write the packages and actions that are missing; returns how many were written."""
    written = 0
    for folder in sorted(p for p in ACTIONS.iterdir() if p.is_dir()):
        pkg = folder.name
        docs = [
            new_package_document(
                SYSTEM_NAMESPACE,
                pkg,
                {
                    "publish": True,
                    "annotations": [{"key": "description", "value": DESCRIPTIONS.get(pkg, "")}],
                },
                now_ms=now_ms,
            )
        ]
        kind = resolve_kind("nodejs:default", kind_defaults)
        for code in sorted(folder.glob("*.js")):
            text = code.read_text()
            docs.append(
                action_document(
                    SYSTEM_NAMESPACE,
                    code.stem,
                    package=pkg,
                    kind=kind,
                    code=text.encode(),
                    annotations=[
                        {"key": "provide-api-key", "value": False},
                        {"key": "exec", "value": kind},
                        {"key": "description", "value": _description(text)},
                    ],
                    updated_ms=now_ms,
                )
            )
        for doc in docs:
            if await store.get(db, doc["_id"]) is not None:
                continue
            try:
                await store.put(db, doc)
                written += 1
            except Conflict:  # another front seeded it meanwhile
                pass
    if written:
        log.info("seeded %d /%s entities", written, SYSTEM_NAMESPACE)
    return written


def _description(code: str) -> str:
    """An action's first comment line: what ``wsk package get --summary`` shows for it."""
    first = code.splitlines()[0] if code else ""
    return first.removeprefix("//").strip()
