"""Measure the simulator's model table: sizes, FLOPs, inference, deserialisation, cold start.

Sizes are the parameter+buffer bytes of torchvision architectures (built on the ``meta``
device, so exact and instant). Inference (batch 1, one thread) and ``torch.load`` of the saved
module (from the page cache) are timed on this machine's CPU; the cold start of a fresh Python
process that imports torch is timed too. The output is the literal table pasted into
``gpu/model_table.py``.

    .venv/bin/python benchmarks/bench_gpu_models.py            # ~2 minutes on 2 vCPUs
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


def measure(name: str, repeats: int) -> dict:
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
        m(x)
        inf = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            m(x)
            inf.append(time.perf_counter() - t0)
    buf = io.BytesIO()
    torch.save(m, buf)
    raw = buf.getvalue()
    loads = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.load(io.BytesIO(raw), weights_only=False)
        loads.append(time.perf_counter() - t0)
    return {
        "name": name,
        "size_bytes": size,
        "gflops": round(flops / 1e9, 3),
        "infer_cpu_s": round(statistics.median(inf), 4),
        "load_s": round(statistics.median(loads), 4),
    }


def cold_start(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch; torch.zeros(1)"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=MODELS)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    print(f"# process start + import torch: {cold_start(args.repeats):.3f} s", flush=True)
    for name in args.models:
        print(json.dumps(measure(name, args.repeats)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
