"""A GPU action end to end: an action annotated ``gpu: true`` that uses plain torch idioms
(``torch.load`` of a model shipped in its zip, ``model(x)``) runs through the invoker, its
model load and inference served by the co-located pool on virtual devices."""

from __future__ import annotations

import io
import zipfile

import pytest

from gpu.config import GpuConfig
from harness.controller import ControllerStub, running_invoker
from tests.integration.harness import python_zip
from whisk.protocol import QualifiedName

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.services, pytest.mark.gpu]

ACTION = """
import torch

def main(args):
    model = torch.load("model.pt", weights_only=False)
    y = model(torch.ones(1, 8) * args.get("scale", 1.0))
    return {"y": [round(v, 4) for v in y[0].tolist()], "kind": type(model).__name__}
"""


def model_zip() -> tuple[bytes, list[float]]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    buf = io.BytesIO()
    torch.save(model, buf)
    with torch.no_grad():
        expected = [round(v, 4) for v in model(torch.ones(1, 8))[0].tolist()]
    out = io.BytesIO(python_zip({"__main__.py": ACTION}))
    with zipfile.ZipFile(out, "a") as z:  # and the model file, binary
        z.writestr("model.pt", buf.getvalue())
    return out.getvalue(), expected


async def create_infer(stub: ControllerStub) -> tuple[tuple[QualifiedName, str], list[float]]:
    """The ``infer`` GPU action of :func:`model_zip` (512 MB), and what it answers."""
    code, expected = model_zip()
    created = await stub.create_action(
        "infer",
        code,
        binary=True,
        annotations=[{"key": "gpu", "value": True}],
        memory_mb=512,
    )
    return created, expected


async def test_gpu_action_runs_through_the_pool(kafka, couchdb, tmp_path):
    async with running_invoker(
        kafka,
        couchdb,
        tmp_path,
        gpu=GpuConfig(devices="virtual:2", memory_mb=64),
        action_cores=(0,),
    ) as (invoker, stub):
        (action, rev), expected = await create_infer(stub)
        results = []
        for _ in range(3):
            aid = await stub.invoke(action, rev)
            acks = await stub.wait_completion(aid, timeout_s=120)
            results.append(acks[0]["response"]["response"])
        for r in results:
            assert r["statusCode"] == 0, r
            assert r["result"]["y"] == expected and r["result"]["kind"] == "RemoteModule"
        snap = invoker.gpu_pool.snapshot()
        assert invoker.gpu_calls.running == 0 and invoker.scheduler.running == 0
        status = invoker.status()
        assert status["gpuCalls"] == {"queued": 0, "running": 0}
        assert snap["requests"] == 3 and snap["failed"] == 0  # the pool served them
        assert snap["miss_ratio"] == pytest.approx(1 / 3)  # one upload, then two hits
        assert snap["host_models"] == 1


HOLD = """
import os, time

def main(args):
    time.sleep(float(args.get("s", 1.0)))
    return {"cores": sorted(os.sched_getaffinity(0))}
"""


async def test_a_gpu_call_holds_exactly_one_action_core(kafka, couchdb, tmp_path):
    """A GPU action's CPU side runs pinned to one action core and counts against the cores:
    with two action cores, a GPU call and two CPU calls (all new functions, so a whole core
    each) never run three at a time."""
    async with running_invoker(
        kafka,
        couchdb,
        tmp_path,
        gpu=GpuConfig(devices="virtual:1", memory_mb=64),
        action_cores=(0, 1),
    ) as (invoker, stub):
        gpu = await stub.create_action(
            "gpu-hold",
            HOLD.encode(),
            annotations=[{"key": "gpu", "value": True}],
            memory_mb=512,
        )
        cpu = [await stub.create_action(f"cpu-hold{i}", HOLD.encode()) for i in range(2)]
        aids = [await stub.invoke(*gpu, content={"s": 1.5})]
        aids += [await stub.invoke(*a, content={"s": 1.0}) for a in cpu]
        records = []
        for aid in aids:
            acks = await stub.wait_completion(aid, timeout_s=120)
            records.append(acks[0]["response"])
        for r in records:
            assert r["response"]["statusCode"] == 0, r["response"]
        assert len(records[0]["response"]["result"]["cores"]) == 1  # pinned to one core
        spans = [(r["start"], r["end"]) for r in records]
        most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
        assert most <= 2, spans  # never more calls than cores
        assert invoker.scheduler.cores_table.calls == {0: 0, 1: 0}
