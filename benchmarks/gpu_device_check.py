"""The GPU pool's real-GPU paths, measured on a machine that has one: what virtual devices miss.

1. NVML discovery: the pool finds the GPUs and budgets ``memory_fraction`` of their memory.
2. Copy ceiling: 1 GiB host → device, pageable vs pinned (the baseline for 3 and 4).
3. Host tier: the worker's ``cudaHostRegister`` of an mmap'd tier file succeeds, and a copy
   from it runs at the pinned ceiling rather than the pageable one.
4. Live pool on the GPU: a hit skips the upload, outputs match a float64 CPU reference, the
   least recently used model is the one evicted, and a miss copies at over half the pinned
   ceiling.
5. The calibration priors the worker measured at start (copy and weight-streaming rates).

Prints one line per figure and ``PASS``/``FAIL`` per check; exits 1 if any check failed.

    python3 benchmarks/gpu_device_check.py [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import mmap
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from prometheus_client import CollectorRegistry

from gpu import testmodels
from gpu.config import GpuConfig
from gpu.device_process import Worker
from gpu.devices import Nvml, budget_fraction, discover
from gpu.hosttier import content_key
from gpu.pool import GpuPool

GIB = 1 << 30
results: dict[str, object] = {}
failures: list[str] = []


def check(name: str, ok: bool, detail: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)
    results[name] = {"ok": ok, "detail": detail}
    if not ok:
        failures.append(name)


def copy_gbps(src: torch.Tensor, repeats: int = 5) -> float:
    """Median host → device bandwidth of copying ``src`` (bytes / s / 1e9)."""
    times = []
    for _ in range(repeats + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dst = src.to("cuda", copy=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        del dst
    return src.numel() * src.element_size() / statistics.median(times[1:]) / 1e9


def discovery() -> None:
    specs, note = discover(GpuConfig(devices="nvml"))
    nvml = Nvml()
    total = nvml.describe(0)[1]
    util, used = nvml.utilization(0)
    nvml.close()
    d = specs[0]
    results["gpu"] = {"name": d.name, "count": len(specs), "total_bytes": total}
    check(
        "nvml discovery",
        d.kind == "cuda" and d.torch_device == "cuda:0" and d.memory_bytes == int(total * 0.8),
        f"{note}: {d.name}, {total / GIB:.1f} GiB, budget {d.memory_bytes / GIB:.1f} GiB, "
        f"utilisation {util:.0%}, {used / GIB:.2f} GiB used",
    )


def copy_ceiling() -> None:
    host = torch.empty(GIB, dtype=torch.uint8).fill_(7)
    pageable = copy_gbps(host)
    pinned = copy_gbps(host.pin_memory())
    results["copy_gbps"] = {"pageable": pageable, "pinned": pinned}
    print(f"      copy 1 GiB host→device: pageable {pageable:.1f} GB/s, pinned {pinned:.1f} GB/s "
          f"(pinned/pageable {pinned / pageable:.2f}x)")  # fmt: skip


def ceilings() -> tuple[float, float]:
    c = results.get("copy_gbps") or {"pageable": float("nan"), "pinned": float("nan")}
    return c["pageable"], c["pinned"]


def host_tier() -> None:
    """The worker's own mapping code on a 1 GiB tier file in /dev/shm."""
    pageable, pinned = ceilings()
    worker = Worker("cuda:0", threads=1)
    with tempfile.NamedTemporaryFile(dir="/dev/shm", suffix=".bin") as f:
        f.truncate(GIB)
        mm = worker._map({"key": "check", "bin": f.name})
        registered = worker.host_maps["check"][1] is not None
        tier = copy_gbps(torch.frombuffer(mm, dtype=torch.uint8))
        worker.forget("check")
        with open(f.name, "rb") as g:
            plain = mmap.mmap(g.fileno(), 0, access=mmap.ACCESS_COPY)
            unregistered = copy_gbps(torch.frombuffer(plain, dtype=torch.uint8))
            plain.close()
        mm.close()
    results["tier_gbps"] = {"registered": tier, "unregistered": unregistered}
    check(
        "pinned host tier",
        registered and tier > 0.8 * pinned,
        f"cudaHostRegister {'succeeded' if registered else 'FAILED'}; tier copy {tier:.1f} GB/s "
        f"= {tier / pinned:.2f}x the pinned ceiling (unregistered mmap {unregistered:.1f} GB/s, "
        f"pageable tensor {pageable:.1f})",
    )


def call_bytes(x: torch.Tensor) -> bytes:
    buf = io.BytesIO()
    torch.save({"args": (x,), "kwargs": {}}, buf)
    return buf.getvalue()


def rel_error(out: bytes, ref: torch.Tensor) -> float:
    y = torch.load(io.BytesIO(out), weights_only=True).double()
    return float((y - ref).norm() / ref.norm())


async def live_pool(size_mb: int) -> None:
    _, pinned = ceilings()
    budget = (2 * size_mb + size_mb // 2) << 20  # room for two models, not three
    cfg = GpuConfig(devices="nvml", memory_fraction=budget_fraction(budget), policy="lalb")
    t0 = time.perf_counter()
    async with GpuPool(cfg, registry=CollectorRegistry()) as pool:
        start_s = time.perf_counter() - t0
        assert pool.backend is not None
        results["worker_priors"] = pool.backend.workers[0].info
        print(f"      pool start {start_s:.1f} s; worker priors {pool.backend.workers[0].info}")
        models = [testmodels.mlp(size_mb, width=2048, seed=i) for i in range(3)]
        keys = []
        for m in models:
            data = testmodels.model_bytes(m)
            keys.append(content_key(data))
            await pool.register(keys[-1], data)
        nbytes = testmodels.nbytes(models[0])
        x = torch.randn(16, 2048)
        refs = [m.double()(x.double()).detach() for m in models]  # in place: data is sent
        miss = await pool.infer(keys[0], call_bytes(x))
        hit = await pool.infer(keys[0], call_bytes(x))
        up_gbps = nbytes / miss.upload_s / 1e9
        err = max(rel_error(r.output, refs[0]) for r in (miss, hit))
        results["pool"] = {
            "model_bytes": nbytes, "miss_s": miss.latency_s, "upload_s": miss.upload_s,
            "hit_s": hit.latency_s, "infer_s": hit.infer_s, "upload_gbps": up_gbps,
            "rel_error": err,
        }  # fmt: skip
        check(
            "miss then hit",
            (miss.hit, hit.hit) == (False, True) and hit.upload_s == 0 and err < 1e-4,
            f"{nbytes / 2**20:.0f} MiB model: miss {miss.latency_s * 1e3:.1f} ms (upload "
            f"{miss.upload_s * 1e3:.1f} ms), hit {hit.latency_s * 1e3:.2f} ms (inference "
            f"{hit.infer_s * 1e3:.2f} ms); miss/hit {miss.latency_s / hit.latency_s:.0f}x; "
            f"relative error vs float64 {err:.1e}",
        )
        await pool.infer(keys[1], call_bytes(x))
        await pool.infer(keys[0], call_bytes(x))  # refresh 0: 1 is least recently used
        third = await pool.infer(keys[2], call_bytes(x))
        lru = pool.scheduler.cache.devices[0].lru()
        h, _ = await pool.backend.workers[0].call({"op": "stats"})
        err = rel_error(third.output, refs[2])
        check(
            "LRU eviction on the GPU",
            lru == [keys[0], keys[2]] and set(h["resident"]) == set(lru) and err < 1e-4,
            f"victim was the least recently used model; resident {len(lru)} of 3; "
            f"evictions {pool.stats.evicted}; relative error {err:.1e}",
        )
        again = await pool.infer(keys[1], call_bytes(x))  # evicted: a miss, its tier file pinned
        gbps = nbytes / again.upload_s / 1e9
        results["pool"]["repeat_upload_s"] = again.upload_s
        check(
            "a miss is a copy at PCIe speed",
            not again.hit and gbps > 0.5 * pinned,
            f"repeat miss uploads {nbytes / 2**20:.0f} MiB in {again.upload_s * 1e3:.1f} ms = "
            f"{gbps:.1f} GB/s = {gbps / pinned:.2f}x the pinned ceiling (first miss, which also "
            f"pins the tier file: {up_gbps:.1f} GB/s)",
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=512, help="live pool model size")
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a real GPU", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}")

    def live() -> None:
        asyncio.run(live_pool(args.size_mb))

    for step in (discovery, copy_ceiling, host_tier, live):
        try:
            step()
        except Exception as e:  # one broken step must not hide the others' figures
            check(step.__name__, False, repr(e))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    print(f"\n{len(failures)} failed: {failures}" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
