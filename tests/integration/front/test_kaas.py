"""``kaas`` actions through the embedded front: the kTask graph is the action's code, checked
at create time; an invocation runs it on the invoker's GPU pool (virtual devices, real worker
processes), without a container; results against numpy; the request's errors as OpenWhisk's
application and developer errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install .[gpu])")

from front.identities import GUEST_AUTH, SYSTEM, Identities, basic_auth
from gpu.config import GpuConfig
from gpu.kaas import examples
from gpu.kaas.client import KaasClient
from gpu.pool import GpuPool
from tests.front_platform import Platform
from tests.integration import kaas_cases as cases
from tests.integration.front.conftest import NS, activation, invoke, live_platform

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(240)]

ALICE_KEY = "5b1e3a2c-0d3f-4c55-9a11-2b7c6d8e9f00:" + "alicesecret" * 6
BOB_KEY = "0c2d4e6f-8a1b-4c3d-9e5f-7a9b1c3d5e7f:" + "bobsecret123" * 6
IDENTITIES = Identities.parse(
    [
        f"guest={GUEST_AUTH}",
        f"whisk.system={SYSTEM.authkey['api_key']}",
        f"alice={ALICE_KEY}",
        f"bob={BOB_KEY}",
    ]
)
AS = {
    "alice": ("/api/v1/namespaces/alice", {"Authorization": basic_auth(ALICE_KEY)}),
    "bob": ("/api/v1/namespaces/bob", {"Authorization": basic_auth(BOB_KEY)}),
}


@pytest.fixture
async def gpu_live() -> AsyncIterator[Platform]:
    async with live_platform(
        {"identities": IDENTITIES}, GpuPool(GpuConfig(devices="virtual:2", memory_mb=64))
    ) as plat:
        yield plat


async def create(p: Platform, name: str, code: str, ns: str = NS, **kw) -> tuple[int, dict]:
    body = {"exec": {"kind": "kaas", "code": code}}
    return await p.call("PUT", f"{ns}/actions/{name}?overwrite=true", json=body, **kw)


def client(p: Platform) -> KaasClient:
    """The node operator's client: keys absolute, a tenant's under ``<namespace>/``."""
    pool = p.invoker.gpu_pool
    assert isinstance(pool, GpuPool)
    return KaasClient(pool.data_address)


async def put(p: Platform, key: str, a: np.ndarray, ns: str = "guest") -> None:
    """Put ``a`` where namespace ``ns``'s kaas actions read ``key``."""
    await asyncio.to_thread(client(p).put, f"{ns}/{key}", a.tobytes(), a.dtype.name, a.shape)


async def get(p: Platform, key: str, ns: str = "guest") -> np.ndarray:
    meta, data = await asyncio.to_thread(client(p).get, f"{ns}/{key}")
    return cases.as_array(meta, data)


def starts(p: Platform) -> int:
    return p.invoker.pool.cold_starts + p.invoker.pool.warm_starts


async def test_knn_and_cgemm_actions_run_on_the_pool(gpu_live: Platform):
    p = gpu_live
    before = starts(p)  # (the front's health action may have run in one)
    status, doc = await create(p, "knn", cases.knn_action())
    assert status == 200, doc
    assert doc["exec"]["kind"] == "kaas"
    a, x0 = cases.graph(), cases.start(vertices=(0, 5))
    await put(p, "graph/A", a)
    runs = []
    for hops in (2, 3):
        payload = {"inputs": {"x0": x0.tolist()}, "hops": hops, "fetch": ["visited"]}
        status, rec = await invoke(p, "knn", payload)
        assert status == 200, rec
        runs.append(rec)
        got = np.array(rec["response"]["result"]["values"]["visited"], np.float32)
        np.testing.assert_array_equal(got, cases.knn_expected(a, x0, hops))
    first, second = (r["response"]["result"] for r in runs)
    assert first["outputs"]["visited"] == {"key": "knn/visited", "version": 1}
    assert second["outputs"]["visited"] == {"key": "knn/visited", "version": 2}
    assert second["constants"] == {"hits": 1, "misses": 0}  # A stayed on its device
    np.testing.assert_array_equal(await get(p, "knn/visited"), cases.knn_expected(a, x0, 3))
    stored = await activation(p, runs[1]["activationId"])
    assert stored["response"]["status"] == "success"
    assert {"key": "kind", "value": "kaas"} in stored["annotations"]

    status, doc = await create(p, "cgemm", cases.cgemm_action())
    assert status == 200, doc
    d = cases.cgemm_data()
    for part, key in cases.CGEMM_KEYS.items():
        await put(p, key, d[part])
    status, rec = await invoke(p, "cgemm", {"keys": {"Yr": "mine/re", "Yi": "mine/im"}})
    assert status == 200, rec
    assert rec["response"]["result"]["outputs"]["Yr"] == {"key": "mine/re", "version": 1}
    y = await get(p, "mine/re") + 1j * await get(p, "mine/im")
    np.testing.assert_allclose(y, cases.cgemm_expected(d), rtol=1e-4, atol=1e-4)
    assert starts(p) == before  # no container for any of them


async def test_a_bad_graph_is_refused_at_create(gpu_live: Platform):
    doc = examples.knn(4, 2)
    doc["kernels"][0]["kernel"] = "matmull"
    status, body = await create(gpu_live, "bad", json.dumps(doc))
    assert status == 400
    assert "not valid" in body["error"] and "'matmull'" in body["error"], body
    assert "did you mean 'matmul'" in body["error"], body
    status, body = await create(gpu_live, "notjson", "function main() {}")
    assert status == 400 and "kTask JSON document" in body["error"], body
    status, _ = await gpu_live.call("GET", f"{NS}/actions/bad")
    assert status == 404


async def test_request_errors_are_application_errors(gpu_live: Platform):
    p = gpu_live
    assert (await create(p, "knn", cases.knn_action()))[0] == 200
    status, rec = await invoke(p, "knn", {"inputs": {"x0": cases.start().tolist()}})
    assert status == 502
    assert rec["response"]["status"] == "application error"
    assert "inputs 'graph/A' were not in the data layer" in rec["response"]["result"]["error"]
    status, rec = await invoke(p, "knn", {"hops": 0})
    assert status == 502 and "'iterations'" in rec["response"]["result"]["error"]
    # a kernel that fails on the device: CSR indices beyond the vector
    n = 4
    assert (await create(p, "sparse", json.dumps(examples.knn(n, 1, sparse_nnz=2))))[0] == 200
    await put(p, "graph/A/indptr", np.array([0, 1, 2, 2, 2], np.int64))
    await put(p, "graph/A/indices", np.array([1, 99], np.int64))
    await put(p, "graph/A/values", np.ones(2, np.float32))
    await put(p, "knn/start", cases.start(n))
    status, rec = await invoke(p, "sparse")
    assert status == 502 and rec["response"]["status"] == "application error"
    assert "kernel 'hop' (csr_matvec) failed" in rec["response"]["result"]["error"]
    await put(p, "graph/A/indices", np.array([1, 2], np.int64))
    status, rec = await invoke(p, "sparse", {"fetch": True})  # the worker serves on
    assert status == 200 and rec["response"]["result"]["values"]["visited"] == [1, 0, 0, 0]
    pool = p.invoker.gpu_pool
    assert isinstance(pool, GpuPool)
    assert all(d["restarts"] == 0 for d in pool.snapshot()["devices"])


async def test_tenants_kaas_actions_keep_their_data_apart(gpu_live: Platform):
    """alice's kaas action writes knn/visited; bob's, naming the same keys (the graph's, or
    alice's written out), cannot read it, and his run does not overwrite it (issue 30)."""
    p = gpu_live
    (alice_ns, alice), (bob_ns, bob) = AS["alice"], AS["bob"]
    for ns, auth in AS.values():
        assert (await create(p, "knn", cases.knn_action(), ns, headers=auth))[0] == 200
    a, x0 = cases.graph(), cases.start(vertices=(0, 5))
    await put(p, "graph/A", a, ns="alice")
    payload = {"inputs": {"x0": x0.tolist()}, "hops": 3, "fetch": True}
    status, rec = await invoke(p, "knn", payload, ns=alice_ns, headers=alice)
    assert status == 200, rec
    assert rec["response"]["result"]["outputs"]["visited"] == {"key": "knn/visited", "version": 1}
    secret = cases.knn_expected(a, x0, 3)

    # bob reads "knn/visited" as an input: not there for him, though alice's is
    steal = examples.knn(cases.N, 1)
    steal["buffers"]["x0"]["key"] = "knn/visited"
    assert (await create(p, "steal", json.dumps(steal), bob_ns, headers=bob))[0] == 200
    for keys in ({}, {"x0": "alice/knn/visited"}):
        status, rec = await invoke(
            p, "steal", {"keys": keys, "fetch": True}, ns=bob_ns, headers=bob
        )
        assert status == 502 and rec["response"]["status"] == "application error", rec
        error = rec["response"]["result"]["error"]
        assert "were not in the data layer" in error and "values" not in rec["response"]["result"]
        assert repr(keys.get("x0", "knn/visited")) in error  # named as bob wrote it
    status, rec = await invoke(
        p, "steal", {"keys": {"x0": "../alice/knn/visited"}}, ns=bob_ns, headers=bob
    )
    assert status == 502 and "holds a '..' segment" in rec["response"]["result"]["error"]

    # bob's own run of the same graph, same keys: his data, alice's intact
    b, y0 = np.eye(cases.N, dtype=np.float32), cases.start(vertices=(1,))
    await put(p, "graph/A", b, ns="bob")
    payload = {"inputs": {"x0": y0.tolist()}, "hops": 2, "fetch": True}
    status, rec = await invoke(p, "knn", payload, ns=bob_ns, headers=bob)
    assert status == 200, rec
    result = rec["response"]["result"]
    assert result["outputs"]["visited"] == {"key": "knn/visited", "version": 1}
    assert result["constants"] == {"hits": 0, "misses": 1}  # not alice's device copy
    np.testing.assert_array_equal(result["values"]["visited"], cases.knn_expected(b, y0, 2))
    np.testing.assert_array_equal(await get(p, "knn/visited", ns="alice"), secret)
    meta, _ = await asyncio.to_thread(client(p).get, "alice/knn/visited")
    assert meta["version"] == 1  # bob's run wrote no version of alice's key
    np.testing.assert_array_equal(
        await get(p, "knn/visited", ns="bob"), result["values"]["visited"]
    )
