"""kTasks in the live pool on virtual devices: the data layer and runs over the pool's socket
(``gpu.kaas.client``), calls sent to the device worker processes, results against numpy, and
the request's errors answered without harming the workers."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install .[gpu])")

from prometheus_client import CollectorRegistry, generate_latest

from gpu.config import GpuConfig
from gpu.kaas import examples
from gpu.kaas.client import KaasClient, KaasClientError
from gpu.pool import GpuPool
from tests.gpu import kaas_cases as cases

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(180)]


@pytest.fixture
async def pool():
    p = GpuPool(GpuConfig(devices="virtual:2", memory_mb=64), registry=CollectorRegistry())
    async with p:
        yield p


async def call(fn, *args):
    """A blocking client call off the loop the pool serves on."""
    return await asyncio.to_thread(fn, *args)


async def test_knn_and_cgemm_run_on_the_device_workers(pool: GpuPool):
    c = KaasClient(pool.address)
    a, x0 = cases.graph(), cases.start()
    put = await call(c.put, "graph/A", a.tobytes(), "float32", a.shape)
    assert put["version"] == 1 and put["shape"] == [cases.N, cases.N]
    await call(c.put, "knn/start", x0.tobytes(), "float32", x0.shape)
    first = await call(c.run, json.loads(cases.knn_action()), {"hops": 2})
    again = await call(c.run, json.loads(cases.knn_action()), {"hops": 4, "fetch": ["visited"]})
    assert first["outputs"] == {"visited": {"key": "knn/visited", "version": 1}}
    assert again["outputs"]["visited"]["version"] == 2
    assert first["constants"] == {"hits": 0, "misses": 1}
    assert again["constants"] == {"hits": 1, "misses": 0}  # A stayed on the device
    assert again["device"] == first["device"]  # placed where its constant is
    np.testing.assert_array_equal(again["values"]["visited"], cases.knn_expected(a, x0, 4))
    meta, data = await call(c.get, "knn/visited")
    assert meta["version"] == 2
    np.testing.assert_array_equal(cases.as_array(meta, data), cases.knn_expected(a, x0, 4))

    d = cases.cgemm_data()
    for part, key in cases.CGEMM_KEYS.items():
        await call(c.put, key, d[part].tobytes(), "float32", d[part].shape)
    out = await call(c.run, json.loads(cases.cgemm_action()), {})
    got = []
    for part in ("Yr", "Yi"):
        meta, data = await call(c.get, out["outputs"][part]["key"])
        got.append(cases.as_array(meta, data))
    np.testing.assert_allclose(got[0] + 1j * got[1], cases.cgemm_expected(d), rtol=1e-4, atol=1e-4)
    snap = pool.snapshot()
    assert all(dev["restarts"] == 0 for dev in snap["devices"])
    kaas = snap["kaas"]
    assert kaas["runs"] == 3 and kaas["failed"] == 0 and kaas["waiting"] == 0
    assert kaas["constant_hits"] == 1 and kaas["constant_misses"] == 3  # A, then Wr and Wi
    assert sorted(ck for held in kaas["constants"] for ck in held) == [
        "cgemm/W/im@1", "cgemm/W/re@1", "graph/A@1"
    ]  # fmt: skip
    text = generate_latest(pool.registry).decode()  # type: ignore[arg-type]
    assert 'owgpu_kaas_constant_lookups_total{outcome="hit"} 1.0' in text


async def test_inline_inputs_and_waiting_for_a_key(pool: GpuPool):
    c = KaasClient(pool.address)
    a = cases.graph()
    doc = json.loads(cases.knn_action())
    params = {"inputs": {"x0": cases.start().tolist()}, "fetch": True, "wait_s": 20}
    waiting = asyncio.ensure_future(call(c.run, doc, params))
    await asyncio.sleep(0.5)
    assert not waiting.done()  # graph/A is not there yet
    await call(c.put, "graph/A", a.tobytes(), "float32", a.shape)
    out = await asyncio.wait_for(waiting, 60)
    np.testing.assert_array_equal(out["values"]["visited"], cases.knn_expected(a, cases.start(), 3))
    assert len(pool.kaas.store) == 2  # graph/A and knn/visited: the inline input is gone


async def test_the_requests_errors_leave_the_workers_serving(pool: GpuPool):
    c = KaasClient(pool.address)
    doc = json.loads(cases.knn_action())
    with pytest.raises(KaasClientError, match="inputs 'graph/A' were not in the data") as e:
        await call(c.run, doc, {"inputs": {"x0": cases.start().tolist()}})
    assert e.value.kind == "KTaskError"
    with pytest.raises(KaasClientError, match=r"unknown parameter 'key' .did you mean 'keys'"):
        await call(c.run, doc, {"key": {}})
    with pytest.raises(KaasClientError, match="not in the data layer"):
        await call(c.get, "nothing/here")
    with pytest.raises(KaasClientError, match="bytes do not make float32"):
        await call(c.put, "bad", b"123", "float32", [1])
    # a kernel that fails on the device: CSR indices beyond the vector
    n = 4
    sparse = examples.knn(n, 1, sparse_nnz=2)
    await call(c.put, "graph/A/indptr", np.array([0, 1, 2, 2, 2], np.int64).tobytes(), "int64", [5])
    await call(c.put, "graph/A/indices", np.array([1, 99], np.int64).tobytes(), "int64", [2])
    await call(c.put, "graph/A/values", np.ones(2, np.float32).tobytes(), "float32", [2])
    await call(c.put, "knn/start", cases.start(n).tobytes(), "float32", [n])
    with pytest.raises(KaasClientError, match=r"kernel 'hop' .csr_matvec. failed"):
        await call(c.run, sparse, {})
    assert "knn/visited" not in pool.kaas.store  # nothing written
    await call(c.put, "graph/A/indices", np.array([1, 2], np.int64).tobytes(), "int64", [2])
    out = await call(c.run, sparse, {"fetch": True})
    assert out["values"]["visited"] == [1.0, 0.0, 0.0, 0.0]  # edges 1 -> 0 and 2 -> 1 only
    assert all(dev["restarts"] == 0 for dev in pool.snapshot()["devices"])
    assert pool.kaas.runs >= 1 and pool.kaas.failures >= 1


async def test_a_worker_killed_during_a_ktask_is_replaced_and_serves_the_next(pool: GpuPool):
    c = KaasClient(pool.address)
    a = cases.graph(256)
    await call(c.put, "graph/A", a.tobytes(), "float32", a.shape)
    await call(c.put, "knn/start", cases.start(256).tobytes(), "float32", [256])
    doc = json.loads(cases.knn_action(256))
    long_run = asyncio.ensure_future(call(c.run, doc, {"hops": 1_000_000}))
    for _ in range(200):  # until a device's worker is busy with it
        await asyncio.sleep(0.05)
        busy = [i for i, t in pool.kaas._tails.items() if not t.done()]
        if busy:
            break
    assert busy, "the kTask never started"
    device = busy[0]
    assert pool.backend is not None
    pid = pool.backend.workers[device].pid
    await asyncio.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(KaasClientError) as e:
        await asyncio.wait_for(long_run, 60)
    assert e.value.kind == "WorkerError" and "died" in e.value.message
    assert pool.snapshot()["devices"][device]["restarts"] == 1
    out = await call(c.run, doc, {"hops": 2, "fetch": True})  # the constant is loaded again
    np.testing.assert_array_equal(
        out["values"]["visited"], cases.knn_expected(a, cases.start(256), 2)
    )
