"""Tensors to and from the data layer's bytes: the dtype names of the format as torch dtypes."""

from __future__ import annotations

import torch

from gpu.kaas.spec import TensorSpec

TORCH_DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}
_NAMES = {v: k for k, v in TORCH_DTYPES.items()}


def spec_of(t: torch.Tensor) -> TensorSpec:
    if t.dtype not in _NAMES:
        raise ValueError(f"dtype {t.dtype} has no name in the kTask format")
    return TensorSpec(tuple(t.shape), _NAMES[t.dtype])


def to_bytes(t: torch.Tensor) -> bytes:
    """The tensor's elements, C order, native byte order (what the store keeps)."""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def from_bytes(data: bytes | bytearray | memoryview, spec: TensorSpec) -> torch.Tensor:
    dtype = TORCH_DTYPES[spec.dtype]
    if spec.numel == 0:
        return torch.empty(spec.shape, dtype=dtype)
    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return raw.view(dtype).reshape(spec.shape)
