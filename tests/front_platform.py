"""An in-process platform (front + invoker) for tests: choose the bus, store and backend."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from containers.backend import ContainerBackend
from front.identities import GUEST_AUTH, basic_auth
from front.server import Front, start_front
from invoker.config import InvokerConfig
from invoker.service import Invoker
from whisk.bus import Bus
from whisk.clock import SystemClock
from whisk.store import Store


@dataclass
class Platform:
    front: Front
    invoker: Invoker
    url: str
    http: aiohttp.ClientSession

    async def call(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        async with self.http.request(method, self.url + path, **kw) as r:
            body = await r.read()
            try:
                return r.status, await r.json(content_type=None)
            except ValueError:
                return r.status, body.decode()


@asynccontextmanager
async def platform(
    *,
    bus: Bus,
    store: Store,
    backend: ContainerBackend,
    state_dir: Path,
    front_options: dict[str, Any] | None = None,
    gpu_pool: Any = None,
    **config: Any,
):
    """``front_options``: more of :func:`start_front`'s keyword arguments; ``gpu_pool``: the
    invoker's GPU pool (started and stopped by the invoker)."""
    clock = SystemClock()
    cfg = InvokerConfig(state_dir=str(state_dir), **config)
    front = await start_front(
        bus=bus,
        store=store,
        clock=clock,
        host="127.0.0.1",
        port=0,
        whisks_db=cfg.whisks_db,
        activations_db=cfg.activations_db,
        topic_prefix=cfg.topic_prefix,
        state_dir=state_dir,
        **(front_options or {}),
    )
    invoker = Invoker(cfg, bus=bus, store=store, backend=backend, clock=clock, gpu_pool=gpu_pool)
    await invoker.start()
    http = aiohttp.ClientSession(headers={"Authorization": basic_auth(GUEST_AUTH)})
    try:
        await front.controller.wait_for_invokers(1, timeout_s=60)
        yield Platform(front, invoker, front.url, http)
    finally:
        await http.close()
        await front.stop()
        await invoker.stop(deadline_s=5)
        await asyncio.sleep(0)
