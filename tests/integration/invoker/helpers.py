"""Helpers for fault tests: process inspection (the invoker in its own process is
``harness.processes.InvokerProcess``) and the invoker's own view of itself."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from tests.procs import alive

ROOT = Path(__file__).resolve().parents[3]


def processes_with_marker(prefix: str) -> list[int]:
    """Live processes of the process backend carrying this container prefix."""
    needle = b"\0--marker\0" + prefix.encode() + b"\0"
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and alive(int(entry)):
            pids.append(int(entry))
    return pids


@dataclass(frozen=True)
class Seen:
    """One reading of an invoker's own ``/status`` (admin API), at ``t`` (monotonic)."""

    t: float
    kafka_trouble: bool  # a health ping Kafka did not take, or acks waiting for Kafka
    spooled: int  # records waiting in its spool for CouchDB
    durable: int  # records it has written to CouchDB, or spooled


def admin_auth(user: str = "invoker.user", password: str = "invoker.pass") -> dict[str, str]:
    """The admin API's basic-auth header (make_config's credentials by default), as
    headers: aiohttp deprecates its ``BasicAuth`` and ``auth=``."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@asynccontextmanager
async def watching(admin_port: int, every_s: float = 0.25) -> AsyncIterator[list[Seen]]:
    """Readings of the invoker's ``/status`` every ``every_s`` while the block runs (none
    while it does not answer)."""
    seen: list[Seen] = []
    stop = asyncio.Event()
    timeout = aiohttp.ClientTimeout(total=2)

    async def watch() -> None:
        async with aiohttp.ClientSession(headers=admin_auth(), timeout=timeout) as http:
            while not stop.is_set():
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with http.get(f"http://127.0.0.1:{admin_port}/status") as r:
                        s = await r.json()
                    spooled = s["spooledRecords"]
                    trouble = bool({"kafka", "acks"} & s["problems"].keys())
                    durable = s["recordsWritten"] + spooled
                    seen.append(Seen(time.monotonic(), trouble, spooled, durable))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), every_s)

    watcher = asyncio.create_task(watch())
    try:
        yield seen
    finally:
        stop.set()
        await watcher
