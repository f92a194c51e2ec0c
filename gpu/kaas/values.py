"""Small buffers as JSON: an invocation's inline inputs and the outputs its reply carries.

Pure and stdlib only (the invoker process has no torch): a value is nested lists of the
buffer's shape, C order; a complex element is ``[re, im]``; ``bool`` elements are JSON
booleans. Anything larger than :data:`MAX_INLINE_BYTES` belongs in the data layer, put and
read by key through the node's operator (the pool's operator socket, ``gpu.kaas.client``;
a tenant's keys are ``<namespace>/<key>`` there).
"""

from __future__ import annotations

import math
import struct
from typing import Any

from gpu.kaas.spec import KTaskError, TensorSpec, category, mib

MAX_INLINE_BYTES = 1 << 20  # an activation's result must fit the controller's 1 MiB anyway

# struct codes of the dtypes struct can read; bfloat16 and complex are handled apart.
_CODES = {
    "bool": "?", "uint8": "B", "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "float16": "e", "float32": "f", "float64": "d", "complex64": "f", "complex128": "d",
}  # fmt: skip
_LIMITS = {
    "uint8": (0, 255), "int8": (-128, 127), "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
}  # fmt: skip


def _flat(value: Any, shape: tuple[int, ...], where: str) -> list[Any]:
    """The elements of a nested list of ``shape``, in C order."""
    if not shape:
        return [value]
    if not isinstance(value, list) or len(value) != shape[0]:
        got = f"{len(value)} items" if isinstance(value, list) else type(value).__name__
        raise KTaskError(f"{where}: expected a list of {shape[0]} items, got {got}")
    out: list[Any] = []
    for i, v in enumerate(value):
        out += _flat(v, shape[1:], f"{where}[{i}]")
    return out


def _element(v: Any, dtype: str, where: str) -> list[Any]:
    """One element as the struct values it packs to (two for a complex one)."""
    cat = category(dtype)
    if cat == "bool":
        if not isinstance(v, bool):
            raise KTaskError(f"{where}: {v!r} is not a boolean")
        return [v]
    if isinstance(v, bool):
        raise KTaskError(f"{where}: {v!r} is a boolean, not a {dtype} value")
    if cat == "complex":
        pair = v if isinstance(v, list) else [v, 0]
        if len(pair) != 2 or not all(isinstance(x, int | float) for x in pair):
            raise KTaskError(f"{where}: a complex value is a number or [re, im], not {v!r}")
        return [float(x) for x in pair]
    if cat == "int":
        if not isinstance(v, int):
            raise KTaskError(f"{where}: {v!r} is not an integer ({dtype})")
        low, high = _LIMITS[dtype]
        if not low <= v <= high:
            raise KTaskError(f"{where}: {v} does not fit {dtype}")
        return [v]
    if not isinstance(v, int | float) or not math.isfinite(v):
        raise KTaskError(f"{where}: {v!r} is not a finite number ({dtype})")
    return [float(v)]


def from_json(value: Any, spec: TensorSpec, where: str = "value") -> bytes:
    """The data layer's bytes for a JSON value of ``spec`` (C order, native byte order, as
    the store keeps them)."""
    if spec.nbytes > MAX_INLINE_BYTES:
        raise KTaskError(
            f"{where} is {spec} ({mib(spec.nbytes)}): inline values are at most "
            f"{mib(MAX_INLINE_BYTES)}; the node's operator can put it in the data layer by "
            "key instead"
        )
    items: list[Any] = []
    for i, v in enumerate(_flat(value, spec.shape, where)):
        items += _element(v, spec.dtype, f"{where} element {i}")
    if spec.dtype == "bfloat16":  # the high half of a float32
        packed = struct.pack(f"={len(items)}f", *items)
        words = struct.unpack(f"={len(items)}I", packed)
        return struct.pack(f"={len(items)}H", *(_round_bf16(w) for w in words))
    try:
        return struct.pack(f"={len(items)}{_CODES[spec.dtype]}", *items)
    except (struct.error, OverflowError) as e:  # float16 out of range
        raise KTaskError(f"{where}: a value does not fit {spec.dtype} ({e})") from None


def _round_bf16(word: int) -> int:
    """float32 bits to bfloat16 bits, rounding to nearest even (as torch does)."""
    return ((word + 0x7FFF + ((word >> 16) & 1)) >> 16) & 0xFFFF


def to_json(data: bytes | memoryview, spec: TensorSpec) -> Any:
    """The JSON value of ``spec``'s elements in ``data`` (nested lists; a scalar is a number)."""
    if len(data) != spec.nbytes:
        raise KTaskError(f"{len(data)} bytes do not make {spec} ({spec.nbytes})")
    n = spec.numel
    if spec.dtype == "bfloat16":
        words = struct.unpack(f"={n}H", data)
        flat: list[Any] = list(
            struct.unpack(f"={n}f", struct.pack(f"={n}I", *(w << 16 for w in words)))
        )
    elif category(spec.dtype) == "complex":
        parts = struct.unpack(f"={2 * n}{_CODES[spec.dtype]}", data)
        flat = [[parts[2 * i], parts[2 * i + 1]] for i in range(n)]
    else:
        flat = list(struct.unpack(f"={n}{_CODES[spec.dtype]}", data))
    return _nest(flat, spec.shape)


def _nest(flat: list[Any], shape: tuple[int, ...]) -> Any:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = math.prod(shape[1:])
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]
