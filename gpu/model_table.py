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

``H200_TABLE`` is the same table measured on an NVIDIA H200 (``bench_gpu_models.py --device
cuda`` on the lent GPU machine, 2026-11-29): ``infer_s`` is the GPU's batch-1 forward pass,
``upload_s`` the pinned host → device copy of the model's tensors, ``load_s`` deserialisation
on that machine's CPU; ``H200_PINNED_BW`` is its 1 GiB pinned copy (PCIe Gen5 x16) and
``H200_COLD_PROCESS_S`` a fresh process that imports torch and creates the CUDA context.
``PROFILES`` names the two for ``ow-invoker simulate-gpu --device-profile``.

Rows are interleaved small/large so that any prefix (a working set of ``W`` models) has a
representative mix of sizes; working sets larger than the table repeat rows under new ids.
"""

from __future__ import annotations

from dataclasses import dataclass

PCIE_PINNED_BW = 25e9  # bytes/s
COLD_PROCESS_S = 2.063  # s, process start + import torch (benchmarks/bench_gpu_models.py)
H200_PINNED_BW = 54.8e9  # bytes/s, measured (benchmarks/gpu_device_check.py)
H200_COLD_PROCESS_S = 4.954  # s, process start + import torch + CUDA context, measured


@dataclass(frozen=True)
class ModelCost:
    name: str
    size_bytes: int
    infer_s: float
    load_s: float
    gflops: float = 0.0
    upload_s: float = 0.0  # measured pinned copy; 0: size over the profile's bandwidth


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

H200_TABLE: tuple[ModelCost, ...] = (
    ModelCost("squeezenet1_1", 4941984, 0.00146, 0.0043, 0.698, 0.00043),
    ModelCost("vgg19", 574668960, 0.00116, 0.3584, 39.264, 0.01057),
    ModelCost("shufflenet_v2_x1_0", 9179584, 0.00596, 0.018, 0.29, 0.00218),
    ModelCost("vgg16", 553430176, 0.00096, 0.3165, 30.941, 0.01017),
    ModelCost("mobilenet_v3_small", 10220144, 0.00391, 0.0169, 0.113, 0.00306),
    ModelCost("vgg11", 531453344, 0.00095, 0.3836, 15.218, 0.00989),
    ModelCost("mobilenet_v2", 14156352, 0.00388, 0.0201, 0.602, 0.00313),
    ModelCost("wide_resnet50_2", 275806280, 0.00524, 0.1773, 22.796, 0.00653),
    ModelCost("mnasnet1_0", 17685344, 0.00406, 0.0206, 0.629, 0.00306),
    ModelCost("alexnet", 244403360, 0.00062, 0.1535, 1.428, 0.00458),
    ModelCost("efficientnet_b0", 21322648, 0.0059, 0.0262, 0.772, 0.00384),
    ModelCost("resnet152", 241378168, 0.01874, 0.2684, 23.027, 0.01335),
    ModelCost("mobilenet_v3_large", 22030096, 0.00482, 0.0215, 0.433, 0.00331),
    ModelCost("resnet101", 178618848, 0.01175, 0.1572, 15.603, 0.00571),
    ModelCost("googlenet", 26558312, 0.00524, 0.0251, 2.997, 0.00335),
    ModelCost("resnet50", 102441032, 0.00381, 0.0734, 8.178, 0.00316),
    ModelCost("densenet121", 32250984, 0.01179, 0.0463, 5.668, 0.00718),
    ModelCost("resnext50_32x4d", 100388936, 0.00403, 0.0829, 8.461, 0.00314),
    ModelCost("efficientnet_b2", 36710800, 0.00934, 0.039, 1.318, 0.00547),
    ModelCost("inception_v3", 95476752, 0.00793, 0.0798, 11.426, 0.00507),
    ModelCost("resnet18", 46796608, 0.00217, 0.0161, 3.628, 0.00141),
    ModelCost("resnet34", 87259072, 0.00274, 0.0253, 7.328, 0.00242),
    ModelCost("densenet169", 57232872, 0.01322, 0.0628, 6.72, 0.00809),
    ModelCost("densenet201", 80973544, 0.01622, 0.0877, 8.583, 0.00995),
)  # fmt: skip


@dataclass(frozen=True)
class DeviceProfile:
    """What a simulated device costs: its model table, copy bandwidth and cold process."""

    table: tuple[ModelCost, ...]
    pcie_bw: float
    cold_process_s: float


PROFILES = {
    "cpu": DeviceProfile(MODEL_TABLE, PCIE_PINNED_BW, COLD_PROCESS_S),
    "h200": DeviceProfile(H200_TABLE, H200_PINNED_BW, H200_COLD_PROCESS_S),
}
