"""An in-process bus for the embedded mode and the simulator: one partition per topic,
consumer groups with committed offsets, same semantics as the Kafka bus."""

from __future__ import annotations

import asyncio

from whisk.bus.base import MessageTooLarge, Record


class _Topic:
    """A log of messages; ``base`` is the offset of ``log[0]``. Messages every group has
    committed past are dropped, so a long-running embedded deployment stays bounded."""

    TRIM_EVERY = 4096

    def __init__(self, max_message_bytes: int) -> None:
        self.log: list[bytes] = []
        self.base = 0
        self.max_message_bytes = max_message_bytes
        self.waiters: list[asyncio.Future[None]] = []  # polls waiting for a message
        self.committed: dict[str, int] = {}

    def wake(self) -> None:
        """Something changed (a message, a resume): every waiting poll looks again."""
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def end(self) -> int:
        return self.base + len(self.log)

    def read(self, start: int, count: int) -> list[bytes]:
        i = max(0, start - self.base)
        return self.log[i : i + count]

    def commit(self, group: str, offset: int) -> None:
        self.committed[group] = offset
        low = min(self.committed.values())
        if low - self.base >= self.TRIM_EVERY:
            del self.log[: low - self.base]
            self.base = low


class MemoryBus:
    def __init__(self, max_message_bytes: int = 1_054_644) -> None:
        self._topics: dict[str, _Topic] = {}
        self.max_message_bytes = max_message_bytes

    def topic(self, name: str) -> _Topic:
        t = self._topics.get(name)
        if t is None:
            t = self._topics[name] = _Topic(self.max_message_bytes)
        return t

    def consumer(self, topic: str, group: str) -> MemoryConsumer:
        return MemoryConsumer(self.topic(topic), topic, group)

    def producer(self, batching: bool = False) -> MemoryProducer:
        return MemoryProducer(self)

    async def ensure_topic(self, topic: str, config: dict[str, str]) -> None:
        limit = config.get("max.message.bytes")
        t = self.topic(topic)
        if limit is not None:
            t.max_message_bytes = int(limit)


class MemoryConsumer:
    def __init__(self, topic: _Topic, name: str, group: str) -> None:
        self._topic = topic
        self._name = name
        self._group = group
        self._position = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None  # of the poll under way
        self._expired = False  # its time is up

    async def start(self) -> None:
        self._position = max(self._topic.committed.get(self._group, 0), self._topic.base)

    async def poll(self, max_records: int, timeout_s: float) -> list[Record]:
        t = self._topic
        if self._paused or self._position >= t.end:
            # A timer that wakes the wait, not asyncio.timeout: an empty poll ends without
            # cancelling the task and raising through it (the feed polls twice a second).
            loop = asyncio.get_running_loop()
            self._expired = False
            timer = loop.call_later(timeout_s, self._expire)
            try:
                while self._paused or self._position >= t.end:
                    if self._expired:
                        return []
                    self._waiter = waiter = loop.create_future()
                    t.waiters.append(waiter)
                    await waiter
            finally:
                timer.cancel()
                left, self._waiter = self._waiter, None
                if left is not None and left in t.waiters:  # not woken: expired, cancelled
                    t.waiters.remove(left)
        start = self._position
        batch = t.read(start, max_records)
        self._position += len(batch)
        return [Record(self._name, 0, start + i, v) for i, v in enumerate(batch)]

    def _expire(self) -> None:
        self._expired = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def commit(self, offsets: dict[int, int]) -> None:
        if 0 in offsets:
            self._topic.commit(self._group, offsets[0])

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        self._topic.wake()

    async def end_offsets(self) -> dict[int, int]:
        return {0: self._topic.end}

    async def stop(self) -> None:
        pass


class MemoryProducer:
    def __init__(self, bus: MemoryBus) -> None:
        self._bus = bus

    async def start(self) -> None:
        pass

    async def send(self, topic: str, value: bytes) -> None:
        t = self._bus.topic(topic)
        if len(value) > t.max_message_bytes:
            raise MessageTooLarge(f"{len(value)} bytes > {t.max_message_bytes} on {topic}")
        t.log.append(value)
        t.wake()

    async def stop(self) -> None:
        pass
