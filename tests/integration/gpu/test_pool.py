"""The live pool on CPU-backed virtual devices with real torch models and worker processes.

``OWGPU_TEST_DEVICES=nvml`` runs the same tests on the machine's real GPUs: a test written for
N devices runs where NVML finds exactly N GPUs (and skips elsewhere), each GPU's model budget
set to the test's ``memory_mb``.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install .[gpu])")

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from gpu import testmodels  # noqa: E402
from gpu.cache import ModelTooLarge  # noqa: E402
from gpu.config import GpuConfig, parse_device_spec  # noqa: E402
from gpu.devices import Nvml, budget_fraction  # noqa: E402
from gpu.hosttier import content_key  # noqa: E402
from gpu.pool import GpuPool  # noqa: E402
from tests.procs import alive, wait_until  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[3]
REAL_GPUS = os.environ.get("OWGPU_TEST_DEVICES") == "nvml"


def call_bytes(*args) -> bytes:
    buf = io.BytesIO()
    torch.save({"args": args, "kwargs": {}}, buf)
    return buf.getvalue()


def output(res) -> torch.Tensor:
    return torch.load(io.BytesIO(res.output), weights_only=True)


async def register(pool: GpuPool, model) -> str:
    data = testmodels.model_bytes(model)
    key = content_key(data)
    await pool.register(key, data)
    return key


def pool_with(**kw) -> GpuPool:
    cfg = {"devices": "virtual:2", "memory_mb": 64, "policy": "lalbo3", **kw}
    return GpuPool(
        GpuConfig(**(on_real_gpus(cfg) if REAL_GPUS else cfg)), registry=CollectorRegistry()
    )


def on_real_gpus(cfg: dict) -> dict:
    """The same pool on the real GPUs: as many devices, the same budget in bytes each."""
    _, wanted = parse_device_spec(cfg["devices"])
    nvml = Nvml()
    count = nvml.count()
    nvml.close()
    if count != wanted:
        pytest.skip(f"written for {wanted} devices; NVML finds {count} GPUs")
    fraction = budget_fraction(cfg.pop("memory_mb") << 20)
    return {**cfg, "devices": "nvml", "memory_fraction": fraction}


async def test_hits_skip_upload_and_lru_victims_are_right() -> None:
    async with pool_with(devices="virtual:1") as pool:
        models = [testmodels.mlp(20, seed=i) for i in range(4)]  # 20 MiB each, 64 MiB device
        keys = [await register(pool, m) for m in models]
        x = torch.randn(3, 512)
        first = await pool.infer(keys[0], call_bytes(x))
        again = await pool.infer(keys[0], call_bytes(x))
        assert (first.hit, again.hit) == (False, True)
        assert first.upload_s > 0 and again.upload_s == 0
        assert torch.allclose(output(again), models[0](x), atol=1e-5)
        await pool.infer(keys[1], call_bytes(x))
        await pool.infer(keys[2], call_bytes(x))
        await pool.infer(keys[0], call_bytes(x))  # refresh A: B is now least recently used
        res = await pool.infer(keys[3], call_bytes(x))
        assert not res.hit
        lru = pool.scheduler.cache.devices[0].lru()
        assert keys[1] not in lru and lru == [keys[2], keys[0], keys[3]]
        assert pool.backend is not None
        h, _ = await pool.backend.workers[0].call({"op": "stats"})
        assert set(h["resident"]) == set(lru)  # the worker really dropped B
        assert pool.stats.evicted == 1
        metrics = generate_latest(pool.registry).decode()
        assert 'owgpu_evictions_total{tier="device"} 1.0' in metrics
        assert 'owgpu_requests_total{outcome="hit"} 2.0' in metrics


async def test_tied_weights_and_mixed_dtypes_survive_the_one_copy_upload() -> None:
    """A miss copies the whole tier file at once and views it: ties stay tied, every dtype
    (float32 weights, int64 BatchNorm counter) lands at its own aligned offset."""
    emb = torch.nn.Embedding(100, 32)
    head = torch.nn.Linear(32, 100, bias=False)
    head.weight = emb.weight  # tied: one tensor, two names
    norm = torch.nn.BatchNorm1d(100)
    norm.running_mean.uniform_(-1, 1)
    norm.num_batches_tracked.fill_(7)
    m = torch.nn.Sequential(emb, head, norm).eval()
    x = torch.randint(0, 100, (5,))
    async with pool_with(devices="virtual:1") as pool:
        key = await register(pool, m)
        res = await pool.infer(key, call_bytes(x))
        assert torch.allclose(output(res), m(x), atol=1e-5)
        assert pool.backend is not None
        h, _ = await pool.backend.workers[0].call({"op": "stats"})
        assert h["resident"][key] == 100 * 32 * 4 + 4 * 100 * 4 + 8  # the tie counted once


async def test_model_larger_than_device_is_refused() -> None:
    async with pool_with(devices="virtual:1", memory_mb=16) as pool:
        with pytest.raises(ModelTooLarge, match=r"largest GPU device has 16\.0 MiB"):
            await register(pool, testmodels.mlp(20))
        assert len(pool.host) == 0


async def test_killed_worker_is_replaced_and_request_retried() -> None:
    async with pool_with(devices="virtual:1", memory_mb=64) as pool:
        key = await register(pool, testmodels.SleepyNet(delay_s=1.5))
        assert pool.backend is not None
        old_pid = pool.backend.workers[0].pid
        task = asyncio.create_task(pool.infer(key, call_bytes(torch.randn(1, 64))))
        await asyncio.sleep(0.8)
        assert pool.scheduler.state[0].busy
        os.kill(old_pid, signal.SIGKILL)
        res = await task  # retried once on the fresh worker, as a miss
        assert res.hit is False and output(res).shape == (1, 64)
        assert pool.backend.workers[0].pid != old_pid
        assert pool.backend.restarts[0] == 1
        assert 'owgpu_worker_restarts_total{device="0",reason="crashed"} 1.0' in (
            generate_latest(pool.registry).decode()
        )


async def test_concurrent_requests_follow_finish_time_rule() -> None:
    async with pool_with(devices="virtual:2", memory_mb=64, policy="lalb") as pool:
        slow = await register(pool, testmodels.SleepyNet(delay_s=0.6))
        x = call_bytes(torch.randn(1, 64))
        await pool.infer(slow, x)  # warm: now resident on one device, inference profiled
        # Slow inference, cheap upload: a miss on the idle device finishes first.
        a, b = await asyncio.gather(pool.infer(slow, x), _later(pool.infer(slow, x), 0.1))
        assert a.device != b.device and (a.hit, b.hit) == (True, False)
        # Now make uploads look expensive (as for a big model): the second request waits
        # for the busy device that holds the model, in its local queue, and hits there.
        big = await register(pool, testmodels.SleepyNet(delay_s=0.3, width=32))
        await pool.infer(big, call_bytes(torch.randn(1, 32)))
        for _ in range(8):
            pool.scheduler.estimator.observe_upload(10_000, "virtual", 30.0)
        y = call_bytes(torch.randn(1, 32))
        c, d = await asyncio.gather(pool.infer(big, y), _later(pool.infer(big, y), 0.1))
        assert c.device == d.device and (c.hit, d.hit) == (True, True)
        assert d.queue_s >= 0.15  # it waited for the busy device rather than miss elsewhere


async def _later(coro, delay: float):
    await asyncio.sleep(delay)
    return await coro


CLIENT = textwrap.dedent(
    """
    import json, sys, torch
    import gpu.client
    gpu.client.install(sys.argv[1])
    model = torch.load(sys.argv[2], weights_only=False)   # plain torch idiom
    x = torch.load(sys.argv[3])                           # a tensor: not proxied
    y = model(x)
    jit = torch.jit.load(sys.argv[4])
    z = jit(x)
    ref = torch.load(sys.argv[5])
    print(json.dumps({
        "proxied": type(model).__name__, "tensor": type(x).__name__,
        "close": bool(torch.allclose(y, ref, atol=1e-5)),
        "jit_close": bool(torch.allclose(z, ref, atol=1e-5)),
        "hit": model.last["hit"], "key": model.key,
    }))
    """
)


@pytest.mark.filterwarnings("ignore::FutureWarning")
async def test_client_patch_from_separate_processes_shares_one_copy(tmp_path: Path) -> None:
    m = testmodels.mlp(8, seed=7)
    x = torch.randn(2, 512)
    data = testmodels.model_bytes(m)
    for name in ("a.pt", "b.pt"):  # two actions ship the same file under different names
        (tmp_path / name).write_bytes(data)
    torch.save(x, tmp_path / "x.pt")
    torch.save(m(x).detach(), tmp_path / "ref.pt")
    torch.jit.save(torch.jit.trace(m, x), tmp_path / "m.jit")
    (tmp_path / "client.py").write_text(CLIENT)
    async with pool_with(devices="virtual:2", memory_mb=64) as pool:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        outs, codes = [], []
        # One after the other: run concurrently, the second request may rightly take a miss
        # on the idle device rather than wait for the first's upload (the finish-time rule).
        for name in ("a.pt", "b.pt"):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(tmp_path / "client.py"),
                pool.address,
                str(tmp_path / name),
                str(tmp_path / "x.pt"),
                str(tmp_path / "m.jit"),
                str(tmp_path / "ref.pt"),
                stdout=subprocess.PIPE,
                env=env,
            )
            outs.append(json.loads((await proc.communicate())[0]))
            codes.append(proc.returncode)
        assert codes == [0, 0]
        for o in outs:
            assert o["proxied"] == "RemoteModule" and o["tensor"] == "Tensor"
            assert o["close"] and o["jit_close"]
        assert outs[0]["key"] == outs[1]["key"] == content_key(data)
        # one host-tier entry for the pickled module (+ one for the TorchScript file), and
        # the module resident on exactly one device: the second action hit the first's copy
        assert len(pool.host) == 2
        assert len(pool.scheduler.cache.holders(content_key(data))) == 1
        assert sorted(o["hit"] for o in outs) == [False, True]


async def test_exclusive_switch_replaces_the_worker() -> None:
    async with pool_with(devices="virtual:1", policy="exclusive") as pool:
        a = await register(pool, testmodels.mlp(4, seed=1))
        b = await register(pool, testmodels.mlp(4, seed=2))
        x = call_bytes(torch.randn(1, 512))
        assert pool.backend is not None
        r1 = await pool.infer(a, x, function="fa")
        pid1 = pool.backend.workers[0].pid
        r2 = await pool.infer(a, x, function="fa")
        r3 = await pool.infer(b, x, function="fb")
        assert (r1.cold_start, r2.cold_start, r3.cold_start) == (True, False, True)
        assert pool.backend.workers[0].pid != pid1
        assert r3.upload_s > 0.3  # a fresh process importing torch, then a full torch.load


POOL_HOST = """
import asyncio, sys
from gpu.config import GpuConfig
from gpu.pool import GpuPool

async def main():
    pool = GpuPool(GpuConfig(devices="virtual:2", memory_mb=64))
    await pool.start()
    pids = [w.pid for w in pool.backend.workers] + [pool.loader.pid]
    print(" ".join(map(str, pids)), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_workers_of_a_killed_host_exit() -> None:
    """kill -9 of the process owning the pool (the invoker): its device workers and loader
    see their pipe close and exit, leaving nothing behind."""
    host = subprocess.Popen(
        [sys.executable, "-c", POOL_HOST],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        pids = [int(p) for p in host.stdout.readline().split()]
        assert len(pids) == 3 and all(os.path.exists(f"/proc/{p}") for p in pids)
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        assert wait_until(lambda: not any(map(alive, pids)), 20), (
            f"workers still running: {[p for p in pids if alive(p)]}"
        )
    finally:
        if host.poll() is None:
            host.kill()
