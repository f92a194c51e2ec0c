"""The bus interface: topics of byte messages, consumer groups with manual commits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    value: bytes


class MessageTooLarge(Exception):
    """The bus refused a message for its size (the caller may resend it shrunk)."""


class BusUnavailable(Exception):
    """The bus could not be reached in time."""


class Consumer(Protocol):
    async def start(self) -> None: ...

    async def poll(self, max_records: int, timeout_s: float) -> list[Record]:
        """Up to ``max_records`` records; empty after ``timeout_s`` or while paused."""
        ...

    async def commit(self, offsets: dict[int, int]) -> None:
        """Commit ``partition -> next offset to read`` for the group."""
        ...

    def pause(self) -> None:
        """Stop fetching (back-pressure) while the group membership stays alive."""
        ...

    def resume(self) -> None: ...

    async def end_offsets(self) -> dict[int, int]:
        """Current end offset of each assigned partition."""
        ...

    async def stop(self) -> None: ...


class Producer(Protocol):
    async def start(self) -> None: ...

    async def send(self, topic: str, value: bytes) -> None:
        """Send and wait for the broker's acknowledgement; raises MessageTooLarge."""
        ...

    async def stop(self) -> None: ...


class Bus(Protocol):
    def consumer(self, topic: str, group: str) -> Consumer: ...

    def producer(self, batching: bool = False) -> Producer:
        """``batching``: may hold messages a few milliseconds to send them together (for
        messages nobody waits on); otherwise each is sent at once."""
        ...

    async def ensure_topic(self, topic: str, config: dict[str, str]) -> None:
        """Create a single-partition topic unless it exists."""
        ...
