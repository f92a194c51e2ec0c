"""Intra-container concurrency: the waiting calls of each group (calls that may share a
container, an action's ``limits.concurrency`` N > 1) and its containers with room."""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from invoker.scheduler.calls import Call, Entry, Shared


@dataclass(slots=True, eq=False)
class Group:
    """The waiting calls of one group (a heap whose entries go stale when a call starts
    from the main queue; ``waiting`` is exact) and its containers with room."""

    heap: list[Entry] = field(default_factory=list)
    waiting: int = 0
    open: list[Shared] = field(default_factory=list)


class Groups:
    """The groups by key, and those with a waiting call and a container with room
    (``joinable``: kept exact, so the queue asks it first at no cost)."""

    def __init__(self) -> None:
        self.by_key: dict[Hashable, Group] = {}
        self.joinable: dict[Hashable, Group] = {}

    def admit(self, entry: Entry) -> None:
        group = entry.call.group
        g = self.by_key.get(group)
        if g is None:
            g = self.by_key[group] = Group()
        heapq.heappush(g.heap, entry)
        g.waiting += 1
        if g.open:
            self.joinable[group] = g

    def first_join(self) -> tuple[Call[Any], Shared]:
        """(call, container): the best waiting call of the first joinable group and the
        container of its group it would join (there is one: ``joinable`` is not empty)."""
        g = next(iter(self.joinable.values()))  # its heap's top is live: see _refresh
        return g.heap[0].call, g.open[0]

    def start(
        self, call: Call[Any], joins: Shared | None, core: int | None, share: float
    ) -> Shared:
        """The call of a group starts: in ``joins`` (taken off its group's heap), or in a
        container of its own on ``core`` (taken off the main queue by the caller), which
        opens a :class:`Shared`. Returns the container it runs in."""
        group = call.group
        g = self.by_key[group]
        g.waiting -= 1
        if joins is not None:
            heapq.heappop(g.heap)
            joins.calls += 1
            if joins.calls >= joins.limit:
                g.open.remove(joins)
            shared = joins
        else:
            shared = Shared(group, call.function, call.limit, core, share, calls=1)
            g.open.append(shared)
        self._refresh(group, g)
        return shared

    def close(self, shared: Shared) -> None:
        """The container will take no more calls (it is going); those in it finish."""
        if shared.closed:
            return
        shared.closed = True
        g = self.by_key.get(shared.group)
        if g is not None and shared in g.open:
            g.open.remove(shared)
            self._refresh(shared.group, g)

    def leave(self, call: Call[Any], shared: Shared) -> bool:
        """A call left its shared container; True if it was the last (the container is
        closed, and its core is to be given back)."""
        call.shared = None
        call.core = None
        shared.calls -= 1
        g = self.by_key.get(shared.group)
        emptied = shared.calls == 0
        if emptied:
            if g is not None and shared in g.open:
                g.open.remove(shared)
            shared.closed = True
        elif not shared.closed and shared.calls == shared.limit - 1:  # it has room again
            if g is None:
                g = self.by_key[shared.group] = Group()
            g.open.append(shared)
        if g is not None:
            self._refresh(shared.group, g)
        return emptied

    def _refresh(self, group: Hashable, g: Group) -> None:
        """Keep ``joinable`` exact and forget a group with nothing waiting or open. Its
        heap's entries go stale only as its calls start, each start ends here, and the
        stale top is dropped: the top of a group's heap is always a waiting call."""
        heap = g.heap
        while heap and not heap[0].call.waiting:
            heapq.heappop(heap)
        if g.waiting and g.open:
            self.joinable[group] = g
            return
        self.joinable.pop(group, None)
        if not g.waiting and not g.open:
            del self.by_key[group]

    def drain(self) -> None:
        """Forget every waiting call (the queue hands them back); open containers stay."""
        self.joinable.clear()
        for group, g in list(self.by_key.items()):
            g.heap.clear()
            g.waiting = 0
            if not g.open:
                del self.by_key[group]
