"""Invoker health and placement, as the stock ShardingContainerPoolBalancer and
InvokerSupervision do it (spec 1.5-1.6), as pure logic with time passed in.

A pinging invoker starts ``unhealthy``; the front sends it the health test action, and one
successful completion makes it ``up``. More than 3 system errors among its last 10
completions make it ``unhealthy``, more than 3 forced timeouts ``unresponsive``; no ping for
10 s (or a disabled ping) ``down``. Calls go to the action's home invoker (a hash of
namespace and action) or the next healthy one with memory to spare.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from whisk.protocol.limits import parse_byte_size


class Health(Enum):
    HEALTHY = "up"
    UNHEALTHY = "unhealthy"
    UNRESPONSIVE = "unresponsive"
    OFFLINE = "down"


class Result(Enum):
    SUCCESS = "success"
    SYSTEM_ERROR = "system error"
    TIMEOUT = "timeout"


PING_TIMEOUT_S = 10.0
TEST_INTERVAL_S = 60.0


@dataclass
class InvokerRecord:
    instance: int
    user_memory_mb: int
    instance_json: dict[str, Any]
    state: Health = Health.UNHEALTHY
    last_ping: float = 0.0
    last_test: float = float("-inf")
    results: deque[Result] = field(default_factory=lambda: deque(maxlen=10))
    busy_mb: int = 0


def _memory_mb(byte_size: str) -> int:
    value = parse_byte_size(byte_size)
    return value // (1024 * 1024) if value else 0


class Balancer:
    def __init__(self) -> None:
        self.invokers: dict[int, InvokerRecord] = {}

    def ping(self, instance_json: dict[str, Any], enabled: bool, now: float) -> bool:
        """Record a ping; True if the invoker needs a health test action now."""
        n = int(instance_json["instance"])
        rec = self.invokers.get(n)
        if rec is None:
            rec = self.invokers[n] = InvokerRecord(
                n, _memory_mb(instance_json.get("userMemory", "0 B")), instance_json
            )
        rec.instance_json = instance_json
        rec.last_ping = now
        if not enabled:
            rec.state = Health.OFFLINE
            return False
        if rec.state is Health.OFFLINE:
            rec.state = Health.UNHEALTHY
            rec.results.clear()
            rec.last_test = float("-inf")  # entering Unhealthy: test at once
        return self._test_due(rec, now)

    def _test_due(self, rec: InvokerRecord, now: float) -> bool:
        if rec.state in (Health.UNHEALTHY, Health.UNRESPONSIVE) and (
            now - rec.last_test >= TEST_INTERVAL_S
        ):
            rec.last_test = now
            return True
        return False

    def tick(self, now: float) -> list[int]:
        """Expire silent invokers; return those due a health test."""
        due = []
        for rec in self.invokers.values():
            if rec.state is not Health.OFFLINE and now - rec.last_ping > PING_TIMEOUT_S:
                rec.state = Health.OFFLINE
            elif self._test_due(rec, now):
                due.append(rec.instance)
        return due

    def completed(self, instance: int, result: Result, now: float) -> bool:
        """Record a completion; True if another health test should go out at once."""
        rec = self.invokers.get(instance)
        if rec is None:
            return False
        rec.results.append(result)
        errors = sum(1 for r in rec.results if r is Result.SYSTEM_ERROR)
        timeouts = sum(1 for r in rec.results if r is Result.TIMEOUT)
        was = rec.state
        if rec.state is Health.OFFLINE:
            return False
        if errors > 3:
            rec.state = Health.UNHEALTHY
        elif timeouts > 3:
            rec.state = Health.UNRESPONSIVE
        elif result is Result.SUCCESS:
            rec.state = Health.HEALTHY
        entered = rec.state is not was and rec.state in (Health.UNHEALTHY, Health.UNRESPONSIVE)
        again = rec.state is Health.UNHEALTHY and result is Result.SUCCESS and was is rec.state
        if entered or again:  # on entering, and after each success while still unhealthy
            rec.last_test = now
            return True
        return False

    def healthy(self) -> list[InvokerRecord]:
        return [r for _, r in sorted(self.invokers.items()) if r.state is Health.HEALTHY]

    def choose(self, namespace: str, action: str, memory_mb: int) -> int | None:
        """The home invoker of (namespace, action) or the next healthy one with free memory;
        when every healthy invoker is full, the home one anyway (it queues)."""
        healthy = self.healthy()
        if not healthy:
            return None
        home = zlib.crc32(f"{namespace}/{action}".encode()) % len(healthy)
        for i in range(len(healthy)):
            rec = healthy[(home + i) % len(healthy)]
            if rec.busy_mb + memory_mb <= rec.user_memory_mb:
                rec.busy_mb += memory_mb
                return rec.instance
        rec = healthy[home]
        rec.busy_mb += memory_mb
        return rec.instance

    def release(self, instance: int, memory_mb: int) -> None:
        rec = self.invokers.get(instance)
        if rec is not None:
            rec.busy_mb = max(0, rec.busy_mb - memory_mb)

    def states(self) -> dict[str, str]:
        return {f"invoker{n}": r.state.value for n, r in sorted(self.invokers.items())}
