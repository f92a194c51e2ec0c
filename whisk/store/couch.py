"""CouchDB (or any CouchDB-API server, e.g. pouchdb-server) over aiohttp."""

from __future__ import annotations

import asyncio
import base64
from typing import Any
from urllib.parse import quote

import aiohttp

from whisk.protocol.json import dumps, loads
from whisk.store.base import Conflict, StoreError, StoreUnavailable, WriteResult

_JSON = {"Accept": "application/json", "Content-Type": "application/json"}


def _doc_path(db: str, docid: str) -> str:
    return f"/{quote(db, safe='')}/{quote(docid, safe='')}"


class CouchStore:
    def __init__(
        self,
        url: str,
        user: str | None = None,
        password: str | None = None,
        timeout_s: float = 10.0,
        max_connections: int = 32,
    ) -> None:
        self.url = url.rstrip("/")
        self._headers = dict(_JSON)
        if user:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._indexes: set[tuple[str, tuple[str, ...]]] = set()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=self._timeout,
                connector=aiohttp.TCPConnector(limit=self._max_connections),
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        data = raw if raw is not None else (dumps(body) if body is not None else None)
        try:
            async with self._http().request(
                method, self.url + path, data=data, headers={**self._headers, **(headers or {})}
            ) as resp:
                return resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise StoreUnavailable(f"{method} {path}: {e.__class__.__name__}: {e}") from e

    @staticmethod
    def _check(status: int, body: bytes, what: str) -> Any:
        if status == 409:
            raise Conflict(what)
        if status >= 500:
            raise StoreUnavailable(f"{what}: HTTP {status} {body[:200]!r}")
        if status >= 400:
            raise StoreError(f"{what}: HTTP {status} {body[:200]!r}")
        return loads(body) if body else None

    async def ensure_db(self, db: str) -> None:
        status, body = await self._request("PUT", f"/{quote(db, safe='')}")
        if status not in (201, 202, 412):
            self._check(status, body, f"create database {db}")

    async def doc_count(self, db: str) -> int:
        """How many documents ``db`` holds, design documents (its indexes) left out."""
        path = f"/{quote(db, safe='')}"
        status, body = await self._request("GET", path)
        total = int(self._check(status, body, f"info of {db}")["doc_count"])
        design = f'{path}/_all_docs?startkey="_design/"&endkey="_design0"'
        status, body = await self._request("GET", design)
        return total - len(self._check(status, body, f"design documents of {db}")["rows"])

    async def get(self, db: str, docid: str) -> dict[str, Any] | None:
        status, body = await self._request("GET", _doc_path(db, docid))
        if status == 404:
            return None
        return self._check(status, body, f"get {db}/{docid}")

    async def get_attachment(self, db: str, docid: str, name: str) -> bytes | None:
        path = f"{_doc_path(db, docid)}/{quote(name, safe='')}"
        status, body = await self._request("GET", path, headers={"Accept": "*/*"})
        if status == 404:
            return None
        if status >= 400:
            self._check(status, body, f"get attachment {name} of {db}/{docid}")
        return body

    async def put(self, db: str, doc: dict[str, Any]) -> str:
        status, body = await self._request("PUT", _doc_path(db, doc["_id"]), doc)
        return self._check(status, body, f"put {db}/{doc['_id']}")["rev"]

    async def put_attachment(
        self, db: str, docid: str, rev: str, name: str, data: bytes, content_type: str
    ) -> str:
        path = f"{_doc_path(db, docid)}/{quote(name, safe='')}?rev={quote(rev)}"
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        status, body = await self._request("PUT", path, raw=data, headers=headers)
        return self._check(status, body, f"put attachment {name} of {db}/{docid}")["rev"]

    async def bulk(self, db: str, docs: list[dict[str, Any]]) -> list[WriteResult]:
        status, body = await self._request(
            "POST", f"/{quote(db, safe='')}/_bulk_docs", {"docs": docs}
        )
        results = self._check(status, body, f"bulk write to {db}")
        return [WriteResult(r.get("id", ""), r.get("rev"), r.get("error")) for r in results]

    async def delete(self, db: str, docid: str, rev: str) -> None:
        status, body = await self._request("DELETE", f"{_doc_path(db, docid)}?rev={quote(rev)}")
        self._check(status, body, f"delete {db}/{docid}")

    async def _ensure_index(self, db: str, fields: tuple[str, ...]) -> None:
        if (db, fields) in self._indexes:
            return
        status, body = await self._request(
            "POST", f"/{quote(db, safe='')}/_index", {"index": {"fields": list(fields)}}
        )
        self._check(status, body, f"create index on {db}")
        self._indexes.add((db, fields))

    async def find(
        self,
        db: str,
        selector: dict[str, Any],
        *,
        sort: list[dict[str, str]] | None = None,
        limit: int = 25,
        skip: int = 0,
    ) -> list[dict[str, Any]]:
        query: dict[str, Any] = {"selector": selector, "limit": limit, "skip": skip}
        if sort:
            fields = tuple(dict.fromkeys([*selector.keys(), *(next(iter(s)) for s in sort)]))
            await self._ensure_index(db, fields)
            query["sort"] = sort
        status, body = await self._request("POST", f"/{quote(db, safe='')}/_find", query)
        return self._check(status, body, f"find in {db}")["docs"]

    async def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            try:
                status, _ = await self._request("GET", "/")
                if status < 500:
                    return
            except StoreUnavailable:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise StoreUnavailable(f"CouchDB at {self.url} did not answer")
            await asyncio.sleep(0.3)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
