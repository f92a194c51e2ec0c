"""JSON encoding shared by every wire format: UTF-8, compact, non-ASCII preserved, strict."""

from __future__ import annotations

import json
from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse strict JSON (no NaN/Infinity; integers beyond 64 bits and nesting deeper than
    1024 levels are rejected with ``JSONDecodeError``)."""
    return orjson.loads(data)


def dumps(value: Any) -> bytes:
    """Encode compactly. orjson stops at 254 levels of nesting while its parser accepts
    1024, so anything we parsed can be written back: deeper values use the stdlib."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def dumps_str(value: Any) -> str:
    return dumps(value).decode()
