"""``kaas`` actions through Kafka: a controller publishes on ``invoker<N>`` of the real broker,
the invoker reads the action from the CouchDB-API server and runs its kTask on its GPU pool
(virtual devices); the acks and records carry the outputs by key and version, or the error.
A graph stored past the front's check (a controller that does not know kTasks) is answered
as a developer error."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install .[gpu])")

from gpu.config import GpuConfig
from gpu.kaas import examples
from gpu.kaas.client import KaasClient
from harness.controller import running_invoker
from tests.integration import kaas_cases as cases

pytestmark = [pytest.mark.services, pytest.mark.gpu, pytest.mark.timeout(240)]


async def answer(stub, action, content) -> dict:
    aid = await stub.invoke(*action, content=content)
    acks = await stub.wait_completion(aid, timeout_s=120)
    record = next(a["response"] for a in acks if isinstance(a.get("response"), dict))
    stored = await stub.record(aid)
    assert stored["response"]["statusCode"] == record["response"]["statusCode"]
    return record["response"]


async def test_kaas_actions_through_kafka(kafka, couchdb, tmp_path):
    async with running_invoker(
        kafka,
        couchdb,
        tmp_path,
        gpu=GpuConfig(devices="virtual:2", memory_mb=64),
        action_cores=(0,),
    ) as (invoker, stub):
        c = KaasClient(invoker.gpu_pool.data_address)  # the operator's socket
        a, x0 = cases.graph(seed=3), cases.start(vertices=(1,))

        def put(key: str, arr: np.ndarray) -> None:
            """Where the caller's (guest's) kaas actions read ``key``."""
            c.put(f"guest/{key}", arr.tobytes(), arr.dtype.name, arr.shape)

        await asyncio.to_thread(put, "graph/A", a)
        await asyncio.to_thread(put, "knn/start", x0)
        knn = await stub.create_action("knn", cases.knn_action().encode(), kind="kaas")
        for hops in (1, 4):
            r = await answer(stub, knn, {"hops": hops, "fetch": True})
            assert r["statusCode"] == 0, r
            got = np.array(r["result"]["values"]["visited"], np.float32)
            np.testing.assert_array_equal(got, cases.knn_expected(a, x0, hops))
        assert r["result"]["outputs"]["visited"] == {"key": "knn/visited", "version": 2}

        d = cases.cgemm_data(seed=5)
        for part, key in cases.CGEMM_KEYS.items():
            await asyncio.to_thread(put, key, d[part])
        cgemm = await stub.create_action("cgemm", cases.cgemm_action().encode(), kind="kaas")
        r = await answer(stub, cgemm, {"fetch": ["Yr", "Yi"]})
        assert r["statusCode"] == 0, r
        y = np.array(r["result"]["values"]["Yr"]) + 1j * np.array(r["result"]["values"]["Yi"])
        np.testing.assert_allclose(y, cases.cgemm_expected(d), rtol=1e-4, atol=1e-4)

        # a missing key: the request's error, an application error
        r = await answer(stub, cgemm, {"keys": {"Xr": "nobody/put/this"}})
        assert r["statusCode"] == 1, r
        assert "'nobody/put/this'" in r["result"]["error"]
        # a graph no front checked: a developer error, as a failed /init
        bad = examples.cgemm(2, 2, 2)
        bad["kernels"][0]["arguments"] = ["Xr", "Xi", "Wr"]
        broken = await stub.create_action("broken", json.dumps(bad).encode(), kind="kaas")
        r = await answer(stub, broken, {})
        assert r["statusCode"] == 2, r
        assert r["result"]["error"].startswith("The kTask of this kaas action is not valid")
        # a kernel error at run time: an application error; the worker serves on
        sparse = examples.knn(4, 1, sparse_nnz=1, graph="g")
        await asyncio.to_thread(put, "g/indptr", np.array([0, 1, 1, 1, 1], np.int64))
        await asyncio.to_thread(put, "g/indices", np.array([7], np.int64))
        await asyncio.to_thread(put, "g/values", np.ones(1, np.float32))
        await asyncio.to_thread(put, "knn/start", cases.start(4))
        csr = await stub.create_action("csr", json.dumps(sparse).encode(), kind="kaas")
        r = await answer(stub, csr, {})
        assert r["statusCode"] == 1 and "kernel 'hop' (csr_matvec) failed" in r["result"]["error"]
        r = await answer(stub, cgemm, {})
        assert r["statusCode"] == 0, r
        assert invoker.gpu_calls.running == 0 and invoker.pool.cold_starts == 0  # no container
        assert all(dev["restarts"] == 0 for dev in invoker.gpu_pool.snapshot()["devices"])
