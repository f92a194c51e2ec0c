"""GPU pool configuration: one frozen, self-checking dataclass, read by the invoker and by
``ow-invoker gpu-pool`` through :mod:`whisk.settings` (flags, environment, TOML)."""

from __future__ import annotations

from dataclasses import dataclass

from gpu.policies import DEFAULT_AFFINITY_PENALTY, DEFAULT_O3_LIMIT, POLICIES
from whisk.settings import parse_memory_mb, setting


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
    """The GPU pool's settings: the one place they and their defaults are defined. The
    invoker reads them as ``--gpu-<field>`` / ``OW_INVOKER_GPU_<FIELD>`` (``gpu: GpuConfig``
    in :class:`invoker.config.InvokerConfig`), ``ow-invoker gpu-pool`` as ``--gpu-<field>``."""

    devices: str = setting(
        "auto", help="GPU devices: auto (NVML GPUs, else virtual ones), nvml, or virtual:N"
    )
    memory_mb: int = setting(1024, convert=parse_memory_mb, help="capacity of each virtual device")
    virtual_count: int = setting(2, help="virtual devices when auto finds no GPU")
    memory_fraction: float = setting(
        0.8, help="share of a real GPU's memory given to resident models"
    )
    policy: str = setting("lalbo3", choices=POLICIES, help="GPU scheduler")
    o3_limit: int = setting(DEFAULT_O3_LIMIT, help="LALB+O3 skip limit (0: LALB)")
    affinity_penalty: float = setting(
        DEFAULT_AFFINITY_PENALTY, help="CFS-Affinity off-affinity penalty factor"
    )
    fair_share_by: str = setting(
        "function", choices=("function", "namespace"), help="CFS-Affinity client"
    )
    host_memory_mb: int = setting(
        8192, convert=parse_memory_mb, help="host tier size (pinned where a GPU exists)"
    )
    address: str | None = setting(
        None, help="pool address: unix:/path or tcp:127.0.0.1:PORT (unset: a private socket)"
    )
    worker_threads: int = setting(1, help="torch intra-op threads per virtual device worker")
    max_payload_mb: int = setting(
        256,
        convert=parse_memory_mb,
        help="largest input/output tensor or model file over the socket",
    )
    max_retries: int = setting(1, help="re-runs of a request whose device worker died")
    state_dir: str | None = setting(
        None, help="where host tier files live (unset: /dev/shm when present)"
    )
    kaas_store_mb: int = setting(
        1024, convert=parse_memory_mb, help="kTask data layer size (host memory, by key)"
    )
    kaas_constant_mb: int = setting(
        256,
        convert=parse_memory_mb,
        help="device memory per device for resident kTask constants (beside the models')",
    )
    kaas_max_wait_s: float = setting(
        60.0, help="longest a kTask may wait for its inputs (its wait_s parameter)"
    )
    kaas_cuda_source: bool = setting(
        False,
        help="run kTasks' own CUDA source (it runs in the shared executor and can reach every "
        "tenant's device memory: trusted tenants only)",
    )

    def __post_init__(self) -> None:
        parse_device_spec(self.devices)
        if self.policy not in POLICIES:
            raise ValueError(f"unknown GPU policy {self.policy!r}; choose from {POLICIES}")
        if min(self.memory_mb, self.host_memory_mb, self.max_payload_mb, self.kaas_store_mb) <= 0:
            raise ValueError("memory sizes must be positive")
        if not 0 < self.memory_fraction <= 1:
            raise ValueError("memory_fraction must be in (0, 1]")
        if self.o3_limit < 0 or self.max_retries < 0 or self.worker_threads < 1:
            raise ValueError("o3_limit and max_retries must be >= 0, worker_threads >= 1")
        if self.kaas_constant_mb < 0 or self.kaas_max_wait_s < 0:
            raise ValueError("kaas_constant_mb and kaas_max_wait_s must be >= 0")
        if self.fair_share_by not in ("function", "namespace"):
            raise ValueError("fair_share_by must be 'function' or 'namespace'")
