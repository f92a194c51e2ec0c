"""A tenant's GPU action, in the process backend's sandbox, goes for the kTask data layer:
over the pool's socket bound into it (``__OW_GPU_POOL``) it is refused every data op, and
the operator's socket (``GpuPool.data_address``) is neither in its view nor open to its uid.
The operator's own put of alice's key is what it tries to read, overwrite and delete."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install .[gpu])")

from containers.process.backend import ProcessBackend
from gpu.config import GpuConfig
from gpu.kaas.client import KaasClient
from gpu.pool import GpuPool
from tests.integration.containers.backends import (
    Maker,
    new_prefix,
    py,
    result,
    run,
    state_dir,  # noqa: F401  (a fixture)
)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root"),
    pytest.mark.gpu,
    pytest.mark.timeout(180),
]

ATTACK_PY = py("""
    import os
    from gpu.protocol import connect_sync, read_frame_sync, write_frame_sync

    def ask(address, header, payload=b""):
        try:
            with connect_sync(address, 10) as s:
                write_frame_sync(s, header, payload)
                h, body = read_frame_sync(s)
            return {"ok": "error" not in h, "reply": h, "body": body.hex()}
        except Exception as e:
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}

    def main(a):
        shared = os.environ["__OW_GPU_POOL"]
        key = "alice/secret"
        out = {
            "put": ask(shared, {"op": "put", "key": key, "dtype": "float32", "shape": [2]},
                       bytes(8)),
            "get": ask(shared, {"op": "get", "key": key}),
            "delete": ask(shared, {"op": "delete", "key": key}),
            "ktask": ask(shared, {"op": "ktask", "task": a["task"], "params": {}, "ns": "alice"}),
            "hello": ask(shared, {"op": "hello"}),
            "operator": ask(a["operator"], {"op": "get", "key": key}),
        }
        try:
            out["beside"] = sorted(os.listdir(os.path.dirname(shared.removeprefix("unix:"))))
        except OSError as e:
            out["beside"] = f"{type(e).__name__}: {e}"
        return out
""")


@pytest.fixture
async def pool() -> AsyncIterator[GpuPool]:
    p = GpuPool(GpuConfig(devices="virtual:1", memory_mb=64))
    async with p:
        yield p


@pytest.fixture
async def backend(state_dir: Path, pool: GpuPool) -> AsyncIterator[ProcessBackend]:  # noqa: F811
    b = ProcessBackend(state_dir / "state", new_prefix())
    path = pool.socket_path()
    assert path is not None
    b.share_socket(path)  # as the invoker does, before start
    await b.start()
    yield b
    await b.close()
    await b.remove_leftovers()


async def test_a_sandboxed_gpu_action_cannot_reach_the_data_layer(
    pool: GpuPool, backend: ProcessBackend
) -> None:
    secret = np.array([4, 2], np.float32)
    operator = KaasClient(pool.data_address)
    await asyncio.to_thread(operator.put, "alice/secret", secret.tobytes(), "float32", [2])
    # the runtime's GPU hook imports torch: room for it
    bob = await Maker(backend)(ATTACK_PY, memory_mb=2048, env=pool.action_env())
    task = {"buffers": {}, "kernels": []}
    r = result(await run(bob, {"operator": pool.data_address, "task": task}))
    for op in ("put", "get", "delete", "ktask"):
        assert r[op]["reply"]["error"] == "Forbidden", (op, r[op])
        assert "no caller identity" in r[op]["reply"]["message"]
    assert r["hello"]["ok"], r["hello"]  # the shared socket itself was reachable
    assert not r["operator"]["ok"] and "Error" in r["operator"]["error"], r["operator"]
    assert r["beside"] == ["pool.sock"], "only the shared socket's path is bound in"
    meta, data = await asyncio.to_thread(operator.get, "alice/secret")  # untouched
    assert meta["version"] == 1 and data == secret.tobytes()
