"""Measure the simulator's model table: sizes, FLOPs, inference, deserialisation, cold start.

Sizes are the parameter+buffer bytes of torchvision architectures (built on the ``meta``
device, so exact and instant). Inference (batch 1, one thread) and ``torch.load`` of the saved
module (from the page cache) are timed on this machine's CPU; the cold start of a fresh Python
process that imports torch is timed too. The output is the literal table pasted into
``gpu/model_table.py``.

With ``--device cuda`` each row also gets the GPU's batch-1 inference (``infer_gpu_s``) and the
pinned host → device copy of the model's tensors (``upload_s``, the pool's miss), and the cold
start includes creating the CUDA context.

    .venv/bin/python benchmarks/bench_gpu_models.py            # ~2 minutes on 2 vCPUs
    python3 benchmarks/bench_gpu_models.py --device cuda       # on a GPU machine
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import time

MODELS = [
    "squeezenet1_1", "shufflenet_v2_x1_0", "mobilenet_v3_small", "mnasnet1_0",
    "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
    "googlenet", "densenet121", "resnet18", "efficientnet_b2", "densenet169",
    "resnet34", "inception_v3", "resnet50", "resnext50_32x4d", "densenet201",
    "wide_resnet50_2", "resnet101", "resnet152", "alexnet", "vgg11", "vgg16", "vgg19",
]  # fmt: skip


def median_time(fn, repeats: int, sync=lambda: None) -> float:
    """Median wall time of ``fn`` after one warm-up call; ``sync`` waits for device work."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_gpu(m, x, repeats: int) -> dict:
    """Batch-1 inference on the GPU and the pinned host → device copy of every tensor."""
    import torch

    sync = torch.cuda.synchronize
    tensors = [t.detach().pin_memory() for t in [*m.parameters(), *m.buffers()]]
    upload = median_time(lambda: [t.to("cuda", non_blocking=True) for t in tensors], repeats, sync)
    g, xg = m.to("cuda"), x.to("cuda")
    with torch.inference_mode():
        infer = median_time(lambda: g(xg), repeats, sync)
    m.to("cpu")
    return {"infer_gpu_s": round(infer, 5), "upload_s": round(upload, 5)}


def measure(name: str, repeats: int, device: str) -> dict:
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from torchvision import models

    builder = models.get_model_builder(name)
    inception = name in ("googlenet", "inception_v3")
    kw = {"aux_logits": False, "init_weights": False} if inception else {}
    side = 299 if name == "inception_v3" else 224
    with torch.device("meta"):
        m = builder(**kw)
    size = sum(t.numel() * t.element_size() for t in [*m.parameters(), *m.buffers()])
    with FlopCounterMode(display=False) as fc:
        m(torch.empty(1, 3, side, side, device="meta"))
    flops = fc.get_total_flops()
    m = m.to_empty(device="cpu")
    for t in [*m.parameters(), *m.buffers()]:
        t.data.normal_(0, 0.02) if t.is_floating_point() else t.data.zero_()
    m.eval()
    x = torch.randn(1, 3, side, side)
    with torch.inference_mode():
        infer_cpu = median_time(lambda: m(x), repeats)
    gpu = measure_gpu(m, x, repeats) if device == "cuda" else {}
    buf = io.BytesIO()
    torch.save(m, buf)
    raw = buf.getvalue()
    load = median_time(lambda: torch.load(io.BytesIO(raw), weights_only=False), repeats)
    return {
        "name": name,
        "size_bytes": size,
        "gflops": round(flops / 1e9, 3),
        "infer_cpu_s": round(infer_cpu, 4),
        "load_s": round(load, 4),
        **gpu,
    }


def cold_start(repeats: int, device: str) -> float:
    code = f"import torch; torch.zeros(1, device={device!r}).sum().item()"
    return median_time(lambda: subprocess.run([sys.executable, "-c", code], check=True), repeats)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    cold = cold_start(args.repeats, args.device)
    print(f"# process start + import torch ({args.device}): {cold:.3f} s", flush=True)
    for name in args.models:
        print(json.dumps(measure(name, args.repeats, args.device)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
