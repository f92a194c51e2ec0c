"""The vocabulary shared by the kTask modules: the error type, dtypes, tensor specs, literals.

Pure (no torch): the request is validated in the invoker process, where torch is not loaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class KTaskError(ValueError):
    """A kTask the executor refuses or could not run; ``str()`` is the developer's message."""


# name -> (bytes per element, category). Categories drive the kernels' type rules.
DTYPES: dict[str, tuple[int, str]] = {
    "bool": (1, "bool"),
    "uint8": (1, "int"),
    "int8": (1, "int"),
    "int16": (2, "int"),
    "int32": (4, "int"),
    "int64": (8, "int"),
    "float16": (2, "float"),
    "bfloat16": (2, "float"),
    "float32": (4, "float"),
    "float64": (8, "float"),
    "complex64": (8, "complex"),
    "complex128": (16, "complex"),
}


def category(dtype: str) -> str:
    return DTYPES[dtype][1]


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of a buffer; ``()`` is a scalar (one element)."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype][0]

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Literal:
    """A pass-by-value argument; ``dtype`` only when the request typed it explicitly."""

    value: int | float | bool
    dtype: str | None = None

    @property
    def category(self) -> str:
        if self.dtype is not None:
            return category(self.dtype)
        if isinstance(self.value, bool):
            return "bool"
        return "int" if isinstance(self.value, int) else "float"

    def __str__(self) -> str:
        return f"literal {self.value!r}"


Operand = TensorSpec | Literal
"""What a kernel's type rule sees for one argument."""


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"
