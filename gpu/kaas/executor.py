"""The KaaS executor: one per device, runs any client's kTasks without restarting.

Two halves, split as the pool splits model work: :class:`KaasWorker` is the device side (torch:
the resident constants' tensors, the compiled CUDA kernels), driven by one JSON header per
kTask that ``gpu.kaas.calls.prepare`` writes; :class:`KaasExecutor` puts the pool's side and a
worker in one process (the tests, and any caller without worker processes). A worker run reads
the inputs (constants from its resident set, loading those it lacks), allocates temporaries
and outputs (zeros, or a copy of their ``init`` input), runs the kernels in the graph's order
``iterations`` times and writes each output to the file the pool staged. Every failure a
request can cause is a :class:`KTaskError`; the worker stays usable for the next request.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from gpu.kaas.calls import RunResult, finish, prepare
from gpu.kaas.constants import ConstantCache
from gpu.kaas.format import Buffer, Kind, KTask, parse
from gpu.kaas.kernels import KernelCache, Value, launch
from gpu.kaas.spec import KTaskError, TensorSpec, mib
from gpu.kaas.store import DataStore
from gpu.kaas.tensors import TORCH_DTYPES, from_bytes, to_bytes
from whisk.clock import Clock, SystemClock

__all__ = ["KaasExecutor", "KaasWorker", "RunResult"]


class KaasWorker:
    def __init__(self, device: torch.device | str, *, clock: Clock | None = None) -> None:
        self.device = torch.device(device)
        self.clock = clock or SystemClock()
        self.kernels = KernelCache()
        self.resident: dict[str, torch.Tensor] = {}  # constant cache key -> tensor here
        self.loads = 0

    def handle(self, header: Mapping[str, Any]) -> dict[str, Any]:
        """Run one kTask call; the reply carries the error instead of raising it."""
        start = self.clock.now()
        try:
            self._run(header)
        except KTaskError as e:
            return {"error": "KTaskError", "message": str(e), "resident": sorted(self.resident)}
        except Exception as e:  # a bug, not the request's fault: reported, the worker lives on
            return {"error": type(e).__name__, "message": str(e), "resident": sorted(self.resident)}
        return {"ok": True, "seconds": self.clock.now() - start, "resident": sorted(self.resident)}

    def _run(self, header: Mapping[str, Any]) -> None:
        keep = set(header.get("keep", ()))
        for ck in [k for k in self.resident if k not in keep]:
            del self.resident[ck]  # evicted by the pool's cache
        task = parse(header["task"])
        tensors: dict[str, torch.Tensor] = {}
        for name, spec in header["inputs"].items():
            b = task.buffers[name]
            ck = spec.get("cache_key")
            if ck is None:
                tensors[name] = self._load(spec["file"], b.spec)
            else:
                t = self.resident.get(ck)
                if t is None:
                    t = self.resident[ck] = self._load(spec["file"], b.spec)
                    self.loads += 1
                tensors[name] = t
        for b in task.buffers.values():
            if b.kind is not Kind.INPUT:
                tensors[b.name] = self._allocate(b, tensors)
        self._kernels(task, tensors)
        for name, path in header["outputs"].items():
            Path(path).write_bytes(to_bytes(tensors[name]))

    def _load(self, file: str, spec: TensorSpec) -> torch.Tensor:
        try:
            data = Path(file).read_bytes()
        except OSError as e:
            raise KTaskError(f"the data layer's file for an input is gone: {e}") from None
        return from_bytes(data, spec).to(self.device)

    def _allocate(self, b: Buffer, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        try:
            if b.init is not None:
                return tensors[b.init].clone()
            return torch.zeros(b.spec.shape, dtype=TORCH_DTYPES[b.spec.dtype], device=self.device)
        except RuntimeError as e:  # out of memory, on a CPU or a CUDA device
            raise KTaskError(
                f"{b.kind} {b.name!r} ({b.spec}, {mib(b.nbytes)}) does not fit on "
                f"{self.device}: {e}"
            ) from None

    def _kernels(self, task: KTask, tensors: Mapping[str, torch.Tensor]) -> None:
        for _ in range(task.iterations):
            for k in task.kernels:
                args: list[Value] = [
                    tensors[a] if isinstance(a, str) else a.value for a in k.arguments
                ]
                args += [tensors[o] for o in k.outputs]
                try:
                    launch(k, self.device, self.kernels, args)
                except KTaskError:
                    raise
                except (RuntimeError, ValueError, TypeError, IndexError) as e:
                    raise KTaskError(f"kernel {k.name!r} ({k.function}) failed: {e}") from None


class KaasExecutor:
    """The pool's side and a device's worker in one process: ``run(task) -> RunResult``."""

    def __init__(
        self,
        index: int,
        device: torch.device | str,
        store: DataStore,
        constants: ConstantCache,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.index = index
        self.store = store
        self.constants = constants
        self.worker = KaasWorker(device, clock=clock)
        self.runs = 0

    @property
    def device(self) -> torch.device:
        return self.worker.device

    @property
    def kernels(self) -> KernelCache:
        return self.worker.kernels

    def resident_keys(self) -> set[str]:
        return set(self.worker.resident)

    def run(self, task: KTask) -> RunResult:
        call = prepare(task, self.index, self.store, self.constants)
        result = finish(call, self.worker.handle(call.header), self.store, self.constants)
        self.runs += 1
        return result
