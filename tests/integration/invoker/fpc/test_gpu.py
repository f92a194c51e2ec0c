"""GPU work in the scheduler ("FPC") mode: a GPU action's container, made on the
scheduler's creation message, pulls its calls and runs them through the co-located GPU pool
(virtual devices), as in the sharding mode; a ``kaas`` action's calls are kTasks that the
pool runs with no container at all."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed (pip install .[gpu])")

from gpu.config import GpuConfig
from gpu.kaas.client import KaasClient
from harness.controller import running_invoker
from harness.fpc_scheduler import stand_in_scheduler
from tests.integration import kaas_cases as cases
from tests.integration.invoker.fpc.test_node import HOLD_S, container, enqueue, health_tested
from tests.integration.invoker.test_gpu import create_infer

pytestmark = [pytest.mark.services, pytest.mark.gpu, pytest.mark.timeout(300)]


async def test_gpu_actions_and_ktasks_in_the_scheduler_mode(kafka, couchdb, tmp_path):
    gpu = GpuConfig(devices="virtual:2", memory_mb=64)
    async with running_invoker(
        kafka, couchdb, tmp_path, mode="fpc", gpu=gpu, action_cores=(0,)
    ) as (inv, ctl):
        prefix = inv.config.topic_prefix
        async with stand_in_scheduler(kafka.bootstrap, topic_prefix=prefix, hold_s=HOLD_S) as s:
            await health_tested(inv)
            (action, rev), expected = await create_infer(ctl)
            await container(inv, s, action, rev)
            for _ in range(2):
                aid = enqueue(s, action, rev, blocking=True)
                acks = await ctl.wait_completion(aid, timeout_s=120)
                r = acks[0]["response"]["response"]
                assert r["statusCode"] == 0, r
                assert r["result"]["y"] == expected and r["result"]["kind"] == "RemoteModule"
            assert inv.gpu_pool.snapshot()["requests"] == 2

            c = KaasClient(inv.gpu_pool.data_address)
            a, x0 = cases.graph(seed=3), cases.start(vertices=(1,))
            for key, arr in (("graph/A", a), ("knn/start", x0)):
                await asyncio.to_thread(
                    c.put, f"guest/{key}", arr.tobytes(), arr.dtype.name, arr.shape
                )
            knn, knn_rev = await ctl.create_action("knn", cases.knn_action().encode(), kind="kaas")
            containers = len(inv.pool.slots)
            busy_mb = inv.fpc.resource_record().busy_memory_mb
            ktasks = await container(inv, s, knn, knn_rev)
            # No container made, no memory taken: the pool runs its calls.
            assert len(inv.pool.slots) == containers
            assert inv.fpc.resource_record().busy_memory_mb == busy_mb
            (listed,) = [
                c for c in inv.fpc.pool_state()["busyPool"]["containers"]
                if c["containerId"] == ktasks
            ]  # fmt: skip
            assert listed["kind"] == "kaas"
            aid = enqueue(s, knn, knn_rev, content={"hops": 2, "fetch": True}, blocking=True)
            acks = await ctl.wait_completion(aid, timeout_s=120)
            r = acks[0]["response"]["response"]
            assert r["statusCode"] == 0, r
            got = np.array(r["result"]["values"]["visited"], np.float32)
            np.testing.assert_array_equal(got, cases.knn_expected(a, x0, 2))
            rec = await ctl.record(aid)
            assert rec["response"]["statusCode"] == 0
            await inv.stop(deadline_s=5)
            assert ktasks not in inv.fpc.kept  # nothing to keep warm
