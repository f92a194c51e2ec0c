"""The whisks database as the API sees it: typed reads (a document of another kind is a
409, as stock), namespace listings newest first, and writes that keep the invoke path's
short-lived cache honest.

Documents keep the stock controller's format (``entityType``, ``namespace``, ``name``,
``updated`` ...), so a stock controller and this front read each other's entities.
"""

from __future__ import annotations

from typing import Any

from front.cache import DocumentCache
from front.http import CONFLICT, WRONG_COLLECTION, BadRequest, NotFound
from whisk.clock import Clock
from whisk.store import Conflict, Store

# Collection path segment -> entityType.
COLLECTIONS = {"actions": "action", "packages": "package", "triggers": "trigger", "rules": "rule"}
# Listings read at most this many documents of a kind in a namespace, then sort and page.
MAX_SCAN = 10_000


class ConcurrentChange(BadRequest):
    """The document changed between our read and our write (HTTP 409); callers that merge
    into a document (the API gateway's) read it again and retry."""

    def __init__(self) -> None:
        super().__init__(CONFLICT, 409)


class Entities:
    def __init__(self, store: Store, db: str, clock: Clock) -> None:
        self.store = store
        self.db = db
        self.clock = clock
        self.cache = DocumentCache(lambda docid: store.get(db, docid), clock)

    async def find(self, docid: str, cached: bool = False) -> dict[str, Any] | None:
        """The document, of any kind, or None; ``cached`` may be up to the cache's TTL old
        (the invoke paths)."""
        if cached:
            return await self.cache.get(docid)
        return await self.store.get(self.db, docid)

    async def get(self, docid: str, kind: str, cached: bool = False) -> dict[str, Any]:
        doc = await self.find(docid, cached)
        if doc is None:
            raise NotFound()
        if doc.get("entityType") != kind:
            raise BadRequest(WRONG_COLLECTION, 409)
        return doc

    async def existing(self, docid: str, kind: str, overwrite: bool) -> dict[str, Any] | None:
        """The document a PUT replaces: None when new; 409 when it exists and ``overwrite``
        is not set, or when it is of another kind."""
        old = await self.find(docid)
        if old is None:
            return None
        if old.get("entityType") != kind:
            raise BadRequest(WRONG_COLLECTION, 409)
        if not overwrite:
            raise BadRequest("resource already exists", 409)
        return old

    async def put(self, doc: dict[str, Any], old: dict[str, Any] | None = None) -> str:
        """Write ``doc`` (replacing ``old`` at its revision); a concurrent change is a 409."""
        if old is not None:
            doc["_rev"] = old["_rev"]
        self.cache.invalidate(doc["_id"])
        try:
            rev = await self.store.put(self.db, doc)
        except Conflict:
            raise ConcurrentChange() from None
        doc["_rev"] = rev
        return rev

    async def delete(self, doc: dict[str, Any]) -> None:
        self.cache.invalidate(doc["_id"])
        try:
            await self.store.delete(self.db, doc["_id"], doc["_rev"])
        except Conflict:
            raise ConcurrentChange() from None

    async def list(self, path: str, kind: str, nested: bool = True) -> list[dict[str, Any]]:
        """Every ``kind`` document in ``path`` (a namespace, or ``ns/pkg``), newest first;
        ``nested`` adds those in the namespace's packages, as stock views key them under
        their root namespace too."""
        where: Any = {"$gte": path, "$lt": path + "/\ufff0"} if nested else path
        docs = await self.store.find(
            self.db, {"entityType": kind, "namespace": where}, limit=MAX_SCAN
        )
        prefix = path + "/"
        docs = [
            d
            for d in docs
            if d.get("namespace") == path or (nested and d.get("namespace", "").startswith(prefix))
        ]
        docs.sort(key=lambda d: (d.get("updated", 0), d["_id"]), reverse=True)
        return docs
