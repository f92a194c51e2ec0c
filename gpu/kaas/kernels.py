"""The kernels' torch implementations, and the CUDA-source path (NVRTC through torch).

Each built-in computes its result from the argument tensors and literals and copies it into
the output tensors the executor allocated, so an output may alias an input (in-place updates
such as ``v = add(v, f)`` are safe). The same code runs on the CPU-backed virtual devices and
on CUDA devices. User CUDA source is compiled only for a CUDA device; on a CPU device it is
refused with a :class:`KTaskError`.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gpu.kaas.format import Kernel
from gpu.kaas.spec import KTaskError

Value = torch.Tensor | int | float | bool
Impl = Callable[[Sequence[Value], Sequence[torch.Tensor]], None]


def _t(v: Value) -> torch.Tensor:
    assert isinstance(v, torch.Tensor)  # the parser's type rules guarantee it
    return v


def _into(outs: Sequence[torch.Tensor], *results: torch.Tensor) -> None:
    for o, r in zip(outs, results, strict=True):
        o.copy_(r)


def _binary(op: Callable[[torch.Tensor, Any], torch.Tensor]) -> Impl:
    def run(args: Sequence[Value], outs: Sequence[torch.Tensor]) -> None:
        _into(outs, op(_t(args[0]), args[1]))

    return run


def _reduce(whole: Callable[[torch.Tensor], torch.Tensor], name: str) -> Impl:
    def run(args: Sequence[Value], outs: Sequence[torch.Tensor]) -> None:
        a = _t(args[0])
        if len(args) == 1:
            _into(outs, whole(a))
            return
        r = getattr(a, name)(dim=int(args[1]))
        _into(outs, r.values if name in ("max", "min") else r)

    return run


def _clamp(args: Sequence[Value], outs: Sequence[torch.Tensor]) -> None:
    _into(outs, torch.clamp(_t(args[0]), args[1], args[2]))  # type: ignore[arg-type]


def _matmul(args: Sequence[Value], outs: Sequence[torch.Tensor]) -> None:
    _into(outs, _t(args[0]) @ _t(args[1]))


def _cgemm(args: Sequence[Value], outs: Sequence[torch.Tensor]) -> None:
    """(Ar + i Ai)(Br + i Bi) with four real GEMMs (no complex dtype on either side)."""
    ar, ai, br, bi = (_t(a) for a in args)
    _into(outs, ar @ br - ai @ bi, ar @ bi + ai @ br)


def _csr_matvec(args: Sequence[Value], outs: Sequence[torch.Tensor]) -> None:
    """Sparse A·x; the CSR arrays are the request's data, so torch checks them (no bad reads)."""
    indptr, indices, values, x = (_t(a) for a in args)
    with warnings.catch_warnings():  # "sparse CSR support is in beta": known, not actionable
        warnings.simplefilter("ignore", UserWarning)
        a = torch.sparse_csr_tensor(
            indptr, indices, values, size=(indptr.shape[0] - 1, x.shape[0]), check_invariants=True
        )
        _into(outs, (a @ x.unsqueeze(1)).squeeze(1))


IMPLEMENTATIONS: dict[str, Impl] = {
    "copy": lambda args, outs: _into(outs, _t(args[0])),
    "add": _binary(torch.add),
    "sub": _binary(torch.sub),
    "mul": _binary(torch.mul),
    "div": _binary(torch.div),
    "clamp": _clamp,
    "matmul": _matmul,
    "cgemm": _cgemm,
    "csr_matvec": _csr_matvec,
    "sum": _reduce(torch.sum, "sum"),
    "mean": _reduce(torch.mean, "mean"),
    "max": _reduce(torch.max, "max"),
    "min": _reduce(torch.min, "min"),
}


class KernelCache:
    """Compiled CUDA functions by (source hash, function): compiled once per executor."""

    def __init__(self) -> None:
        self._compiled: dict[tuple[str, str], Any] = {}
        self.compiles = 0

    def get(self, kernel: Kernel, device: torch.device) -> Any:
        if device.type != "cuda":
            raise KTaskError(
                f"kernel {kernel.name!r} is CUDA source, which runs only on a CUDA device; "
                f"this executor's device is {device} (use a built-in kernel, or send the "
                "kTask to a pool with GPUs)"
            )
        assert kernel.source is not None
        key = (hashlib.sha256(kernel.source.encode()).hexdigest(), kernel.function)
        fn = self._compiled.get(key)
        if fn is None:
            try:
                with torch.cuda.device(device):
                    fn = torch.cuda._compile_kernel(kernel.source, kernel.function)
            except Exception as e:  # NVRTC's log is the developer's error message
                raise KTaskError(f"kernel {kernel.name!r} does not compile: {e}") from None
            self._compiled[key] = fn
            self.compiles += 1
        return fn


def launch(kernel: Kernel, device: torch.device, cache: KernelCache, args: list[Value]) -> None:
    """Run one kernel; its ``args`` are the arguments then (CUDA) or plus (built-in) outputs."""
    if kernel.library == "cuda":
        fn = cache.get(kernel, device)
        with torch.cuda.device(device):
            fn(grid=kernel.grid, block=kernel.block, args=args, shared_mem=kernel.shared_mem)
        return
    n = len(kernel.arguments)
    outs = [_t(a) for a in args[n:]]
    IMPLEMENTATIONS[kernel.function](args[:n], outs)
