"""JSON encoding shared by every wire format: UTF-8, compact, non-ASCII preserved, strict."""

from __future__ import annotations

from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse strict JSON (no NaN/Infinity; integers beyond 64 bits and nesting deeper than
    1024 levels are rejected with ``JSONDecodeError``)."""
    return orjson.loads(data)


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def dumps_str(value: Any) -> str:
    return orjson.dumps(value).decode()
