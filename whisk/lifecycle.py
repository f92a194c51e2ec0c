"""Running a long-lived service process: until SIGTERM/SIGINT, or until its supervisor says a
background task kept failing (then the process exits with :data:`EXIT_FAILED`, for systemd
or Kubernetes to start a healthy one). Shared by ``run``, ``front`` and ``standalone``."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

from whisk.supervisor import child

T = TypeVar("T")
EXIT_FAILED = 3


class NodeFailed(Exception):
    """A background task kept failing: the process must exit non-zero to be restarted."""


async def wait_for_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def wait_for_signal_or(other: Coroutine[Any, Any, T]) -> T | None:
    """Wait for SIGTERM/SIGINT (None) or for ``other`` to finish (its result)."""
    waiter = child(other, name="wait-failed")
    signalled = child(wait_for_signal(), name="wait-signal")
    try:
        await asyncio.wait((waiter, signalled), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (waiter, signalled):
            t.cancel()
        await asyncio.gather(waiter, signalled, return_exceptions=True)
    return waiter.result() if waiter.done() and not waiter.cancelled() else None
