"""The kTask request: parse and validate the JSON graph into typed values (pure, no torch).

A kTask names its buffers (inputs read from the data layer by key, constant or not;
temporaries the executor allocates; outputs written back by key) and a graph of kernels over
them (built-in or CUDA source; arguments are buffer names or literals; ``after`` orders them).
Everything that can be checked before running is checked here, so that a bad graph is refused
with a :class:`KTaskError` naming the buffer or kernel at fault, never a failed worker. The
format is documented in ``docs/gpu.md`` ("Kernel-as-a-Service").
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gpu.kaas.catalogue import BUILTINS, SignatureError
from gpu.kaas.spec import DTYPES, KTaskError, Literal, Operand, TensorSpec, mib

MAX_KERNELS = 4096
MAX_ITERATIONS = 1_000_000
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")


class Kind(StrEnum):
    INPUT = "input"
    TEMPORARY = "temporary"
    OUTPUT = "output"


@dataclass(frozen=True)
class Buffer:
    name: str
    kind: Kind
    spec: TensorSpec
    key: str | None = None  # data-layer key: inputs and outputs
    const: bool = False  # inputs only: may stay resident on the device between requests
    version: int | None = None  # inputs only: the data-layer version the request expects
    init: str | None = None  # temporaries and outputs: the input buffer they start as

    @property
    def nbytes(self) -> int:
        return self.spec.nbytes


Arg = str | Literal
"""A kernel argument: a buffer's name or a literal."""


@dataclass(frozen=True)
class Kernel:
    name: str
    library: str  # "builtin" or "cuda"
    function: str  # the built-in's name, or the CUDA function's name in ``source``
    arguments: tuple[Arg, ...]
    outputs: tuple[str, ...]
    after: tuple[str, ...] = ()
    source: str | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    shared_mem: int = 0

    def reads(self) -> set[str]:
        return {a for a in self.arguments if isinstance(a, str)}

    def writes(self) -> set[str]:
        return set(self.outputs)


@dataclass(frozen=True)
class KTask:
    name: str
    buffers: Mapping[str, Buffer]
    kernels: tuple[Kernel, ...]  # in the order the executor runs them (dependencies first)
    iterations: int = 1

    def of_kind(self, kind: Kind) -> list[Buffer]:
        return [b for b in self.buffers.values() if b.kind is kind]

    @property
    def constants(self) -> list[Buffer]:
        return [b for b in self.of_kind(Kind.INPUT) if b.const]

    @property
    def nbytes(self) -> int:
        """Device memory the run needs: every buffer is resident while it runs."""
        return sum(b.nbytes for b in self.buffers.values())

    @property
    def needs_cuda(self) -> bool:
        return any(k.library == "cuda" for k in self.kernels)


# -- parsing ----------------------------------------------------------------------------------

_TOP = {"name", "buffers", "kernels", "iterations", "version"}
_BUFFER = {"kind", "dtype", "shape", "size", "key", "const", "version", "init"}
_KERNEL = {
    "name", "library", "kernel", "arguments", "outputs", "after", "source", "grid", "block",
    "shared_mem",
}  # fmt: skip


def parse(
    doc: Any,
    *,
    keys: Mapping[str, str] | None = None,
    device_memory: int | None = None,
) -> KTask:
    """Validate a decoded JSON kTask and return it with its kernels in execution order.

    ``keys`` overrides buffers' data-layer keys by buffer name (an invocation's parameters);
    ``device_memory`` is the largest device's memory, which the buffers together must fit.
    """
    obj = _object(doc, "the kTask", _TOP, required=("buffers", "kernels"))
    if obj.get("version", 1) != 1:
        raise KTaskError(f"kTask format version {obj['version']!r} is not supported (only 1)")
    name = obj.get("name", "ktask")
    if not isinstance(name, str) or not name:
        raise KTaskError("the kTask's 'name' must be a non-empty string")
    iterations = obj.get("iterations", 1)
    if not _is_int(iterations) or not 1 <= iterations <= MAX_ITERATIONS:
        raise KTaskError(f"'iterations' must be an integer from 1 to {MAX_ITERATIONS}")

    raw_buffers = obj["buffers"]
    if not isinstance(raw_buffers, dict) or not raw_buffers:
        raise KTaskError("'buffers' must be an object mapping buffer names to their specs")
    buffers = {n: _buffer(n, b) for n, b in raw_buffers.items()}
    for b in buffers.values():
        _check_init(b, buffers)
    if keys is not None and not isinstance(keys, Mapping):
        raise KTaskError("the invocation's keys must map buffer names to data-layer keys")
    for bname, key in (keys or {}).items():
        buffers[bname] = _rekey(buffers, bname, key)
    _check_keys(buffers)

    raw_kernels = obj["kernels"]
    if not isinstance(raw_kernels, list) or not raw_kernels:
        raise KTaskError("'kernels' must be a non-empty list of kernel specs")
    if len(raw_kernels) > MAX_KERNELS:
        raise KTaskError(f"{len(raw_kernels)} kernels: at most {MAX_KERNELS} per kTask")
    kernels: list[Kernel] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_kernels):
        k = _kernel(i, raw, buffers)
        if k.name in seen:
            raise KTaskError(f"two kernels are named {k.name!r}: kernel names must be unique")
        seen.add(k.name)
        kernels.append(k)

    ordered = _order(kernels)
    _check_written(buffers, kernels)
    _check_races(ordered)
    task = KTask(name, buffers, tuple(ordered), int(iterations))
    if device_memory is not None and task.nbytes > device_memory:
        raise KTaskError(
            f"the kTask's buffers need {mib(task.nbytes)} together but a device has "
            f"{mib(device_memory)}: they must all be resident while it runs"
        )
    return task


def _object(doc: Any, what: str, allowed: set[str], required: Sequence[str] = ()) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise KTaskError(f"{what} must be a JSON object, got {type(doc).__name__}")
    unknown = sorted(set(doc) - allowed)
    if unknown:
        hint = _suggest(unknown[0], allowed)
        raise KTaskError(
            f"{what} has unknown field {unknown[0]!r}{hint}; allowed: {', '.join(sorted(allowed))}"
        )
    for field in required:
        if field not in doc:
            raise KTaskError(f"{what} lacks the required field {field!r}")
    return doc


def _suggest(word: str, choices: Sequence[str] | set[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _buffer(name: Any, raw: Any) -> Buffer:
    if not isinstance(name, str) or not _NAME.match(name):
        raise KTaskError(f"buffer name {name!r} must match {_NAME.pattern}")
    what = f"buffer {name!r}"
    obj = _object(raw, what, _BUFFER, required=("kind", "dtype", "shape"))
    try:
        kind = Kind(obj["kind"])
    except ValueError:
        raise KTaskError(
            f"{what}: kind {obj['kind']!r} is not one of input, temporary, output"
        ) from None
    dtype = obj["dtype"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        hint = _suggest(str(dtype), set(DTYPES))
        raise KTaskError(f"{what}: unknown dtype {dtype!r}{hint}; known: {', '.join(DTYPES)}")
    shape = obj["shape"]
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise KTaskError(f"{what}: 'shape' must be a list of non-negative integers, got {shape!r}")
    spec = TensorSpec(tuple(shape), dtype)
    if "size" in obj and obj["size"] != spec.nbytes:
        raise KTaskError(
            f"{what}: size {obj['size']!r} bytes does not match its shape and dtype "
            f"({spec} is {spec.nbytes} bytes)"
        )
    key = obj.get("key")
    if kind is Kind.TEMPORARY:
        for field in ("key", "const", "version"):
            if field in obj:
                raise KTaskError(
                    f"{what}: a temporary has no {field!r} (it never leaves the device)"
                )
    elif not isinstance(key, str) or not key:
        raise KTaskError(f"{what}: an {kind} needs a data-layer 'key' (a non-empty string)")
    if kind is Kind.OUTPUT and ("const" in obj or "version" in obj):
        raise KTaskError(f"{what}: 'const' and 'version' apply to inputs only")
    if kind is Kind.INPUT and "init" in obj:
        raise KTaskError(f"{what}: 'init' applies to temporaries and outputs only")
    const = obj.get("const", False)
    if not isinstance(const, bool):
        raise KTaskError(f"{what}: 'const' must be true or false")
    version = obj.get("version")
    if version is not None and (not _is_int(version) or version < 1):
        raise KTaskError(f"{what}: 'version' must be a positive integer")
    init = obj.get("init")
    if init is not None and not isinstance(init, str):
        raise KTaskError(f"{what}: 'init' must name an input buffer")
    return Buffer(name, kind, spec, key, const, version, init)


def _check_init(b: Buffer, buffers: Mapping[str, Buffer]) -> None:
    if b.init is None:
        return
    src = buffers.get(b.init)
    if src is None or src.kind is not Kind.INPUT:
        raise KTaskError(
            f"buffer {b.name!r}: 'init' names {b.init!r}, which is not an input buffer"
        )
    if src.spec != b.spec:
        raise KTaskError(
            f"buffer {b.name!r} ({b.spec}) cannot start as input {src.name!r} ({src.spec})"
        )


def _rekey(buffers: Mapping[str, Buffer], name: Any, key: Any) -> Buffer:
    b = buffers.get(name) if isinstance(name, str) else None
    if b is None:
        raise KTaskError(f"the invocation sets the key of {name!r}, which is not a buffer")
    if b.kind is Kind.TEMPORARY:
        raise KTaskError(f"the invocation sets the key of temporary {name!r}, which has none")
    if not isinstance(key, str) or not key:
        raise KTaskError(f"the invocation's key for {name!r} must be a non-empty string")
    return Buffer(b.name, b.kind, b.spec, key, b.const, b.version, b.init)


def _check_keys(buffers: Mapping[str, Buffer]) -> None:
    outputs: dict[str, str] = {}
    for b in buffers.values():
        if b.kind is Kind.OUTPUT and b.key is not None:
            if b.key in outputs:
                raise KTaskError(
                    f"outputs {outputs[b.key]!r} and {b.name!r} both write key {b.key!r}"
                )
            outputs[b.key] = b.name
    for b in buffers.values():
        if b.kind is Kind.INPUT and b.const and b.key in outputs:
            raise KTaskError(
                f"constant input {b.name!r} reads key {b.key!r}, which output "
                f"{outputs[b.key]!r} overwrites: a constant must not change"
            )


def _kernel(i: int, raw: Any, buffers: Mapping[str, Buffer]) -> Kernel:
    where = f"kernel {i + 1}"
    obj = _object(raw, where, _KERNEL, required=("name", "kernel"))
    name = obj["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise KTaskError(f"{where}: name {name!r} must match {_NAME.pattern}")
    where = f"kernel {name!r}"
    library = obj.get("library", "builtin")
    function = obj["kernel"]
    if not isinstance(function, str) or not function:
        raise KTaskError(f"{where}: 'kernel' must name a function")
    args = obj.get("arguments", [])
    outs = obj.get("outputs", [])
    after = obj.get("after", [])
    for field, v in (("arguments", args), ("outputs", outs), ("after", after)):
        if not isinstance(v, list):
            raise KTaskError(f"{where}: {field!r} must be a list")
    arguments = tuple(_argument(where, a, buffers) for a in args)
    for o in outs:
        b = _named_buffer(where, o, buffers)
        if b.kind is Kind.INPUT:
            raise KTaskError(
                f"{where} writes input buffer {o!r}: inputs are read-only "
                "(write a temporary or an output; 'init' copies an input)"
            )
    if not all(isinstance(a, str) for a in after):
        raise KTaskError(f"{where}: 'after' must list kernel names")
    if library == "builtin":
        for field in ("source", "grid", "block", "shared_mem"):
            if field in obj:
                raise KTaskError(f"{where}: {field!r} applies to CUDA kernels only")
        kernel = Kernel(name, "builtin", function, arguments, tuple(outs), tuple(after))
        _check_builtin(kernel, buffers)
        return kernel
    if library == "cuda":
        return _cuda(where, obj, name, function, arguments, tuple(outs), tuple(after))
    raise KTaskError(f"{where}: library {library!r} is not 'builtin' or 'cuda'")


def _named_buffer(where: str, name: Any, buffers: Mapping[str, Buffer]) -> Buffer:
    if not isinstance(name, str):
        raise KTaskError(f"{where}: {name!r} is not a buffer name")
    b = buffers.get(name)
    if b is None:
        hint = _suggest(name, set(buffers))
        raise KTaskError(f"{where} uses buffer {name!r}, which the kTask does not declare{hint}")
    return b


def _argument(where: str, a: Any, buffers: Mapping[str, Buffer]) -> Arg:
    if isinstance(a, str):
        _named_buffer(where, a, buffers)
        return a
    if isinstance(a, bool | int | float):
        return Literal(a)
    if isinstance(a, dict) and set(a) <= {"literal", "dtype"} and "literal" in a:
        v, dtype = a["literal"], a.get("dtype")
        if not isinstance(v, bool | int | float):
            raise KTaskError(f"{where}: literal {v!r} must be a number or a boolean")
        if dtype is not None and (not isinstance(dtype, str) or dtype not in DTYPES):
            raise KTaskError(f"{where}: literal {v!r} has unknown dtype {dtype!r}")
        fits = {"bool": (bool,), "int": (int,), "float": (int, float), "complex": (int, float)}
        if dtype is not None and (
            not isinstance(v, fits[DTYPES[dtype][1]]) or (isinstance(v, bool) != (dtype == "bool"))
        ):
            raise KTaskError(f"{where}: literal {v!r} is not a {dtype} value")
        return Literal(v, dtype)
    raise KTaskError(
        f"{where}: argument {a!r} is neither a buffer name, a number, nor "
        '{"literal": value, "dtype": name}'
    )


def _check_builtin(k: Kernel, buffers: Mapping[str, Buffer]) -> None:
    where = f"kernel {k.name!r}"
    builtin = BUILTINS.get(k.function)
    if builtin is None:
        hint = _suggest(k.function, set(BUILTINS))
        raise KTaskError(
            f"{where}: unknown built-in kernel {k.function!r}{hint}; "
            f"built-ins: {', '.join(sorted(BUILTINS))}"
        )
    operands: list[Operand] = [buffers[a].spec if isinstance(a, str) else a for a in k.arguments]
    try:
        expected = builtin.rule(operands)
    except SignatureError as e:
        raise KTaskError(f"{where}: {k.function}{builtin.usage}: {e}") from None
    if len(k.outputs) != len(expected):
        raise KTaskError(
            f"{where}: {k.function} writes {len(expected)} output(s), the kernel lists "
            f"{len(k.outputs)}"
        )
    for out, spec in zip(k.outputs, expected, strict=True):
        got = buffers[out].spec
        if got != spec:
            what = "dtype" if got.shape == spec.shape else "shape"
            raise KTaskError(
                f"{where}: {k.function} produces {spec} but output buffer {out!r} is {got} "
                f"({what} mismatch)"
            )


def _dims(where: str, field: str, v: Any) -> tuple[int, int, int]:
    dims = [v] if _is_int(v) else v
    if not isinstance(dims, list) or not 1 <= len(dims) <= 3:
        raise KTaskError(f"{where}: {field!r} must be a positive integer or a list of 1 to 3")
    if not all(_is_int(d) and d >= 1 for d in dims):
        raise KTaskError(f"{where}: {field!r} dimensions must be positive integers, got {v!r}")
    full = [*dims, 1, 1][:3]
    return (full[0], full[1], full[2])


def _cuda(
    where: str,
    obj: dict[str, Any],
    name: str,
    function: str,
    arguments: tuple[Arg, ...],
    outputs: tuple[str, ...],
    after: tuple[str, ...],
) -> Kernel:
    source = obj.get("source")
    if not isinstance(source, str) or not source.strip():
        raise KTaskError(f"{where}: a CUDA kernel needs its 'source' (CUDA C++ text)")
    if not re.search(rf"\b{re.escape(function)}\s*\(", source):
        raise KTaskError(f"{where}: the source defines no function {function!r}")
    for field in ("grid", "block"):
        if field not in obj:
            raise KTaskError(f"{where}: a CUDA kernel needs its launch {field!r}")
    shared = obj.get("shared_mem", 0)
    if not _is_int(shared) or shared < 0:
        raise KTaskError(f"{where}: 'shared_mem' must be a non-negative integer of bytes")
    for a in arguments:
        if isinstance(a, Literal) and (a.category == "complex" or a.dtype not in _CUDA_SCALARS):
            raise KTaskError(
                f"{where}: CUDA kernels take literals as C int (JSON integers) or double "
                f"(JSON reals), got {a} typed {a.dtype}"
            )
    return Kernel(
        name,
        "cuda",
        function,
        arguments,
        outputs,
        after,
        source,
        _dims(where, "grid", obj["grid"]),
        _dims(where, "block", obj["block"]),
        shared,
    )


_CUDA_SCALARS = {None, "int32", "float64"}


# -- the graph --------------------------------------------------------------------------------


def _order(kernels: Sequence[Kernel]) -> list[Kernel]:
    """Kahn's topological order, ties in the request's order; a cycle is named in the error."""
    index = {k.name: i for i, k in enumerate(kernels)}
    for k in kernels:
        for dep in k.after:
            if dep not in index:
                hint = _suggest(dep, set(index))
                raise KTaskError(f"kernel {k.name!r} runs after {dep!r}, which is no kernel{hint}")
            if dep == k.name:
                raise KTaskError(f"kernel {k.name!r} runs after itself")
    waiting = {k.name: len(set(k.after)) for k in kernels}
    children: dict[str, list[str]] = {k.name: [] for k in kernels}
    for k in kernels:
        for dep in set(k.after):
            children[dep].append(k.name)
    ready = [index[k.name] for k in kernels if waiting[k.name] == 0]  # a heap of positions
    order: list[Kernel] = []
    while ready:
        k = kernels[heapq.heappop(ready)]
        order.append(k)
        for c in children[k.name]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, index[c])
    if len(order) < len(kernels):
        cycle = _find_cycle(kernels, {n for n, w in waiting.items() if w > 0})
        raise KTaskError(f"the kernels' dependencies form a cycle: {' -> '.join(cycle)}")
    return order


def _find_cycle(kernels: Sequence[Kernel], stuck: set[str]) -> list[str]:
    after = {k.name: [d for d in k.after if d in stuck] for k in kernels if k.name in stuck}
    path: list[str] = []
    n = min(stuck, key=[k.name for k in kernels].index)
    while n not in path:
        path.append(n)
        n = after[n][0]  # every stuck kernel waits on another stuck one
    return [*path[path.index(n) :], n][::-1]


def _check_written(buffers: Mapping[str, Buffer], kernels: Sequence[Kernel]) -> None:
    written = set().union(*(k.writes() for k in kernels))
    for b in buffers.values():
        if b.kind is Kind.OUTPUT and b.name not in written:
            raise KTaskError(f"output {b.name!r} is never written by any kernel")


def _check_races(order: Sequence[Kernel]) -> None:
    """Two kernels that share a buffer, one writing it, must be ordered by ``after``.

    Without that the result would depend on the executor's order, which the graph leaves open.
    Linear in the accesses: per buffer, each access must run after the last writer before it,
    and each writer after the readers since that writer; every other pair then follows.
    """
    pos = {k.name: i for i, k in enumerate(order)}
    after: list[int] = []  # bit i set: the kernel (transitively) runs after order[i]
    for k in order:
        bits = 0
        for d in k.after:
            bits |= after[pos[d]] | (1 << pos[d])
        after.append(bits)
    last_writer: dict[str, int] = {}
    readers: dict[str, list[int]] = {}  # since the last writer
    for j, k in enumerate(order):
        writes = k.writes()
        for buf in sorted(k.reads() | writes):
            w = last_writer.get(buf)
            if w is not None and not after[j] >> w & 1:
                _race(order[w], k, buf)
            if buf in writes:
                for r in readers.get(buf, ()):
                    if not after[j] >> r & 1:
                        _race(order[r], k, buf)
                last_writer[buf] = j
                readers[buf] = []
            else:
                readers.setdefault(buf, []).append(j)


def _race(a: Kernel, b: Kernel, buf: str) -> None:
    raise KTaskError(
        f"kernels {a.name!r} and {b.name!r} both use buffer {buf!r} and one writes it, but "
        f"neither runs after the other: add {a.name!r} to the 'after' of {b.name!r} "
        "(or the reverse)"
    )


# -- back to a document -----------------------------------------------------------------------


def to_doc(task: KTask) -> dict[str, Any]:
    """The task as a request document, keys resolved, kernels in execution order: what the
    pool sends a device worker, which parses it again (``parse(to_doc(t)) == t``)."""
    buffers: dict[str, Any] = {}
    for b in task.buffers.values():
        d: dict[str, Any] = {
            "kind": str(b.kind),
            "dtype": b.spec.dtype,
            "shape": list(b.spec.shape),
        }
        if b.key is not None:
            d["key"] = b.key
        if b.const:
            d["const"] = True
        if b.version is not None:
            d["version"] = b.version
        if b.init is not None:
            d["init"] = b.init
        buffers[b.name] = d
    kernels: list[dict[str, Any]] = []
    for k in task.kernels:
        args = [
            a if isinstance(a, str)
            else a.value if a.dtype is None
            else {"literal": a.value, "dtype": a.dtype}
            for a in k.arguments
        ]  # fmt: skip
        d = {"name": k.name, "library": k.library, "kernel": k.function, "arguments": args}
        d["outputs"] = list(k.outputs)
        if k.after:
            d["after"] = list(k.after)
        if k.library == "cuda":
            assert k.grid is not None and k.block is not None
            d.update(source=k.source, grid=list(k.grid), block=list(k.block))
            d["shared_mem"] = k.shared_mem
        kernels.append(d)
    return {
        "name": task.name,
        "iterations": task.iterations,
        "buffers": buffers,
        "kernels": kernels,
    }
