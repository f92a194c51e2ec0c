"""The store interface: CouchDB's document model (ids, revisions, attachments, Mango find)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class StoreError(Exception):
    """The store answered with an error for this request."""


class StoreUnavailable(StoreError):
    """The store could not be reached or did not answer in time."""


class Conflict(StoreError):
    """A document with this id exists at another revision (HTTP 409)."""


@dataclass(frozen=True, slots=True)
class WriteResult:
    id: str
    rev: str | None = None
    error: str | None = None  # "conflict" or another CouchDB error name

    @property
    def ok(self) -> bool:
        return self.error is None


class Store(Protocol):
    async def ensure_db(self, db: str) -> None: ...

    async def get(self, db: str, docid: str) -> dict[str, Any] | None:
        """The latest revision of a document, or None if missing or deleted."""
        ...

    async def get_attachment(self, db: str, docid: str, name: str) -> bytes | None: ...

    async def put(self, db: str, doc: dict[str, Any]) -> str:
        """Create or update (with ``_rev``) a document; returns the new revision."""
        ...

    async def put_attachment(
        self, db: str, docid: str, rev: str, name: str, data: bytes, content_type: str
    ) -> str: ...

    async def bulk(self, db: str, docs: list[dict[str, Any]]) -> list[WriteResult]:
        """Write many documents; per-document conflicts are results, not exceptions."""
        ...

    async def delete(self, db: str, docid: str, rev: str) -> None: ...

    async def find(
        self,
        db: str,
        selector: dict[str, Any],
        *,
        sort: list[dict[str, str]] | None = None,
        limit: int = 25,
        skip: int = 0,
    ) -> list[dict[str, Any]]:
        """Mango-style query; the subset used here: field equality and $gt/$gte/$lt/$lte,
        sort on one field."""
        ...

    async def close(self) -> None: ...
