"""Which offsets may be committed: never past an activation that is not finished.

Commit position = the lowest offset still in flight, or one past the highest offset seen
when nothing is in flight. A crash then re-delivers every unfinished activation (and
possibly some finished ones, which the invoker de-duplicates by activation id). Within one
process, an offset already taken is refused: a consumer that lost its group membership (a
broker link down for longer than the session timeout) is sent back to the committed offset
when it rejoins, and what it gets again is running here or already answered.
"""

from __future__ import annotations

import heapq


class OffsetTracker:
    def __init__(self) -> None:
        self._in_flight: dict[int, list[int]] = {}  # partition -> heap of offsets
        self._done: dict[int, set[int]] = {}  # finished offsets still above the heap's head
        self._next: dict[int, int] = {}  # partition -> one past the highest offset seen
        self._committed: dict[int, int] = {}

    def received(self, partition: int, offset: int) -> bool:
        """Take an offset; False, and nothing changes, if it was taken before (a partition
        is delivered in order, so any offset below the highest seen was)."""
        if offset < self._next.get(partition, 0):
            return False
        heapq.heappush(self._in_flight.setdefault(partition, []), offset)
        self._next[partition] = offset + 1
        return True

    def finished(self, partition: int, offset: int) -> None:
        heap = self._in_flight[partition]
        done = self._done.setdefault(partition, set())
        done.add(offset)
        while heap and heap[0] in done:
            done.discard(heapq.heappop(heap))

    @property
    def in_flight(self) -> int:
        return sum(len(h) - len(self._done.get(p, ())) for p, h in self._in_flight.items())

    def committable(self) -> dict[int, int]:
        """``partition -> offset`` positions that advanced since the last :meth:`committed`."""
        out = {}
        for p, nxt in self._next.items():
            heap = self._in_flight.get(p)
            position = heap[0] if heap else nxt
            if position > self._committed.get(p, -1):
                out[p] = position
        return out

    def committed(self, positions: dict[int, int]) -> None:
        for p, o in positions.items():
            self._committed[p] = max(self._committed.get(p, -1), o)
