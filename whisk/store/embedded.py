"""An embedded, persistent document store with CouchDB's semantics, on SQLite.

Used by the embedded (standalone) mode so a newcomer needs no database server. Documents
keep CouchDB's shape (``_id``, ``_rev`` of the form ``N-<hash>``, attachments, 409 on a
stale revision). SQLite calls run on one worker thread so the event loop never blocks.

The file holds every namespace's code, parameters, results and subjects' keys: it is made
0600 (with its ``-wal`` and ``-shm`` files, which SQLite creates with the database's mode),
also when it already exists. The ``*_sync`` methods serve synchronous tools in another
process (``ow-invoker admin --embedded``): SQLite's WAL lets them write while a platform
has the file open.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from whisk.private import FILE_MODE, private_file
from whisk.protocol.json import dumps, loads
from whisk.store.base import Conflict, StoreError, WriteResult

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL, deleted INTEGER NOT NULL DEFAULT 0,
    namespace TEXT, name TEXT, start INTEGER, body BLOB NOT NULL,
    PRIMARY KEY (db, id));
CREATE INDEX IF NOT EXISTS docs_ns ON docs (db, namespace, start);
CREATE TABLE IF NOT EXISTS attachments (
    db TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, content_type TEXT NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (db, id, name));
CREATE TABLE IF NOT EXISTS dbs (db TEXT PRIMARY KEY);
"""

# Fields kept in columns so namespace-scoped listings need no full scan.
_COLUMNS = ("namespace", "name", "start")
_OPS = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _next_rev(rev: str | None, body: bytes) -> str:
    n = int(rev.split("-", 1)[0]) + 1 if rev else 1
    return f"{n}-{hashlib.md5(body, usedforsecurity=False).hexdigest()}"


def _matches(doc: dict[str, Any], selector: dict[str, Any]) -> bool:
    for field, cond in selector.items():
        value: Any = doc
        for part in field.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        conds = cond if isinstance(cond, dict) else {"$eq": cond}
        for op, expected in conds.items():
            try:
                ok = {
                    "$eq": lambda a, b: a == b,
                    "$gt": lambda a, b: a is not None and a > b,
                    "$gte": lambda a, b: a is not None and a >= b,
                    "$lt": lambda a, b: a is not None and a < b,
                    "$lte": lambda a, b: a is not None and a <= b,
                    "$exists": lambda a, b: (a is not None) == b,
                }[op](value, expected)
            except KeyError:
                raise StoreError(f"unsupported selector operator {op}") from None
            except TypeError:
                ok = False
            if not ok:
                return False
    return True


def _private_database(path: Path) -> None:
    """The database file (created empty if missing) and its WAL files readable by us only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE))
    for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        private_file(f)


class EmbeddedStore:
    def __init__(self, path: str | Path, threaded: bool = True, durable: bool = True) -> None:
        """``path`` ``":memory:"`` keeps nothing on disk; ``threaded=False`` runs SQLite on
        the loop's thread (only for the simulator, where the loop's time is virtual and a
        worker thread would let real time leak in). ``durable=False``: a scratch file that
        one process uses and nobody reads after a crash (the simulator's, in its run's
        temporary directory): SQLite neither syncs nor takes file locks per transaction,
        which were most of the cost of writing a record; every record is still written."""
        self.path = path if path == ":memory:" else Path(path)
        self.durable = durable
        if isinstance(self.path, Path):
            _private_database(self.path)
        self._pool = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedded-store")
            if threaded
            else None
        )
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            if not self.durable:  # before WAL: then no shared-memory file either
                conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={'NORMAL' if self.durable else 'OFF'}")
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    async def _run(self, fn, *args):
        if self._pool is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # -- synchronous implementations, run on the store's thread (or by a synchronous tool) --

    def put_sync(self, db: str, doc: dict[str, Any]) -> str:
        conn = self._db()
        docid = doc.get("_id")
        if not isinstance(docid, str) or not docid:
            raise StoreError("document has no _id")
        row = conn.execute(
            "SELECT rev, deleted FROM docs WHERE db=? AND id=?", (db, docid)
        ).fetchone()
        given = doc.get("_rev")
        if row is not None and not row[1] and row[0] != given:
            raise Conflict(f"{db}/{docid}")
        if row is not None and row[1] and given not in (None, row[0]):
            raise Conflict(f"{db}/{docid}")
        body_doc = {k: v for k, v in doc.items() if k not in ("_rev",)}
        body = dumps(body_doc)
        rev = _next_rev(row[0] if row else None, body)
        cols = [doc.get(c) if isinstance(doc.get(c), str | int) else None for c in _COLUMNS]
        conn.execute(
            "INSERT OR REPLACE INTO docs (db, id, rev, deleted, namespace, name, start, body)"
            " VALUES (?, ?, ?, 0, ?, ?, ?, ?)",
            (db, docid, rev, *cols, body),
        )
        return rev

    def get_sync(self, db: str, docid: str) -> dict[str, Any] | None:
        row = (
            self._db()
            .execute("SELECT rev, body FROM docs WHERE db=? AND id=? AND deleted=0", (db, docid))
            .fetchone()
        )
        if row is None:
            return None
        doc = loads(row[1])
        doc["_rev"] = row[0]
        atts = (
            self._db()
            .execute(
                "SELECT name, content_type, length(data) FROM attachments WHERE db=? AND id=?",
                (db, docid),
            )
            .fetchall()
        )
        if atts:
            doc["_attachments"] = {
                n: {"content_type": ct, "length": ln, "stub": True} for n, ct, ln in atts
            }
        return doc

    def _bulk_sync(self, db: str, docs: list[dict[str, Any]]) -> list[WriteResult]:
        out = []
        conn = self._db()
        conn.execute("BEGIN")
        try:
            for doc in docs:
                try:
                    out.append(WriteResult(doc["_id"], self.put_sync(db, doc)))
                except Conflict:
                    out.append(WriteResult(doc.get("_id", ""), None, "conflict"))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return out

    def _attach_sync(
        self, db: str, docid: str, rev: str, name: str, data: bytes, content_type: str
    ) -> str:
        conn = self._db()
        row = conn.execute(
            "SELECT rev, body FROM docs WHERE db=? AND id=? AND deleted=0", (db, docid)
        ).fetchone()
        if row is None or row[0] != rev:
            raise Conflict(f"{db}/{docid}")
        conn.execute(
            "INSERT OR REPLACE INTO attachments VALUES (?, ?, ?, ?, ?)",
            (db, docid, name, content_type, data),
        )
        new_rev = _next_rev(rev, row[1] + name.encode())
        conn.execute("UPDATE docs SET rev=? WHERE db=? AND id=?", (new_rev, db, docid))
        return new_rev

    def delete_sync(self, db: str, docid: str, rev: str) -> None:
        conn = self._db()
        row = conn.execute(
            "SELECT rev FROM docs WHERE db=? AND id=? AND deleted=0", (db, docid)
        ).fetchone()
        if row is None:
            raise StoreError(f"{db}/{docid} not found")
        if row[0] != rev:
            raise Conflict(f"{db}/{docid}")
        conn.execute(
            "UPDATE docs SET deleted=1, rev=?, body=? WHERE db=? AND id=?",
            (_next_rev(rev, b"deleted"), dumps({"_id": docid}), db, docid),
        )
        conn.execute("DELETE FROM attachments WHERE db=? AND id=?", (db, docid))

    def find_sync(
        self,
        db: str,
        selector: dict[str, Any],
        sort: list[dict[str, str]] | None,
        limit: int,
        skip: int,
    ) -> list[dict[str, Any]]:
        where, params, rest = ["db=?", "deleted=0"], [db], {}
        for field, cond in selector.items():
            conds = cond if isinstance(cond, dict) else {"$eq": cond}
            if field in _COLUMNS and all(op in _OPS for op in conds):
                for op, v in conds.items():
                    where.append(f"{field} {_OPS[op]} ?")
                    params.append(v)
            else:
                rest[field] = cond
        order = ""
        if sort:
            ((field, direction),) = sort[-1].items()
            if field not in _COLUMNS:
                raise StoreError(f"cannot sort on {field}")
            order = f" ORDER BY {field} {'DESC' if direction == 'desc' else 'ASC'}, id"
        sql = f"SELECT rev, body FROM docs WHERE {' AND '.join(where)}{order}"
        out: list[dict[str, Any]] = []
        skipped = 0
        for rev, body in self._db().execute(sql, params):
            doc = loads(body)
            if rest and not _matches(doc, rest):
                continue
            if skipped < skip:
                skipped += 1
                continue
            doc["_rev"] = rev
            out.append(doc)
            if len(out) >= limit:
                break
        return out

    # -- the async Store interface --

    async def ensure_db(self, db: str) -> None:
        await self._run(lambda: self._db().execute("INSERT OR IGNORE INTO dbs VALUES (?)", (db,)))

    async def get(self, db: str, docid: str) -> dict[str, Any] | None:
        return await self._run(self.get_sync, db, docid)

    async def get_attachment(self, db: str, docid: str, name: str) -> bytes | None:
        def fetch() -> bytes | None:
            row = (
                self._db()
                .execute(
                    "SELECT data FROM attachments WHERE db=? AND id=? AND name=?", (db, docid, name)
                )
                .fetchone()
            )
            return bytes(row[0]) if row else None

        return await self._run(fetch)

    async def put(self, db: str, doc: dict[str, Any]) -> str:
        return await self._run(self.put_sync, db, doc)

    async def put_attachment(
        self, db: str, docid: str, rev: str, name: str, data: bytes, content_type: str
    ) -> str:
        return await self._run(self._attach_sync, db, docid, rev, name, data, content_type)

    async def bulk(self, db: str, docs: list[dict[str, Any]]) -> list[WriteResult]:
        return await self._run(self._bulk_sync, db, docs)

    async def delete(self, db: str, docid: str, rev: str) -> None:
        await self._run(self.delete_sync, db, docid, rev)

    async def find(
        self,
        db: str,
        selector: dict[str, Any],
        *,
        sort: list[dict[str, str]] | None = None,
        limit: int = 25,
        skip: int = 0,
    ) -> list[dict[str, Any]]:
        return await self._run(self.find_sync, db, selector, sort, limit, skip)

    async def close(self) -> None:
        def shut() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await self._run(shut)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
