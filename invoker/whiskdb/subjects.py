"""Subjects, their namespaces' keys and the namespaces' limits, as ``wskadmin`` keeps them.

A subject document is ``{_id: subject, subject, namespaces: [{name, uuid, key}], blocked?}``;
a namespace's limits live in ``<namespace>/limits`` in the same database. Every namespace
gets a limits document (empty: the system defaults), even where ``wskadmin`` writes none:
on pouchdb-server, whose view rows leave out ``doc`` where CouchDB answers ``"doc": null``,
the stock controller fails every authenticated call of a namespace without one.
"""

from __future__ import annotations

import secrets
import string
import uuid as uuidlib
from dataclasses import dataclass
from typing import Any

import couchdb

from invoker.whiskdb import IDENTITIES_VIEW, AdminError

# wskadmin's limits, in its order, with the type each is stored as.
LIMITS: dict[str, type] = {
    "invocationsPerMinute": int,
    "firesPerMinute": int,
    "concurrentInvocations": int,
    "allowedKinds": list,
    "storeActivations": bool,
    "minActionMemory": int,
    "maxActionMemory": int,
    "minActionLogs": int,
    "maxActionLogs": int,
    "minActionTimeout": int,
    "maxActionTimeout": int,
    "minActionConcurrency": int,
    "maxActionConcurrency": int,
    "maxParameterSize": str,
    "maxPayloadSize": str,
    "truncationSize": str,
}
KEY_ALPHABET = string.ascii_letters + string.digits
KEY_LENGTH = 64
MIN_SUBJECT_LENGTH = 5


@dataclass(frozen=True)
class AuthKey:
    """A namespace's credentials, printed and parsed as ``uuid:key``."""

    uuid: str
    key: str

    def __str__(self) -> str:
        return f"{self.uuid}:{self.key}"

    @classmethod
    def parse(cls, text: str) -> AuthKey:
        uid, sep, key = text.strip().partition(":")
        try:
            uid = str(uuidlib.UUID(uid, version=4)) if sep else ""
        except ValueError:
            uid = ""
        if not uid:
            raise AdminError(f"{text!r}: the authorization id is not a valid UUID", status=2)
        if len(key) < KEY_LENGTH:
            raise AdminError(
                f"the authorization key must be at least {KEY_LENGTH} characters long", status=2
            )
        return cls(uid, key)

    @classmethod
    def generate(cls) -> AuthKey:
        key = "".join(secrets.choice(KEY_ALPHABET) for _ in range(KEY_LENGTH))
        return cls(str(uuidlib.uuid4()), key)


def limits_id(namespace: str) -> str:
    return f"{namespace}/limits"


def get_subject(db: couchdb.Database, subject: str) -> dict[str, Any]:
    doc = db.get(subject)
    if doc is None or "namespaces" not in doc:
        raise AdminError(f"subject {subject!r} does not exist")
    return doc


def ensure_limits(db: couchdb.Database, namespace: str) -> bool:
    """Write an empty ``<namespace>/limits`` unless one exists; True when written."""
    if db.get(limits_id(namespace)) is not None:
        return False
    try:
        db.save({"_id": limits_id(namespace)})
    except couchdb.http.ResourceConflict:
        return False  # written meanwhile
    return True


def create_user(
    db: couchdb.Database,
    subject: str,
    namespace: str | None = None,
    auth: AuthKey | None = None,
    revoke: bool = False,
) -> AuthKey:
    """Add a subject, or a namespace to one; ``revoke`` replaces an existing namespace's key."""
    subject = subject.strip()
    if len(subject) < MIN_SUBJECT_LENGTH:
        raise AdminError(
            f"a subject name must be at least {MIN_SUBJECT_LENGTH} characters long", status=2
        )
    namespace = subject if namespace is None else namespace.strip()
    if not namespace:
        raise AdminError("a namespace must not be empty", status=2)
    auth = auth or AuthKey.generate()
    entry = {"name": namespace, "uuid": auth.uuid, "key": auth.key}
    doc = db.get(subject)
    if doc is None:
        doc = {"_id": subject, "subject": subject, "namespaces": [entry]}
    elif doc.get("blocked"):
        raise AdminError(f"subject {subject!r} is blocked: unblock it first")
    else:
        same = [ns for ns in doc.get("namespaces", []) if ns.get("name") == namespace]
        if not same:
            doc.setdefault("namespaces", []).append(entry)
        elif not revoke:
            raise AdminError(f"namespace {namespace!r} of {subject!r} already exists")
        elif len(same) > 1:
            raise AdminError(f"namespace {namespace!r} of {subject!r} is not unique")
        else:
            same[0].update(uuid=auth.uuid, key=auth.key)
    db.save(doc)
    ensure_limits(db, namespace)
    return auth


def user_keys(db: couchdb.Database, subject: str) -> list[tuple[str, AuthKey]]:
    """Every namespace of a subject with its key."""
    doc = get_subject(db, subject)
    return [(ns["name"], AuthKey(ns["uuid"], ns["key"])) for ns in doc["namespaces"]]


def user_key(db: couchdb.Database, subject: str, namespace: str | None = None) -> AuthKey:
    namespace = subject if namespace is None else namespace
    keys = [key for name, key in user_keys(db, subject) if name == namespace]
    if len(keys) != 1:
        raise AdminError(f"namespace {namespace!r} not found for {subject!r}")
    return keys[0]


def delete_user(db: couchdb.Database, subject: str, namespace: str | None = None) -> str:
    """Delete a subject, or only one of its namespaces; says which."""
    doc = get_subject(db, subject)
    if namespace is None:
        db.delete(doc)
        return "Subject deleted"
    kept = [ns for ns in doc["namespaces"] if ns.get("name") != namespace]
    if len(kept) == len(doc["namespaces"]):
        raise AdminError(f"namespace {namespace!r} does not exist for {subject!r}")
    doc["namespaces"] = kept
    db.save(doc)
    return "Namespace deleted"


def set_blocked(db: couchdb.Database, subject: str, blocked: bool) -> None:
    """Block (the identities view then leaves the subject out) or unblock a subject."""
    doc = get_subject(db, subject)
    doc["blocked"] = blocked
    db.save(doc)


def whois(db: couchdb.Database, auth: str) -> list[tuple[str, str]]:
    """(subject, namespace) pairs the controller would authenticate ``uuid:key`` as."""
    uid, _, key = auth.partition(":")
    rows = db.view(IDENTITIES_VIEW, key=[uid, key])
    return [(row.id, row.value["namespace"]) for row in rows]


def identities(db: couchdb.Database, namespace: str) -> list[tuple[str, AuthKey]]:
    """(subject, key) of every unblocked identity with access to a namespace."""
    rows = db.view(IDENTITIES_VIEW, key=[namespace])
    return [(row.id, AuthKey(row.value["uuid"], row.value["key"])) for row in rows]


def set_limits(db: couchdb.Database, namespace: str, limits: dict[str, Any]) -> dict[str, Any]:
    """Merge the given limits into the namespace's; returns the stored limits."""
    unknown = set(limits) - set(LIMITS)
    if unknown:
        raise AdminError(f"unknown limits: {', '.join(sorted(unknown))}", status=2)
    doc = db.get(limits_id(namespace)) or {"_id": limits_id(namespace)}
    doc.update({name: value for name, value in limits.items() if value is not None})
    db.save(doc)
    return get_limits(db, namespace)


def get_limits(db: couchdb.Database, namespace: str) -> dict[str, Any]:
    """The namespace's own limits in wskadmin's order (empty: system defaults apply)."""
    doc = db.get(limits_id(namespace)) or {}
    return {name: doc[name] for name in LIMITS if doc.get(name) is not None}


def delete_limits(db: couchdb.Database, namespace: str) -> None:
    """Back to the system defaults: the document stays, empty (see the module docstring)."""
    doc = db.get(limits_id(namespace))
    if doc is None:
        raise AdminError(f"namespace {namespace!r} has no limits document")
    db.save({"_id": doc.id, "_rev": doc.rev})
