"""The ``kaas`` action kind: an action whose code is a kTask graph, run on the node's GPU pool.

``wsk action create knn --kind kaas knn.json`` stores the graph as the action's code; the
front checks it with :func:`validate` and refuses a bad one at once. Each invocation's
parameters bind the graph to data (:func:`invocation`, pure, no torch):

``keys``      ``{buffer: key}``: data-layer keys of inputs and outputs, overriding the graph's
``inputs``    ``{buffer: value}``: small input values inline (JSON, :mod:`gpu.kaas.values`);
              each goes into the data layer under a key private to this invocation
``fetch``     ``[output, ...]`` or ``true``: outputs whose values the reply carries inline
``wait_s``    seconds the kTask may wait for inputs not in the data layer yet (default 0:
              a missing key is an error at once)
``<name>``    the value of a literal the graph leaves open as ``{"param": "<name>"}``
              (``iterations``, or a kernel argument; optional ``default`` and ``dtype``)

Names starting with ``__ow_`` (web actions) are ignored; any other unknown name is refused, so
that a misspelt ``keys`` cannot silently run on the graph's default data.

Tenancy: actions are other people's code, so every key a kTask reads or writes (the graph's,
``keys``', the private inline ones) is stored under its caller's namespace,
``f"{namespace}/{key}"`` (:func:`key_prefix`). A namespace holds no ``/``, so no key of one tenant
can name another's; a key that starts with ``/`` or holds a ``..`` segment is refused, since it
reads as an attempt to leave the tenant's part. Replies and errors name keys as written.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpu.kaas.format import MAX_ITERATIONS, Kind, KTask, parse
from gpu.kaas.spec import DTYPES, KTaskError, TensorSpec, mib
from gpu.kaas.values import MAX_INLINE_BYTES, from_json

KIND = "kaas"
SEPARATOR = "/"  # namespace SEPARATOR key; OpenWhisk namespace names never hold it
RESERVED = ("keys", "inputs", "fetch", "wait_s")
_PLACEHOLDER = {"param", "default", "dtype"}


@dataclass(frozen=True)
class Invocation:
    task: KTask  # its keys are the stored ones: under ``scope``
    inline: tuple[tuple[str, TensorSpec, bytes], ...]  # (private key, spec, bytes) to put first
    fetch: tuple[str, ...]  # output buffers whose values the reply carries
    wait_s: float
    scope: str = ""  # the caller's prefix of stored keys, ``namespace/``

    def shown(self, key: str) -> str:
        """A stored key as the caller wrote it (the caller never sees its namespace's prefix)."""
        return key.removeprefix(self.scope)

    def message(self, text: str) -> str:
        """An error's text with each of the task's stored keys as the caller wrote it."""
        for b in self.task.buffers.values():
            if b.key is not None:
                text = text.replace(repr(b.key), repr(self.shown(b.key)))
        return text

    def reply(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The run's reply with its outputs' keys as the caller wrote them."""
        outputs = {
            name: {**o, "key": self.shown(str(o["key"]))}
            for name, o in reply.get("outputs", {}).items()
        }
        return {**reply, "outputs": outputs}


def key_prefix(namespace: str) -> str:
    """The prefix of a namespace's keys in the data layer: its root namespace and ``/`` (a
    package path ``ns/pkg`` counts as ``ns``: the tenant is the namespace)."""
    root = namespace.split(SEPARATOR, 1)[0]
    if not root:
        raise ValueError("a kTask runs for a namespace, and none was given")
    return root + SEPARATOR


def check_key(buffer: str, key: str) -> None:
    """Refuse a key that tries to leave the caller's part of the data layer (it could not:
    the prefix is a plain string; but a path-like escape is a mistake worth naming)."""
    if key.startswith(SEPARATOR) or ".." in key.split(SEPARATOR):
        raise KTaskError(
            f"buffer {buffer!r}: key {key!r} starts with '/' or holds a '..' segment; keys are "
            "relative to your namespace's part of the data layer, which they cannot leave"
        )


def load(code: str | Mapping[str, Any]) -> dict[str, Any]:
    """The action's code as a decoded kTask document (a JSON object)."""
    if isinstance(code, Mapping):
        return dict(code)
    if not isinstance(code, str):
        raise KTaskError(f"a kTask must be a JSON object or its text, not {type(code).__name__}")
    try:
        doc = json.loads(code)
    except (ValueError, RecursionError) as e:
        raise KTaskError(f"a kaas action's code must be a kTask JSON document: {e}") from None
    if not isinstance(doc, dict):
        raise KTaskError(f"a kaas action's code must be a JSON object, got {type(doc).__name__}")
    return doc


def placeholders(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The graph's open literals by parameter name (each site's spec; the first one wins)."""
    found: dict[str, dict[str, Any]] = {}
    for site, _ in _sites(doc):
        found.setdefault(site["param"], site)
    return found


def _is_placeholder(v: Any) -> bool:
    return isinstance(v, dict) and "param" in v and set(v) <= _PLACEHOLDER


def _sites(doc: dict[str, Any]) -> list[tuple[dict[str, Any], Callable[[Any], None]]]:
    """Every placeholder with a setter that replaces it in ``doc``."""
    out: list[tuple[dict[str, Any], Callable[[Any], None]]] = []
    if _is_placeholder(doc.get("iterations")):
        out.append((doc["iterations"], lambda v: doc.__setitem__("iterations", v)))
    kernels = doc.get("kernels")
    for k in kernels if isinstance(kernels, list) else ():
        args = k.get("arguments") if isinstance(k, dict) else None
        if not isinstance(args, list):
            continue
        for i, a in enumerate(args):
            if _is_placeholder(a):
                out.append((a, functools.partial(args.__setitem__, i)))
    for site, _ in out:
        name = site["param"]
        if not isinstance(name, str) or not name or name in RESERVED or name.startswith("__ow_"):
            raise KTaskError(
                f"placeholder {site!r}: 'param' must name an invocation parameter other than "
                f"{', '.join(RESERVED)} and __ow_*"
            )
        dtype = site.get("dtype")
        if dtype is not None and dtype not in DTYPES:
            raise KTaskError(f"placeholder for parameter {name!r} has unknown dtype {dtype!r}")
    return out


def bind(
    doc: Mapping[str, Any], params: Mapping[str, Any], *, check: bool = False
) -> dict[str, Any]:
    """A copy of ``doc`` with each placeholder replaced by its parameter's value (or default).
    ``check``: a parameter neither given nor defaulted gets a stand-in (create time)."""
    out = copy.deepcopy(dict(doc))
    for site, put in _sites(out):
        name, dtype = site["param"], site.get("dtype")
        iterations = site is out.get("iterations")
        if name in params:
            v = params[name]
        elif "default" in site:
            v = site["default"]
        elif check:
            v = 1 if iterations else (False if dtype == "bool" else 0)
        else:
            raise KTaskError(f"the kTask needs the invocation parameter {name!r} (no default)")
        if iterations:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_ITERATIONS:
                raise KTaskError(
                    f"parameter {name!r} sets 'iterations': an integer from 1 to "
                    f"{MAX_ITERATIONS}, not {v!r}"
                )
            put(v)
        elif not isinstance(v, bool | int | float) or (
            isinstance(v, float) and not math.isfinite(v)
        ):
            raise KTaskError(f"parameter {name!r} is a literal: a number or a boolean, not {v!r}")
        else:
            put({"literal": v, "dtype": dtype} if dtype is not None else v)
    return out


def validate(code: str, device_memory: int | None = None) -> KTask:
    """Create time: the code parses as a kTask with every open literal at its default or a
    stand-in. Raises :class:`KTaskError` with the developer's message."""
    return parse(bind(load(code), {}, check=True), device_memory=device_memory)


def invocation(
    code: str | Mapping[str, Any],
    params: Mapping[str, Any],
    *,
    namespace: str,
    private: Callable[[str], str],
    device_memory: int | None = None,
    max_wait_s: float = 60.0,
) -> Invocation:
    """The kTask an invocation runs for ``namespace`` (the caller's, trusted: every key is
    stored under it). ``private(key)``: the key an inline input goes under, so that
    concurrent invocations never read each other's inputs."""
    prefix = key_prefix(namespace)
    doc = load(code)
    if not isinstance(params, Mapping):
        raise KTaskError("a kaas action's parameters must be a JSON object")
    open_names = set(placeholders(doc))
    for name in params:
        if name in RESERVED or name in open_names or str(name).startswith("__ow_"):
            continue
        hint = difflib.get_close_matches(str(name), [*RESERVED, *open_names], n=1)
        more = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise KTaskError(
            f"unknown parameter {name!r}{more}: a kaas action takes {', '.join(RESERVED)} "
            f"and the graph's open literals ({', '.join(sorted(open_names)) or 'none'})"
        )
    keys = _mapping(params.get("keys", {}), "keys")
    inputs = _mapping(params.get("inputs", {}), "inputs")
    bad = [k for k, v in keys.items() if not isinstance(v, str)]
    if bad:
        raise KTaskError(f"keys: the key of buffer {bad[0]!r} must be a string")
    task = parse(bind(doc, params), keys=keys, device_memory=device_memory)
    for buffer in task.buffers.values():
        if buffer.key is not None:
            check_key(buffer.name, buffer.key)
    inline: list[tuple[str, TensorSpec, bytes]] = []
    rekey: dict[str, str] = {}
    for name, value in inputs.items():
        b = task.buffers.get(name)
        if b is None or b.kind is not Kind.INPUT:
            raise KTaskError(f"inputs: {name!r} is not an input buffer of the kTask")
        if b.version is not None:
            raise KTaskError(
                f"inputs: {name!r} names version {b.version} of its key; an inline value "
                "is a fresh object, so give one or the other"
            )
        assert b.key is not None
        rekey[name] = prefix + private(b.key)
        inline.append((rekey[name], b.spec, from_json(value, b.spec, f"inputs.{name}")))
    if sum(len(data) for _, _, data in inline) > MAX_INLINE_BYTES:
        raise KTaskError(f"inputs: at most {mib(MAX_INLINE_BYTES)} inline in all")
    stored = {b.name: prefix + b.key for b in task.buffers.values() if b.key is not None}
    task = parse(bind(doc, params), keys={**stored, **rekey}, device_memory=device_memory)
    fetch = _fetch(params.get("fetch", ()), task)
    wait_s = params.get("wait_s", 0)
    if (
        isinstance(wait_s, bool)
        or not isinstance(wait_s, int | float)
        or not 0 <= wait_s <= max_wait_s
    ):
        raise KTaskError(f"wait_s must be a number of seconds from 0 to {max_wait_s:g}")
    return Invocation(task, tuple(inline), fetch, float(wait_s), prefix)


def _mapping(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise KTaskError(f"{what} must be an object keyed by buffer name, not {v!r}")
    return v


def _fetch(v: Any, task: KTask) -> tuple[str, ...]:
    outputs = [b.name for b in task.of_kind(Kind.OUTPUT)]
    if v is True:
        names = outputs
    elif v is False or v == ():
        names = []
    elif isinstance(v, list) and all(isinstance(n, str) for n in v):
        names = list(dict.fromkeys(v))
    else:
        raise KTaskError("fetch must be true or a list of output buffer names")
    for n in names:
        if n not in outputs:
            raise KTaskError(f"fetch: {n!r} is not an output of the kTask (outputs: {outputs})")
    size = sum(task.buffers[n].nbytes for n in names)
    if size > MAX_INLINE_BYTES:
        raise KTaskError(
            f"fetch: the outputs asked for are {mib(size)}; a reply carries at most "
            f"{mib(MAX_INLINE_BYTES)}: the node's operator can read them from the data layer "
            "by key instead"
        )
    return tuple(names)
