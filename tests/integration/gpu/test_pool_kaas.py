"""kTasks in the live pool on virtual devices: the data layer over the operator's socket
(``gpu.kaas.client``), runs for a namespace (``GpuPool.ktask``, as the invoker calls it), calls
sent to the device worker processes, results against numpy, and the request's errors
answered without harming the workers. Tenancy: keys stored under the caller's namespace, the
shared socket refusing data ops, the operator's socket kept from other users."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install .[gpu])")

from prometheus_client import CollectorRegistry, generate_latest

from gpu.config import GpuConfig
from gpu.kaas import examples
from gpu.kaas.calls import WorkerError
from gpu.kaas.client import KaasClient, KaasClientError
from gpu.kaas.spec import KTaskError
from gpu.pool import GpuPool
from tests.integration import kaas_cases as cases

NS = "t"  # the namespace the runs are for: its keys are "t/..." on the operator's socket

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(180)]


@pytest.fixture
async def pool():
    p = GpuPool(GpuConfig(devices="virtual:2", memory_mb=64), registry=CollectorRegistry())
    async with p:
        yield p


async def call(fn, *args):
    """A blocking client call off the loop the pool serves on."""
    return await asyncio.to_thread(fn, *args)


def operator(pool: GpuPool) -> KaasClient:
    return KaasClient(pool.data_address)


def run(pool: GpuPool, doc, params, namespace: str = NS):
    """A kaas action's call, as the invoker makes it (the caller's namespace)."""
    return pool.ktask(doc, params, namespace=namespace, function="t/act")


async def test_knn_and_cgemm_run_on_the_device_workers(pool: GpuPool):
    c = operator(pool)
    a, x0 = cases.graph(), cases.start()
    put = await call(c.put, "t/graph/A", a.tobytes(), "float32", a.shape)
    assert put["version"] == 1 and put["shape"] == [cases.N, cases.N]
    await call(c.put, "t/knn/start", x0.tobytes(), "float32", x0.shape)
    first = await run(pool, json.loads(cases.knn_action()), {"hops": 2})
    again = await run(pool, json.loads(cases.knn_action()), {"hops": 4, "fetch": ["visited"]})
    assert first["outputs"] == {"visited": {"key": "knn/visited", "version": 1}}
    assert again["outputs"]["visited"]["version"] == 2
    assert first["constants"] == {"hits": 0, "misses": 1}
    assert again["constants"] == {"hits": 1, "misses": 0}  # A stayed on the device
    assert again["device"] == first["device"]  # placed where its constant is
    np.testing.assert_array_equal(again["values"]["visited"], cases.knn_expected(a, x0, 4))
    meta, data = await call(c.get, "t/knn/visited")
    assert meta["version"] == 2
    np.testing.assert_array_equal(cases.as_array(meta, data), cases.knn_expected(a, x0, 4))

    d = cases.cgemm_data()
    for part, key in cases.CGEMM_KEYS.items():
        await call(c.put, f"{NS}/{key}", d[part].tobytes(), "float32", d[part].shape)
    out = await run(pool, json.loads(cases.cgemm_action()), {})
    got = []
    for part in ("Yr", "Yi"):
        meta, data = await call(c.get, f"{NS}/{out['outputs'][part]['key']}")
        got.append(cases.as_array(meta, data))
    np.testing.assert_allclose(got[0] + 1j * got[1], cases.cgemm_expected(d), rtol=1e-4, atol=1e-4)
    snap = pool.snapshot()
    assert all(dev["restarts"] == 0 for dev in snap["devices"])
    kaas = snap["kaas"]
    assert kaas["runs"] == 3 and kaas["failed"] == 0 and kaas["waiting"] == 0
    assert kaas["constant_hits"] == 1 and kaas["constant_misses"] == 3  # A, then Wr and Wi
    assert sorted(ck for held in kaas["constants"] for ck in held) == [
        "t/cgemm/W/im@1", "t/cgemm/W/re@1", "t/graph/A@1"
    ]  # fmt: skip
    text = generate_latest(pool.registry).decode()  # type: ignore[arg-type]
    assert 'owgpu_kaas_constant_lookups_total{outcome="hit"} 1.0' in text


async def test_inline_inputs_and_waiting_for_a_key(pool: GpuPool):
    c = operator(pool)
    a = cases.graph()
    doc = json.loads(cases.knn_action())
    params = {"inputs": {"x0": cases.start().tolist()}, "fetch": True, "wait_s": 20}
    waiting = asyncio.ensure_future(run(pool, doc, params))
    await asyncio.sleep(0.5)
    assert not waiting.done()  # graph/A is not there yet
    await call(c.put, "t/graph/A", a.tobytes(), "float32", a.shape)
    out = await asyncio.wait_for(waiting, 60)
    np.testing.assert_array_equal(out["values"]["visited"], cases.knn_expected(a, cases.start(), 3))
    assert set(pool.kaas.store._objects) == {"t/graph/A", "t/knn/visited"}  # inline one gone


async def test_the_requests_errors_leave_the_workers_serving(pool: GpuPool):
    c = operator(pool)
    doc = json.loads(cases.knn_action())
    with pytest.raises(KTaskError, match="inputs 'graph/A' were not in the data"):
        await run(pool, doc, {"inputs": {"x0": cases.start().tolist()}})  # as written
    with pytest.raises(KTaskError, match=r"unknown parameter 'key' .did you mean 'keys'"):
        await run(pool, doc, {"key": {}})
    with pytest.raises(KaasClientError, match="not in the data layer"):
        await call(c.get, "t/nothing/here")
    with pytest.raises(KaasClientError, match="bytes do not make float32"):
        await call(c.put, "t/bad", b"123", "float32", [1])
    # a kernel that fails on the device: CSR indices beyond the vector
    n = 4
    sparse = examples.knn(n, 1, sparse_nnz=2)
    await call(
        c.put, "t/graph/A/indptr", np.array([0, 1, 2, 2, 2], np.int64).tobytes(), "int64", [5]
    )
    await call(c.put, "t/graph/A/indices", np.array([1, 99], np.int64).tobytes(), "int64", [2])
    await call(c.put, "t/graph/A/values", np.ones(2, np.float32).tobytes(), "float32", [2])
    await call(c.put, "t/knn/start", cases.start(n).tobytes(), "float32", [n])
    with pytest.raises(KTaskError, match=r"kernel 'hop' .csr_matvec. failed"):
        await run(pool, sparse, {})
    assert "t/knn/visited" not in pool.kaas.store  # nothing written
    await call(c.put, "t/graph/A/indices", np.array([1, 2], np.int64).tobytes(), "int64", [2])
    out = await run(pool, sparse, {"fetch": True})
    assert out["values"]["visited"] == [1.0, 0.0, 0.0, 0.0]  # edges 1 -> 0 and 2 -> 1 only
    assert all(dev["restarts"] == 0 for dev in pool.snapshot()["devices"])
    assert pool.kaas.runs >= 1 and pool.kaas.failures >= 1


async def test_a_worker_killed_during_a_ktask_is_replaced_and_serves_the_next(pool: GpuPool):
    c = operator(pool)
    a = cases.graph(256)
    await call(c.put, "t/graph/A", a.tobytes(), "float32", a.shape)
    await call(c.put, "t/knn/start", cases.start(256).tobytes(), "float32", [256])
    doc = json.loads(cases.knn_action(256))
    long_run = asyncio.ensure_future(run(pool, doc, {"hops": 1_000_000}))
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
    with pytest.raises(WorkerError, match="died"):
        await asyncio.wait_for(long_run, 60)
    assert pool.snapshot()["devices"][device]["restarts"] == 1
    out = await run(pool, doc, {"hops": 2, "fetch": True})  # the constant is loaded again
    np.testing.assert_array_equal(
        out["values"]["visited"], cases.knn_expected(a, cases.start(256), 2)
    )


async def test_tenants_keys_are_apart(pool: GpuPool):
    """alice's kaas call writes knn/visited; bob's, naming the same keys, reads none of
    alice's data and overwrites none of it; their same-named constants never share a
    device copy."""
    c = operator(pool)
    doc = json.loads(cases.knn_action())
    a, x0 = cases.graph(), cases.start()
    await call(c.put, "alice/graph/A", a.tobytes(), "float32", a.shape)
    await call(c.put, "alice/knn/start", x0.tobytes(), "float32", x0.shape)
    mine = await run(pool, doc, {"hops": 2, "fetch": True}, "alice")
    assert mine["outputs"] == {"visited": {"key": "knn/visited", "version": 1}}
    alice = cases.knn_expected(a, x0, 2)
    np.testing.assert_array_equal(mine["values"]["visited"], alice)
    # bob names alice's keys, as the graph does or explicitly: none is his
    with pytest.raises(KTaskError, match="inputs 'knn/start', 'graph/A' were not in the data"):
        await run(pool, doc, {"fetch": True}, "bob")
    with pytest.raises(KTaskError, match="inputs 'alice/knn/start', 'alice/graph/A' were not"):
        keys = {"A": "alice/graph/A", "x0": "alice/knn/start", "visited": "alice/knn/visited"}
        await run(pool, doc, {"keys": keys, "fetch": True}, "bob")
    with pytest.raises(KTaskError, match=r"key '\.\./alice/graph/A' starts with '/' or holds"):
        await run(pool, doc, {"keys": {"A": "../alice/graph/A"}}, "bob")
    # bob's own data under the same names: his result, his device copy of "graph/A"
    b, y0 = np.eye(cases.N, dtype=np.float32), cases.start(vertices=(1,))
    await call(c.put, "bob/graph/A", b.tobytes(), "float32", b.shape)
    theirs = await run(pool, doc, {"hops": 2, "inputs": {"x0": y0.tolist()}, "fetch": True}, "bob")
    assert theirs["outputs"] == {"visited": {"key": "knn/visited", "version": 1}}
    assert theirs["constants"] == {"hits": 0, "misses": 1}  # alice's A is not his
    np.testing.assert_array_equal(theirs["values"]["visited"], cases.knn_expected(b, y0, 2))
    meta, data = await call(c.get, "alice/knn/visited")  # alice's output is intact
    assert meta["version"] == 1
    np.testing.assert_array_equal(cases.as_array(meta, data), alice)
    again = await run(pool, doc, {"hops": 2, "fetch": True}, "alice")
    np.testing.assert_array_equal(again["values"]["visited"], alice)
    assert again["outputs"]["visited"]["version"] == 2
    assert {k for k in pool.kaas.store._objects} == {
        "alice/graph/A", "alice/knn/start", "alice/knn/visited", "bob/graph/A",
        "bob/knn/visited",
    }  # fmt: skip
    held = sorted(ck for d in pool.snapshot()["kaas"]["constants"] for ck in d)
    assert held == ["alice/graph/A@1", "bob/graph/A@1"]


async def test_the_shared_socket_refuses_the_data_layer(pool: GpuPool):
    """The socket every GPU action's sandbox gets (``__OW_GPU_POOL``) has no caller identity:
    put, get, delete and ktask are refused there; the operator's socket serves the data
    layer, from a 0600 socket in a 0700 directory (other users cannot reach it)."""
    c = operator(pool)
    await call(c.put, "alice/secret", np.ones(2, np.float32).tobytes(), "float32", [2])
    shared = KaasClient(pool.action_env()["__OW_GPU_POOL"])
    assert shared.address == pool.address != pool.data_address
    frames = [
        ({"op": "put", "key": "alice/secret", "dtype": "float32", "shape": [2]}, bytes(8)),
        ({"op": "get", "key": "alice/secret"}, b""),
        ({"op": "delete", "key": "alice/secret"}, b""),
        ({"op": "ktask", "task": json.loads(cases.knn_action()), "params": {}, "ns": "alice"}, b""),
    ]  # fmt: skip
    for header, payload in frames:
        with pytest.raises(KaasClientError) as e:
            await call(shared._call, header, payload)
        assert e.value.kind == "Forbidden", e.value
        assert f"op {header['op']!r} is refused on this socket" in e.value.message
        assert "shared by every tenant" in e.value.message
        assert "no caller identity" in e.value.message
    hello, _ = await call(shared._call, {"op": "hello"})  # the models' ops serve on
    assert hello["devices"] == 2
    await call(c.put, "alice/graph/A", cases.graph().tobytes(), "float32", [cases.N, cases.N])
    await call(c.put, "alice/knn/start", cases.start().tobytes(), "float32", [cases.N])
    await run(pool, json.loads(cases.knn_action()), {}, "alice")
    stats, _ = await call(shared._call, {"op": "stats"})  # no tenant's key names there
    assert sorted(stats["kaas"]["constants"]) == [0, 1] and "alice" not in json.dumps(stats)
    meta, data = await call(c.get, "alice/secret")  # untouched
    assert meta["version"] == 1 and data == np.ones(2, np.float32).tobytes()
    with pytest.raises(KaasClientError, match="serves hello, put, get, delete only"):
        await call(c._call, {"op": "ktask", "task": {}, "params": {}})
    await call(c.delete, "alice/secret")
    assert "alice/secret" not in pool.kaas.store

    path = Path(pool.data_address.removeprefix("unix:"))
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.parent != Path(pool.socket_path() or "").parent  # not beside the shared one
    assert path.stat().st_uid == path.parent.stat().st_uid == os.getuid()


async def test_a_ktasks_own_cuda_source_is_refused_unless_the_operator_allows_it(
    pool: GpuPool,
):
    """A tenant's CUDA kernel would run in the executor every tenant shares, where device
    pointers reach their constants: refused by default, whatever the device; allowed, it
    meets the device's own check (on these CPU-backed devices: needs a CUDA device)."""
    from gpu.pool import CUDA_SOURCE_REFUSED
    from tests.unit.gpu.kaas.test_executor import scale_doc

    inline = {"inputs": {"x": [0.0] * 1000}}
    with pytest.raises(KTaskError) as refused:
        await run(pool, scale_doc(), inline)
    assert str(refused.value) == CUDA_SOURCE_REFUSED
    allowed = GpuPool(
        GpuConfig(devices="virtual:1", memory_mb=64, kaas_cuda_source=True),
        registry=CollectorRegistry(),
    )
    async with allowed:
        with pytest.raises(KTaskError) as on_cpu:
            await run(allowed, scale_doc(), inline)
        assert str(on_cpu.value) == (
            "the kTask has CUDA source kernels and the pool has no CUDA device"
        )
