"""Reading what can still be read from a message the strict parser refused.

A message that is not valid JSON (invalid UTF-8, nesting beyond the parser's limit, a number
beyond a double's range, a broken tail) may still carry a readable activation id and
controller: with those the invoker answers it instead of leaving the controller to time it
out. This reader never raises, never recurses and keeps only the first few levels.
"""

from __future__ import annotations

import json
import re
from typing import Any

from whisk.protocol.errors import EMPTY, NOT_JSON, NOT_UTF8, NUMBER, TOO_DEEP

# Strings (escapes kept), brackets, and bare literals and numbers; whitespace is skipped.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|(?:[{\[]\s*)+|(?:[}\]]\s*)+|[:,]|[^\s{}\[\]:,"]+', re.S)
_INT = re.compile(rb"-?[0-9]{1,18}")
_LITERALS: dict[bytes, Any] = {b"true": True, b"false": False, b"null": None}


def classify(raw: bytes | bytearray | memoryview | str, error: Exception) -> str:
    """The kind of a parse failure (see :mod:`whisk.protocol.errors`)."""
    if len(raw) == 0:
        return EMPTY
    if not isinstance(raw, str):
        try:
            bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return NOT_UTF8
    text = str(error)
    if "depth" in text or "recursion" in text.lower():
        return TOO_DEEP
    if "surrogate" in text or "UTF-8" in text:
        return NOT_UTF8
    if "number" in text:
        return NUMBER
    return NOT_JSON


def _string(token: bytes) -> str | None:
    """A string token's text (the token starts with a quote); None if it is broken or holds
    a lone surrogate (``\\ud800``), which no answer could carry."""
    try:
        value: str = json.loads(token.decode("utf-8", "replace"))
        value.encode("utf-8")
    except ValueError:  # UnicodeEncodeError is a ValueError
        return None
    return value


def _scalar(token: bytes) -> Any:
    if token.startswith(b'"'):
        return _string(token)
    if token in _LITERALS:
        return _LITERALS[token]
    if _INT.fullmatch(token):
        return int(token)
    return None  # long integers, floats, garbage: nothing an answer needs


# The top-level fields an answer needs; the rest (the content above all) is skipped.
ANSWER_FIELDS = frozenset(
    ("transid", "action", "user", "activationId", "rootControllerIndex", "blocking", "cause")
)


def shallow_object(
    raw: bytes | bytearray | memoryview | str,
    keep: int = 4,
    fields: frozenset[str] = ANSWER_FIELDS,
) -> dict[str, Any]:
    """The top-level ``fields`` of the message's object, ``keep`` levels deep, read
    leniently: deeper containers, odd numbers and undecodable strings become None. ``{}``
    when there is no top-level object."""
    try:
        data = raw.encode("utf-8", "replace") if isinstance(raw, str) else bytes(raw)
        return _shallow(data, keep, fields)
    except Exception:  # best effort only: never let salvage fail the caller
        return {}


def _shallow(data: bytes, keep: int, fields: frozenset[str]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    # The kept containers, each with its pending key; below the last, ``skipped`` levels
    # of containers nobody reads (runs of brackets are taken at once: deep is cheap).
    stack: list[list[Any]] = []
    skipped = 0
    for m in _TOKEN.finditer(data):
        token = m.group()
        first = token[:1]
        if first in b"{[":
            openers = token.translate(None, b" \t\r\n")
            if not stack:
                if openers[:1] != b"{":
                    return root  # no top-level object (once it has ended, it is returned)
                stack.append([root, None])
                openers = openers[1:]
            for i, opener in enumerate(openers):
                child: Any = None
                if not skipped and len(stack) < keep:
                    child = {} if opener == 123 else []  # "{"
                if skipped or _put(stack[-1], child) is None:
                    skipped += len(openers) - i
                    break
                stack.append([child, None])
        elif first in b"}]":
            closers = len(token.translate(None, b" \t\r\n"))
            taken = min(closers, skipped)
            skipped -= taken
            for _ in range(closers - taken):
                stack.pop()
                if not stack:
                    return root
        elif not stack:
            return root
        elif skipped or token in (b":", b","):
            continue  # punctuation, or inside a skipped container
        else:
            frame = stack[-1]
            if isinstance(frame[0], dict) and frame[1] is None:
                key = _string(token) if first == b'"' else None
                # A broken or unwanted key becomes "": its value is skipped.
                frame[1] = key if key and (len(stack) > 1 or key in fields) else ""
            else:
                _put(frame, _scalar(token))  # an unwanted key's ("") is dropped
    return root


def _put(frame: list[Any], value: Any) -> Any:
    """Add ``value`` to the frame's container; returns it, or None when it is skipped."""
    container = frame[0]
    if isinstance(container, list):
        container.append(value)
        return value
    if isinstance(container, dict):
        key = frame[1]
        frame[1] = None
        if key:
            container.setdefault(key, value)
            return value
    return None
