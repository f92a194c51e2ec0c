"""The embedded platform's store (``ow-invoker standalone``'s ``openwhisk.sqlite3``) behind the
few calls of the ``couchdb`` client that :mod:`invoker.whiskdb.subjects` makes, so that
``ow-invoker admin user ...`` and ``limits ...`` work on it as on CouchDB.

The file may be open by a running platform at the same time: SQLite's WAL lets both write,
and the platform's front re-reads the subjects every second (:mod:`front.identities`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import couchdb

from invoker.whiskdb import IDENTITIES_VIEW, AdminError
from whisk.store.base import Conflict
from whisk.store.embedded import EmbeddedStore

STORE_FILE = "openwhisk.sqlite3"  # the standalone's name for it, in its state directory


def store_path(given: str | Path) -> Path:
    """The database file for ``--embedded``: the file itself, or the state directory that
    holds ``openwhisk.sqlite3``."""
    path = Path(given)
    if path.is_dir():
        path = path / STORE_FILE
    if not path.is_file():
        raise AdminError(
            f"no embedded store at {path}: give the state directory of `ow-invoker standalone` "
            f"(--state-dir, default .state/standalone) or its {STORE_FILE}",
            status=2,
        )
    return path


class Document(dict[str, Any]):
    """A stored document as the ``couchdb`` client gives it: a dict with ``id`` and ``rev``."""

    @property
    def id(self) -> str:
        return str(self["_id"])

    @property
    def rev(self) -> str | None:
        return self.get("_rev")


@dataclass(frozen=True)
class Row:
    id: str
    value: dict[str, Any]


class EmbeddedDatabase:
    """One database of the embedded store, with ``get``, ``save``, ``delete`` and the
    subjects' identities ``view``."""

    def __init__(self, store: EmbeddedStore, name: str) -> None:
        self.store = store
        self.name = name

    def get(self, docid: str) -> Document | None:
        doc = self.store.get_sync(self.name, docid)
        return None if doc is None else Document(doc)

    def save(self, doc: dict[str, Any]) -> tuple[str, str]:
        """Write ``doc`` (its ``_rev`` must be the stored one) and set its new ``_rev``."""
        try:
            rev = self.store.put_sync(self.name, doc)
        except Conflict:
            raise couchdb.http.ResourceConflict(("conflict", "Document update conflict.")) from None
        doc["_rev"] = rev
        return doc["_id"], rev

    def delete(self, doc: dict[str, Any]) -> None:
        try:
            self.store.delete_sync(self.name, doc["_id"], doc["_rev"])
        except Conflict:
            raise couchdb.http.ResourceConflict(("conflict", "Document update conflict.")) from None

    def view(self, name: str, key: list[str]) -> list[Row]:
        """The stock ``subjects.v2.0.0/identities`` view: unblocked subjects' namespaces by
        ``[namespace]`` or ``[uuid, key]``."""
        if name != IDENTITIES_VIEW:
            raise AdminError(f"the embedded store has no view {name!r}", status=2)
        rows = []
        for doc in self.store.find_sync(self.name, {}, None, 1_000_000, 0):
            if doc.get("blocked") or not isinstance(doc.get("namespaces"), list):
                continue
            for ns in doc["namespaces"]:
                if [ns.get("name")] == key or [ns.get("uuid"), ns.get("key")] == key:
                    value = {"namespace": ns.get("name"), "uuid": ns.get("uuid")}
                    rows.append(Row(doc["_id"], {**value, "key": ns.get("key")}))
        return rows


class EmbeddedServer:
    """``server[name]``: a database of the embedded store (every name exists: SQLite makes
    no difference between an empty database and a missing one)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = EmbeddedStore(path, threaded=False)

    def __getitem__(self, name: str) -> EmbeddedDatabase:
        return EmbeddedDatabase(self.store, name)
