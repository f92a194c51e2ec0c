"""An in-process platform running real action runtimes (the process backend) on an embedded
bus and store: the REST API's entity semantics end to end, without external services."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from containers.process.backend import ProcessBackend
from front.identities import SYSTEM, basic_auth
from tests.front_platform import Platform, platform
from whisk.bus.memory import MemoryBus
from whisk.store.embedded import EmbeddedStore

NS = "/api/v1/namespaces/_"
SYSTEM_AUTH = {"Authorization": basic_auth(SYSTEM.authkey["api_key"])}


@contextlib.asynccontextmanager
async def live_platform(
    front_options: dict[str, Any], gpu_pool: Any = None, **options: Any
) -> AsyncIterator[Platform]:
    """The platform on an embedded store and process containers, in a state directory of
    its own (outside /tmp, so that the process backend can give each container a private
    /tmp), removed after."""
    state = Path(tempfile.mkdtemp(prefix="owfront-", dir="/var/tmp"))
    store = EmbeddedStore(state / "db.sqlite3")
    backend = ProcessBackend(state / "containers", f"wskf{uuid.uuid4().hex[:6]}")
    try:
        async with platform(
            bus=MemoryBus(),
            store=store,
            backend=backend,
            state_dir=state,
            gpu_pool=gpu_pool,
            front_options=front_options,
            policy="fifo",
            action_cores=(0,),
            **options,
        ) as plat:
            yield plat
    finally:
        await store.close()
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
async def live(request: pytest.FixtureRequest) -> AsyncIterator[Platform]:
    """The platform; ``@pytest.mark.front_options(...)`` passes options to the front."""
    marker = request.node.get_closest_marker("front_options")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    async with live_platform(options, pause_grace_s=60) as plat:
        yield plat


async def put_action(p: Platform, name: str, code: str, kind: str = "python:default", **more):
    body = {"exec": {"kind": kind, "code": code}, **more}
    status, doc = await p.call("PUT", f"{NS}/actions/{name}?overwrite=true", json=body)
    assert status == 200, doc
    return doc


async def invoke(p: Platform, name: str, payload: dict | None = None, ns: str = NS, **kw):
    """A blocking invoke: (HTTP status, activation record)."""
    return await p.call("POST", f"{ns}/actions/{name}?blocking=true", json=payload or {}, **kw)


async def activation(p: Platform, aid: str, tries: int = 200) -> dict:
    """The stored record of ``aid``, waiting for it to be written."""
    import asyncio

    for _ in range(tries):
        status, rec = await p.call("GET", f"{NS}/activations/{aid}")
        if status == 200:
            return rec
        await asyncio.sleep(0.05)
    raise AssertionError(f"activation {aid} was never stored")
