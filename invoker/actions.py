"""Fetching actions from the whisks database, cached by id and revision.

A message names a revision; the document is fetched once per (id, revision) and shared by
every call of it (concurrent fetches of one key wait for the same request). A message
without revision (the controller's health action) always reads the latest document.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from whisk.protocol import ProtocolError, action_from_document
from whisk.protocol.actions import Action
from whisk.protocol.records import StatusCode
from whisk.protocol.runtime import ACTION_NOT_COMPATIBLE, ACTION_NOT_FETCHED, ACTION_NOT_FOUND
from whisk.store import Store, StoreError


class FetchError(Exception):
    """The action cannot be run; carries the status code and message of the fallback record."""

    def __init__(self, code: StatusCode, message: str, detail: str = "") -> None:
        super().__init__(f"{message} {detail}".strip())
        self.code = code
        self.message = message


class ActionFetcher:
    def __init__(
        self, store: Store, db: str, kind_defaults: dict[str, str], max_entries: int = 1024
    ) -> None:
        self.store = store
        self.db = db
        self.kind_defaults = kind_defaults
        self.max_entries = max_entries
        self._cache: OrderedDict[tuple[str, str], Action] = OrderedDict()
        self._inflight: dict[tuple[str, str | None], asyncio.Future[Action]] = {}
        self.hits = 0
        self.misses = 0

    async def fetch(self, docid: str, revision: str | None) -> Action:
        if revision is not None:
            cached = self._cache.get((docid, revision))
            if cached is not None:
                self._cache.move_to_end((docid, revision))
                self.hits += 1
                return cached
        key = (docid, revision)
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        self.misses += 1
        fut: asyncio.Future[Action] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            action = await self._load(docid, revision)
            fut.set_result(action)
            return action
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # mark retrieved: waiters (if any) re-raise it themselves
            raise
        finally:
            del self._inflight[key]

    async def _load(self, docid: str, revision: str | None) -> Action:
        try:
            doc = await self.store.get(self.db, docid)
        except StoreError as e:
            raise FetchError(StatusCode.WHISK_ERROR, ACTION_NOT_FETCHED, str(e)) from e
        if doc is None:
            raise FetchError(StatusCode.APPLICATION_ERROR, ACTION_NOT_FOUND)
        try:
            action = action_from_document(doc, self.kind_defaults)
        except ProtocolError as e:
            raise FetchError(StatusCode.WHISK_ERROR, ACTION_NOT_COMPATIBLE, e.reason) from e
        if action.code_attachment is not None:
            try:
                data = await self.store.get_attachment(self.db, docid, action.code_attachment)
            except StoreError as e:
                raise FetchError(StatusCode.WHISK_ERROR, ACTION_NOT_FETCHED, str(e)) from e
            if data is None:
                raise FetchError(
                    StatusCode.WHISK_ERROR, ACTION_NOT_FETCHED, "code attachment missing"
                )
            try:
                action = action.with_attachment(data)
            except ProtocolError as e:
                raise FetchError(StatusCode.WHISK_ERROR, ACTION_NOT_COMPATIBLE, e.reason) from e
        for rev in {action.revision, revision}:
            if rev is not None:
                self._cache[docid, rev] = action
                self._cache.move_to_end((docid, rev))
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return action
