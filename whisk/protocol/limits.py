"""Per-namespace limits carried in the message's ``user.limits`` (spec sections 2.3, 4.5)."""

from __future__ import annotations

import re
from typing import Any

from whisk.protocol.actions import Action

SYSTEM_PAYLOAD_MAX = 1024 * 1024
# At most 30 digits: int() of a longer string is slow, and beyond 4300 digits it raises.
_SIZE_RE = re.compile(r"\s?(\d{1,30})\s?(GB|MB|KB|B|G|M|K)\s?", re.IGNORECASE)
_SIZE_MAX_CHARS = 35  # the longest string _SIZE_RE matches: never run it on more
_FACTORS = {"b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3}


def parse_byte_size(value: Any) -> int | None:
    """OpenWhisk ByteSize strings (``"1 MB"``, ``"2147483648 B"``) or plain byte counts;
    None for anything else (negative counts included)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    if isinstance(value, str) and len(value) <= _SIZE_MAX_CHARS:
        m = _SIZE_RE.fullmatch(value)
        if m:
            return int(m.group(1)) * _FACTORS[m.group(2).lower()]
    return None


def payload_limit(user_limits: dict[str, Any]) -> int:
    """Largest result read from a container: the user's ``maxPayloadSize`` capped by the
    system's 1 MiB."""
    user = parse_byte_size(user_limits.get("maxPayloadSize"))
    return min(user, SYSTEM_PAYLOAD_MAX) if user else SYSTEM_PAYLOAD_MAX


_CHECKS = (
    ("memory", "memory_mb", "ActionMemory", "MB"),
    ("timeout", "timeout_ms", "ActionTimeout", "ms"),
    ("logs", "logs_mb", "ActionLogs", "MB"),
    ("concurrency", "concurrency", "ActionConcurrency", ""),
)


def check_user_limits(
    action: Action, user_limits: dict[str, Any], node_memory_mb: int
) -> str | None:
    """The reason the action may not run for this user on this node, or None."""
    for label, attr, suffix, unit in _CHECKS:
        value = getattr(action.limits, attr)
        low, high = user_limits.get(f"min{suffix}"), user_limits.get(f"max{suffix}")
        if isinstance(low, int | float) and value < low:
            return (
                f"The {label} limit of {value}{unit} is below the namespace minimum of {low}{unit}."
            )
        if isinstance(high, int | float) and value > high:
            return (
                f"The {label} limit of {value}{unit} exceeds the namespace maximum of {high}{unit}."
            )
    if action.limits.memory_mb > node_memory_mb:
        return (
            f"The memory limit of {action.limits.memory_mb}MB exceeds the invoker's "
            f"{node_memory_mb}MB for actions."
        )
    return None
