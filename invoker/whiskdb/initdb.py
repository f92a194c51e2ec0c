"""Create or bring up to date the three databases, their design documents, the stock
subjects and every namespace's limits document; or, with ``check``, only say what is not.

Idempotent: a design document that differs from the shipped one is replaced (by its
``_rev``); existing subjects are left alone, keys included.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import couchdb

from invoker.whiskdb import Databases, design_documents
from invoker.whiskdb.subjects import AuthKey, ensure_limits, limits_id

# The stock deployment's well-known subjects (ansible/files/auth.guest, auth.whisk.system).
STOCK_SUBJECTS: dict[str, AuthKey] = {
    "guest": AuthKey(
        "23bc46b1-71f6-4ed5-8c54-816aa4f8c502",
        "123zO3xZCLrMN6v2BKK1dXYFpXlPkccOFqm12CdAsMgRU4VrNZ9lyGVCGuMDGIwP",
    ),
    "whisk.system": AuthKey(
        "789c46b1-71f6-4ed5-8c54-816aa4f8c502",
        "abczO3xZCLrMN6v2BKK1dXYFpXlPkccOFqm12CdAsMgRU4VrNZ9lyGVCGuMDGIwP",
    ),
}

# What happened (or, checking, would happen) to one database or document.
CREATED, UPDATED, UNCHANGED = "created", "updated", "unchanged"
MISSING, OUTDATED = "missing", "outdated"


@dataclass(frozen=True)
class Step:
    db: str
    doc_id: str | None  # None: the database itself
    outcome: str

    def __str__(self) -> str:
        what = self.db if self.doc_id is None else f"{self.db}/{self.doc_id}"
        return f"{self.outcome:9} {what}"


def _same(existing: Mapping[str, Any], shipped: Mapping[str, Any]) -> bool:
    return {k: v for k, v in existing.items() if k != "_rev"} == shipped


def _database(server: couchdb.Server, name: str, check: bool) -> tuple[Step, Any]:
    try:
        return Step(name, None, UNCHANGED), server[name]
    except couchdb.http.ResourceNotFound:
        pass
    if check:
        return Step(name, None, MISSING), None
    try:
        server.create(name)
    except couchdb.http.PreconditionFailed:
        return Step(name, None, UNCHANGED), server[name]  # created meanwhile
    return Step(name, None, CREATED), server[name]


def _design(db: Any, name: str, shipped: dict[str, Any], check: bool) -> Step:
    doc_id = shipped["_id"]
    existing = db.get(doc_id) if db is not None else None
    if existing is not None and _same(existing, shipped):
        return Step(name, doc_id, UNCHANGED)
    if check:
        return Step(name, doc_id, MISSING if existing is None else OUTDATED)
    if existing is not None:
        shipped["_rev"] = existing.rev
    db.save(shipped)
    return Step(name, doc_id, CREATED if existing is None else UPDATED)


def _subject_doc(subject: str, auth: AuthKey) -> dict[str, Any]:
    return {
        "_id": subject,
        "subject": subject,
        "namespaces": [{"name": subject, "uuid": auth.uuid, "key": auth.key}],
    }


def _namespaces(db: Any) -> Iterator[str]:
    """Every namespace named in a subject document (blocked subjects' too)."""
    for row in db.iterview("_all_docs", 500, include_docs=True):
        for ns in (row.doc or {}).get("namespaces") or ():
            if isinstance(ns, dict) and ns.get("name"):
                yield ns["name"]


def initdb(
    server: couchdb.Server,
    dbs: Databases,
    subjects: Mapping[str, AuthKey] = STOCK_SUBJECTS,
    check: bool = False,
) -> list[Step]:
    """Set everything up (or, with ``check``, write nothing); one step per database and
    document, in order."""
    steps: list[Step] = []
    opened: dict[str, Any] = {}
    for role, name in dbs.by_role().items():
        step, opened[role] = _database(server, name, check)
        steps.append(step)
        steps.extend(_design(opened[role], name, doc, check) for doc in design_documents(role))
    db, name = opened["subjects"], dbs.subjects
    if db is None:  # checking, and no subjects database: nothing more to look at
        steps.extend(Step(name, s, MISSING) for s in subjects)
        return steps
    for subject, auth in subjects.items():
        if db.get(subject) is not None:
            steps.append(Step(name, subject, UNCHANGED))
        elif check:
            steps.append(Step(name, subject, MISSING))
        else:
            try:
                db.save(_subject_doc(subject, auth))
                steps.append(Step(name, subject, CREATED))
            except couchdb.http.ResourceConflict:
                steps.append(Step(name, subject, UNCHANGED))  # written meanwhile
    for namespace in sorted(set(_namespaces(db))):
        doc_id = limits_id(namespace)
        if db.get(doc_id) is not None:
            steps.append(Step(name, doc_id, UNCHANGED))
        elif check:
            steps.append(Step(name, doc_id, MISSING))
        else:
            steps.append(Step(name, doc_id, CREATED if ensure_limits(db, namespace) else UNCHANGED))
    return steps
