"""A short-lived cache of action documents for the invoke path.

The stock controller caches entities and invalidates them across controllers through the
``cacheInvalidation`` topic. This front drops an entry on its own writes and keeps others for
``ttl_s`` seconds, so a change made through another front is seen within that time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from whisk.clock import Clock


class DocumentCache:
    def __init__(
        self,
        fetch: Callable[[str], Awaitable[dict[str, Any] | None]],
        clock: Clock,
        ttl_s: float = 2.0,
        max_entries: int = 4096,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, dict[str, Any] | None]] = OrderedDict()

    async def get(self, docid: str) -> dict[str, Any] | None:
        now = self._clock.now()
        hit = self._entries.get(docid)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        doc = await self._fetch(docid)
        self._entries[docid] = (now, doc)
        self._entries.move_to_end(docid)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return doc

    def invalidate(self, docid: str) -> None:
        self._entries.pop(docid, None)
