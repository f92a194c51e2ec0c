"""The KaaS executor: one per device, runs any client's validated kTasks without restarting.

A run reads the inputs from the data layer (constants through the device's constant cache:
a hit uses the resident tensor, a miss copies it from the host and may evict others),
allocates the temporaries and outputs (zeros, or a copy of their ``init`` input), runs the
kernels in the graph's order ``iterations`` times, and writes the outputs back by key. Every
failure a request can cause is a :class:`KTaskError` naming what went wrong; the executor
stays usable for the next request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from gpu.kaas.constants import ConstantCache, cache_key, split_key
from gpu.kaas.format import Buffer, Kind, KTask
from gpu.kaas.kernels import KernelCache, Value, launch
from gpu.kaas.spec import KTaskError, mib
from gpu.kaas.store import DataStore, StoredObject
from gpu.kaas.tensors import TORCH_DTYPES, from_bytes, to_bytes
from whisk.clock import Clock, SystemClock


@dataclass
class RunResult:
    outputs: dict[str, StoredObject]  # output buffer name -> what was written (key, version)
    constant_hits: int = 0
    constant_misses: int = 0
    seconds: float = 0.0
    evicted: list[str] = field(default_factory=list)  # constants dropped from this device

    def reply(self) -> dict[str, dict[str, object]]:
        """The answer a client gets: each output's key and version."""
        return {n: {"key": o.key, "version": o.version} for n, o in self.outputs.items()}


class KaasExecutor:
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
        self.device = torch.device(device)
        self.store = store
        self.constants = constants
        self.clock = clock or SystemClock()
        self.kernels = KernelCache()
        self._resident: dict[str, torch.Tensor] = {}  # cache key -> tensor on this device
        self.runs = 0

    def resident_keys(self) -> set[str]:
        return set(self._resident)

    def run(self, task: KTask) -> RunResult:
        start = self.clock.now()
        inputs = {b.name: self._lookup(b) for b in task.of_kind(Kind.INPUT)}
        result = RunResult({})
        pinned: list[tuple[str, int]] = []
        try:
            tensors: dict[str, torch.Tensor] = {}
            for b in task.of_kind(Kind.INPUT):
                o = inputs[b.name]
                if b.const:
                    tensors[b.name] = self._constant(o, result)
                    pinned.append((o.key, o.version))
                else:
                    tensors[b.name] = self._load(o)
            for b in task.buffers.values():
                if b.kind is not Kind.INPUT:
                    tensors[b.name] = self._allocate(b, tensors)
            self._kernels(task, tensors)
            for b in task.of_kind(Kind.OUTPUT):
                assert b.key is not None
                result.outputs[b.name] = self.store.put(b.key, to_bytes(tensors[b.name]), b.spec)
        finally:
            for key, version in pinned:
                self.constants.release(self.index, key, version)
        self.runs += 1
        result.seconds = self.clock.now() - start
        return result

    def _lookup(self, b: Buffer) -> StoredObject:
        assert b.key is not None
        o = self.store.get(b.key)
        if o is None:
            raise KTaskError(
                f"input {b.name!r} reads key {b.key!r}, which is not in the data layer"
            )
        if o.spec != b.spec:
            raise KTaskError(
                f"input {b.name!r} is declared {b.spec} but key {b.key!r} holds {o.spec}"
            )
        if b.version is not None and o.version != b.version:
            raise KTaskError(
                f"input {b.name!r} expects version {b.version} of key {b.key!r}, "
                f"the data layer holds version {o.version}"
            )
        return o

    def _load(self, o: StoredObject) -> torch.Tensor:
        return from_bytes(o.path.read_bytes(), o.spec).to(self.device)

    def _constant(self, o: StoredObject, result: RunResult) -> torch.Tensor:
        adm = self.constants.admit(self.index, o.key, o.version, o.nbytes)
        for v in adm.victims:
            self._resident.pop(v, None)
            result.evicted.append(split_key(v)[0])
        ck = cache_key(o.key, o.version)
        if adm.hit and ck in self._resident:
            result.constant_hits += 1
            return self._resident[ck]
        try:
            t = self._load(o)
        except BaseException:
            self.constants.forget(self.index, o.key, o.version)
            raise
        self._resident[ck] = t
        result.constant_misses += 1
        return t

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
