"""GPU pool configuration: one frozen, self-checking dataclass and its command-line flags."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from gpu.policies import DEFAULT_AFFINITY_PENALTY, DEFAULT_O3_LIMIT, POLICIES


def parse_device_spec(spec: str) -> tuple[str, int | None]:
    """``auto`` | ``nvml`` | ``virtual:N`` → (mode, N or None)."""
    s = spec.strip().lower()
    if s in ("auto", "nvml"):
        return s, None
    if s.startswith("virtual"):
        _, _, n = s.partition(":")
        count = int(n) if n else 2
        if count < 1:
            raise ValueError("virtual:N needs N >= 1")
        return "virtual", count
    raise ValueError(f"bad --gpu-devices {spec!r}: use auto, nvml or virtual:N")


@dataclass(frozen=True)
class GpuConfig:
    devices: str = "auto"  # auto: NVML GPUs if any, else ``virtual_count`` virtual devices
    memory_mb: int = 1024  # capacity of each virtual device
    virtual_count: int = 2  # virtual devices when ``auto`` finds no GPU
    memory_fraction: float = 0.8  # share of a real GPU's memory given to resident models
    policy: str = "lalbo3"
    o3_limit: int = DEFAULT_O3_LIMIT
    affinity_penalty: float = DEFAULT_AFFINITY_PENALTY
    fair_share_by: str = "function"  # CFS-Affinity client: "function" or "namespace"
    host_memory_mb: int = 8192  # host tier (pinned where a GPU exists) bound
    address: str | None = None  # unix:/path or tcp:127.0.0.1:PORT; None: a private socket
    worker_threads: int = 1  # torch intra-op threads per virtual device worker
    max_payload_mb: int = 256  # largest input/output tensor or model file over the socket
    max_retries: int = 1  # re-runs of a request whose device worker died
    state_dir: str | None = None  # host tier files; None: /dev/shm when present

    def __post_init__(self) -> None:
        parse_device_spec(self.devices)
        if self.policy not in POLICIES:
            raise ValueError(f"unknown GPU policy {self.policy!r}; choose from {POLICIES}")
        if self.memory_mb <= 0 or self.host_memory_mb <= 0 or self.max_payload_mb <= 0:
            raise ValueError("memory sizes must be positive")
        if not 0 < self.memory_fraction <= 1:
            raise ValueError("memory_fraction must be in (0, 1]")
        if self.o3_limit < 0 or self.max_retries < 0 or self.worker_threads < 1:
            raise ValueError("o3_limit and max_retries must be >= 0, worker_threads >= 1")
        if self.fair_share_by not in ("function", "namespace"):
            raise ValueError("fair_share_by must be 'function' or 'namespace'")


def add_gpu_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("GPU pool")
    g.add_argument(
        "--gpu-devices",
        default="auto",
        help="auto (NVML GPUs, else virtual), nvml, or virtual:N (CPU-backed devices)",
    )
    g.add_argument("--gpu-memory-mb", type=int, default=1024, help="per virtual device")
    g.add_argument("--gpu-policy", choices=POLICIES, default="lalbo3")
    g.add_argument("--gpu-o3-limit", type=int, default=DEFAULT_O3_LIMIT)
    g.add_argument("--gpu-affinity-penalty", type=float, default=DEFAULT_AFFINITY_PENALTY)
    g.add_argument("--gpu-fair-share-by", choices=["function", "namespace"], default="function")
    g.add_argument("--gpu-host-memory-mb", type=int, default=8192, help="host tier size")
    g.add_argument("--gpu-address", default=None, help="unix:/path or tcp:127.0.0.1:PORT")
    g.add_argument("--gpu-worker-threads", type=int, default=1)


def config_from_args(args: argparse.Namespace) -> GpuConfig:
    return GpuConfig(
        devices=args.gpu_devices,
        memory_mb=args.gpu_memory_mb,
        policy=args.gpu_policy,
        o3_limit=args.gpu_o3_limit,
        affinity_penalty=args.gpu_affinity_penalty,
        fair_share_by=args.gpu_fair_share_by,
        host_memory_mb=args.gpu_host_memory_mb,
        address=args.gpu_address,
        worker_threads=args.gpu_worker_threads,
    )
