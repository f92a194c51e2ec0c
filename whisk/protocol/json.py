"""JSON encoding shared by every wire format: UTF-8, compact, non-ASCII preserved, strict."""

from __future__ import annotations

import json
from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError
MAX_DEPTH = 1024  # orjson's parser refuses deeper documents


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse strict JSON (no NaN/Infinity; numbers beyond a double's range and nesting deeper
    than :data:`MAX_DEPTH` levels are rejected with ``JSONDecodeError``; integers beyond 64
    bits become floats)."""
    return orjson.loads(data)


def dumps(value: Any) -> bytes:
    """Encode compactly. orjson stops at 254 levels of nesting while its parser accepts
    1024, and refuses integers beyond 64 bits and keys that are not strings, which the
    stdlib writes; the stdlib's encoder recurses (``RecursionError`` near 1000 levels). So
    what orjson refuses is written by an encoder without recursion that writes what the
    stdlib does: anything we parsed can be written back. Raises ``TypeError`` for what no
    JSON encoder writes."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return _dumps_flat(value)


def dumps_str(value: Any) -> str:
    return dumps(value).decode()


_SCALARS = (str, int, float, bool, type(None))


def _key(key: Any) -> bytes:
    if isinstance(key, str):
        return orjson.dumps(key)
    if isinstance(key, bool) or key is None:
        return orjson.dumps(orjson.dumps(key).decode())
    if isinstance(key, int | float):
        return orjson.dumps(json.dumps(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _scalar(value: Any) -> bytes:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()  # beyond 64 bits too
    return orjson.dumps(value)


def _dumps_flat(value: Any) -> bytes:
    """Plain dicts, lists, tuples and scalars, nested to any depth, with an explicit stack."""
    out: list[bytes] = []
    # Each entry: an iterator over a container's remaining items and its closing bracket.
    stack: list[tuple[Any, bytes, bool]] = []
    item: Any = value
    while True:
        if isinstance(item, dict):
            out.append(b"{")
            stack.append((iter(item.items()), b"}", True))
        elif isinstance(item, list | tuple):
            out.append(b"[")
            stack.append((iter(item), b"]", False))
        elif isinstance(item, _SCALARS):
            out.append(_scalar(item))
        else:
            raise TypeError(f"{type(item).__name__} is not JSON serializable")
        while stack:
            items, close, is_dict = stack[-1]
            nxt: Any = next(items, _END)
            if nxt is _END:
                out.append(close)
                stack.pop()
                continue
            if out[-1] not in (b"{", b"["):
                out.append(b",")
            if is_dict:
                out.append(_key(nxt[0]))
                out.append(b":")
                item = nxt[1]
            else:
                item = nxt
            break
        else:
            return b"".join(out)


_END = object()
