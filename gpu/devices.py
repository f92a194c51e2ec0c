"""Finding the devices: real GPUs through NVML, or CPU-backed virtual devices.

Either way the pool runs the same code: one worker process per device, capacities in bytes,
and a device type string that keys the run-time profiles (same GPU model → same profile).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from gpu.config import GpuConfig, parse_device_spec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceSpec:
    index: int
    name: str
    kind: str  # "cuda" or "virtual"
    torch_device: str  # what the worker passes to torch: "cuda:0" or "cpu"
    memory_bytes: int  # the budget for resident models
    dtype: str  # profile key: the GPU model, or "virtual"


class Nvml:
    """Thin wrapper over pynvml (nvidia-ml-py); ``available`` is False without a driver."""

    def __init__(self) -> None:
        self.available = False
        self.reason = ""
        self._nv: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv = pynvml
            self.available = True
        except ImportError:
            self.reason = "nvidia-ml-py is not installed"
        except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.reason = f"NVML unavailable: {e}"

    def count(self) -> int:
        return self._nv.nvmlDeviceGetCount() if self.available else 0

    def describe(self, i: int) -> tuple[str, int]:
        h = self._nv.nvmlDeviceGetHandleByIndex(i)
        name = self._nv.nvmlDeviceGetName(h)
        name = name.decode() if isinstance(name, bytes) else name
        return name, int(self._nv.nvmlDeviceGetMemoryInfo(h).total)

    def utilization(self, i: int) -> tuple[float, int]:
        """(SM utilisation 0..1, memory used in bytes) as the driver reports them."""
        h = self._nv.nvmlDeviceGetHandleByIndex(i)
        u = self._nv.nvmlDeviceGetUtilizationRates(h)
        return u.gpu / 100.0, int(self._nv.nvmlDeviceGetMemoryInfo(h).used)

    def close(self) -> None:
        if self.available:
            try:
                self._nv.nvmlShutdown()
            except Exception:
                pass
            self.available = False


def budget_fraction(budget_bytes: int) -> float:
    """The ``memory_fraction`` that gives each GPU sized like GPU 0 a model budget of at least
    ``budget_bytes``: how tests and benchmarks give a real GPU a virtual device's budget."""
    nvml = Nvml()
    if not nvml.available:
        raise RuntimeError(f"no GPU to size: {nvml.reason}")
    try:
        return (budget_bytes + 1) / nvml.describe(0)[1]  # +1: never round below the budget
    finally:
        nvml.close()


def virtual_devices(count: int, memory_mb: int) -> list[DeviceSpec]:
    return [
        DeviceSpec(i, f"virtual-{i}", "virtual", "cpu", memory_mb << 20, "virtual")
        for i in range(count)
    ]


def discover(config: GpuConfig, nvml: Nvml | None = None) -> tuple[list[DeviceSpec], str]:
    """The devices to run, and one line saying how they were found."""
    mode, n = parse_device_spec(config.devices)
    if mode == "virtual":
        assert n is not None
        return virtual_devices(n, config.memory_mb), f"{n} virtual devices (configured)"
    nvml = nvml or Nvml()
    if nvml.available and nvml.count() > 0:
        out = []
        for i in range(nvml.count()):
            name, total = nvml.describe(i)
            budget = int(total * config.memory_fraction)
            out.append(DeviceSpec(i, name, "cuda", f"cuda:{i}", budget, f"cuda:{name}"))
        return out, f"{len(out)} GPUs via NVML"
    if mode == "nvml":
        raise RuntimeError(f"--gpu-devices nvml: no GPU found ({nvml.reason or 'count is 0'})")
    note = (
        f"no GPU ({nvml.reason or 'NVML reports none'}); "
        f"using {config.virtual_count} virtual devices of {config.memory_mb} MiB"
    )
    log.warning("GPU pool: %s", note)
    return virtual_devices(config.virtual_count, config.memory_mb), note
