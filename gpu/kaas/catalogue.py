"""The built-in kernels' type rules: which arguments each takes and what it writes (pure).

A rule sees the arguments' specs (buffers) and literals and returns the specs of the outputs
the kernel writes, or raises :class:`SignatureError` saying what is wrong; the request parser
adds which kernel and compares the result with the output buffers the request declares. The
torch implementations, one per name, are in ``gpu.kaas.kernels``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpu.kaas.spec import Literal, Operand, TensorSpec, category


class SignatureError(ValueError):
    """The arguments do not fit the kernel (the parser prefixes the kernel's name)."""


Rule = Callable[[Sequence[Operand]], list[TensorSpec]]


@dataclass(frozen=True)
class Builtin:
    name: str
    usage: str  # the argument list, for error messages and the docs
    rule: Rule


def _arity(args: Sequence[Operand], low: int, high: int | None = None) -> None:
    high = low if high is None else high
    if not low <= len(args) <= high:
        want = str(low) if low == high else f"{low} to {high}"
        raise SignatureError(f"takes {want} arguments, got {len(args)}")


def _tensor(args: Sequence[Operand], i: int, *cats: str) -> TensorSpec:
    a = args[i]
    if not isinstance(a, TensorSpec):
        raise SignatureError(f"argument {i + 1} must be a buffer, got {a}")
    if cats and category(a.dtype) not in cats:
        raise SignatureError(f"argument {i + 1} is {a}, needs a {' or '.join(cats)} dtype")
    return a


def _literal(args: Sequence[Operand], i: int, *cats: str) -> Literal:
    a = args[i]
    if not isinstance(a, Literal):
        raise SignatureError(f"argument {i + 1} must be a literal, got buffer {a}")
    if cats and a.category not in cats:
        raise SignatureError(f"argument {i + 1} ({a}) must be {' or '.join(cats)}")
    return a


_NUMERIC = ("int", "float", "complex")
_REAL = ("int", "float")


def _copy(args: Sequence[Operand]) -> list[TensorSpec]:
    _arity(args, 1)
    return [_tensor(args, 0)]


def _elementwise(args: Sequence[Operand]) -> list[TensorSpec]:
    _arity(args, 2)
    a = _tensor(args, 0, *_NUMERIC)
    b = args[1]
    if isinstance(b, TensorSpec):
        if b != a:
            raise SignatureError(f"operands must match: {a} and {b} (no broadcasting)")
    elif b.category == "complex" or (b.category == "float" and category(a.dtype) == "int"):
        raise SignatureError(f"{b} does not fit a {a.dtype} buffer")
    return [a]


def _div(args: Sequence[Operand]) -> list[TensorSpec]:
    a = _tensor(args, 0, "float", "complex")  # integer division would truncate silently
    return _elementwise(args) if len(args) == 2 else [a]


def _clamp(args: Sequence[Operand]) -> list[TensorSpec]:
    _arity(args, 3)
    a = _tensor(args, 0, *_REAL)
    lo = _literal(args, 1, *_REAL)
    hi = _literal(args, 2, *_REAL)
    if lo.value > hi.value:
        raise SignatureError(f"lower bound {lo.value} is above upper bound {hi.value}")
    return [a]


def _matmul(args: Sequence[Operand]) -> list[TensorSpec]:
    _arity(args, 2)
    a = _tensor(args, 0, "float", "complex")
    b = _tensor(args, 1, "float", "complex")
    if a.dtype != b.dtype:
        raise SignatureError(f"operands must have one dtype: {a} and {b}")
    if len(a.shape) != 2 or len(b.shape) not in (1, 2):
        raise SignatureError(f"needs a matrix times a matrix or vector, got {a} and {b}")
    if a.shape[1] != b.shape[0]:
        raise SignatureError(f"inner dimensions differ: {a} @ {b}")
    return [TensorSpec((a.shape[0], *b.shape[1:]), a.dtype)]


def _cgemm(args: Sequence[Operand]) -> list[TensorSpec]:
    _arity(args, 4)
    ar, ai, br, bi = (_tensor(args, i, "float") for i in range(4))
    if ar != ai or br != bi:
        raise SignatureError(f"real and imaginary parts must match: A {ar} / {ai}, B {br} / {bi}")
    if ar.dtype != br.dtype or len(ar.shape) != 2 or len(br.shape) != 2:
        raise SignatureError(f"needs two matrices of one dtype, got {ar} and {br}")
    if ar.shape[1] != br.shape[0]:
        raise SignatureError(f"inner dimensions differ: {ar} @ {br}")
    c = TensorSpec((ar.shape[0], br.shape[1]), ar.dtype)
    return [c, c]


def _csr_matvec(args: Sequence[Operand]) -> list[TensorSpec]:
    _arity(args, 4)
    indptr = _tensor(args, 0, "int")
    indices = _tensor(args, 1, "int")
    values = _tensor(args, 2, "float", "complex")
    x = _tensor(args, 3, "float", "complex")
    if indptr.dtype not in ("int32", "int64") or indices.dtype != indptr.dtype:
        raise SignatureError(
            f"indptr and indices must both be int32 or both int64, got {indptr} and {indices}"
        )
    if len(indptr.shape) != 1 or indptr.shape[0] < 1:
        raise SignatureError(f"indptr must be a vector of rows + 1 entries, got {indptr}")
    if len(indices.shape) != 1 or values.shape != indices.shape:
        raise SignatureError(f"indices and values must be vectors of nnz, got {indices}, {values}")
    if len(x.shape) != 1 or x.dtype != values.dtype:
        raise SignatureError(f"x must be a vector of the values' dtype, got {x} for {values}")
    return [TensorSpec((indptr.shape[0] - 1,), x.dtype)]


def _reduction(*cats: str) -> Rule:
    def rule(args: Sequence[Operand]) -> list[TensorSpec]:
        _arity(args, 1, 2)
        a = _tensor(args, 0, *cats)
        if len(args) == 1:
            return [TensorSpec((), a.dtype)]
        dim = _literal(args, 1, "int").value
        if not -len(a.shape) <= int(dim) < len(a.shape):
            raise SignatureError(f"dimension {dim} is out of range for {a}")
        d = int(dim) % len(a.shape)
        return [TensorSpec(a.shape[:d] + a.shape[d + 1 :], a.dtype)]

    return rule


def _builtins() -> dict[str, Builtin]:
    table = [
        Builtin("copy", "(a) -> out", _copy),
        Builtin("add", "(a, b | literal) -> out", _elementwise),
        Builtin("sub", "(a, b | literal) -> out", _elementwise),
        Builtin("mul", "(a, b | literal) -> out", _elementwise),
        Builtin("div", "(a, b | literal) -> out", _div),
        Builtin("clamp", "(a, low, high) -> out", _clamp),
        Builtin("matmul", "(A[m,k], B[k,n] | x[k]) -> out[m,n] | out[m]", _matmul),
        Builtin("cgemm", "(Ar, Ai, Br, Bi) -> (Cr, Ci)", _cgemm),
        Builtin("csr_matvec", "(indptr, indices, values, x) -> out", _csr_matvec),
        Builtin("sum", "(a[, dim]) -> out", _reduction(*_NUMERIC)),
        Builtin("mean", "(a[, dim]) -> out", _reduction("float", "complex")),
        Builtin("max", "(a[, dim]) -> out", _reduction(*_REAL)),
        Builtin("min", "(a[, dim]) -> out", _reduction(*_REAL)),
    ]
    return {b.name: b for b in table}


BUILTINS: dict[str, Builtin] = _builtins()
