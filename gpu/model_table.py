"""The simulator's model table: measured sizes and times, and the physical limits it uses.

Every number is a measurement or a stated limit (docs/gpu.md lists the sources):

* ``size_bytes``: parameter + buffer bytes of the torchvision architecture (fp32), counted
  exactly by building it on the ``meta`` device (``benchmarks/bench_gpu_models.py``).
* ``infer_s``: batch-1 forward pass, one thread, median of 3, on this project's 2-vCPU machine
  (the CPU-backed virtual devices the live pool runs on here); no GPU was available to measure.
* ``load_s``: ``torch.load`` of the pickled module from memory (deserialisation only).
* ``gflops``: FLOPs of one batch-1 forward pass (``torch.utils.flop_counter``), for reference.
* ``PCIE_PINNED_BW``: pinned host → device copy, PCIe Gen4 x16 (31.5 GB/s peak; gpu-pool.md's
  "size / 25-50 GB/s" for a miss served from a pinned host tier): 25 GB/s.
* ``COLD_PROCESS_S``: a fresh Python process that imports torch and touches a tensor, measured
  here (median of 3 on an otherwise idle machine); a real GPU adds CUDA context creation on
  top, so this is a lower bound for the paper's per-model GPU process.

Rows are interleaved small/large so that any prefix (a working set of ``W`` models) has a
representative mix of sizes; working sets larger than the table repeat rows under new ids.
"""

from __future__ import annotations

from dataclasses import dataclass

PCIE_PINNED_BW = 25e9  # bytes/s
COLD_PROCESS_S = 2.063  # s, process start + import torch (benchmarks/bench_gpu_models.py)


@dataclass(frozen=True)
class ModelCost:
    name: str
    size_bytes: int
    infer_s: float
    load_s: float
    gflops: float = 0.0


MODEL_TABLE: tuple[ModelCost, ...] = (
    ModelCost("squeezenet1_1", 4941984, 0.0348, 0.003, 0.698),
    ModelCost("vgg19", 574668960, 0.516, 0.385, 39.264),
    ModelCost("shufflenet_v2_x1_0", 9179584, 0.0119, 0.0217, 0.29),
    ModelCost("vgg16", 553430176, 0.3789, 0.2808, 30.941),
    ModelCost("mobilenet_v3_small", 10220144, 0.0065, 0.0171, 0.113),
    ModelCost("vgg11", 531453344, 0.1934, 0.2898, 15.218),
    ModelCost("mobilenet_v2", 14156352, 0.0165, 0.022, 0.602),
    ModelCost("wide_resnet50_2", 275806280, 0.5344, 0.3615, 22.796),
    ModelCost("mnasnet1_0", 17685344, 0.0256, 0.0144, 0.629),
    ModelCost("alexnet", 244403360, 0.0429, 0.2189, 1.428),
    ModelCost("efficientnet_b0", 21322648, 0.0476, 0.0359, 0.772),
    ModelCost("resnet152", 241378168, 0.4044, 0.2702, 23.027),
    ModelCost("mobilenet_v3_large", 22030096, 0.0201, 0.0263, 0.433),
    ModelCost("resnet101", 178618848, 0.2764, 0.1952, 15.603),
    ModelCost("googlenet", 26558312, 0.0666, 0.0441, 2.997),
    ModelCost("resnet50", 102441032, 0.1091, 0.0879, 8.178),
    ModelCost("densenet121", 32250984, 0.1643, 0.0657, 5.668),
    ModelCost("resnext50_32x4d", 100388936, 0.1201, 0.0669, 8.461),
    ModelCost("efficientnet_b2", 36710800, 0.0382, 0.0278, 1.318),
    ModelCost("inception_v3", 95476752, 0.1539, 0.0881, 11.426),
    ModelCost("resnet18", 46796608, 0.0602, 0.0135, 3.628),
    ModelCost("resnet34", 87259072, 0.1101, 0.0899, 7.328),
    ModelCost("densenet169", 57232872, 0.1568, 0.0615, 6.72),
    ModelCost("densenet201", 80973544, 0.1807, 0.238, 8.583),
)
