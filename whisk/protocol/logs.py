"""Activation logs (spec section 3.6): sentinel-delimited, formatted, size-limited."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field

SENTINEL = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX"
TRUNCATED = "Logs were truncated because the total bytes size exceeds the limit of {} bytes."
DEVELOPER_ERROR_NOTE = (
    "The action did not initialize or run as expected. Log data might be missing."
)
COLLECTION_FAILED = "There was an issue while collecting your logs. Data might be missing."


def format_line(time: str, stream: str, text: str) -> str:
    return f"{time:<30} {stream}: {text.strip()}"


@dataclass(slots=True)
class LogCollector:
    """Accumulates one activation's log lines until both streams have printed the sentinel.

    Size is counted like the reference: bytes of the raw JSON log lines, newline included.
    """

    limit_bytes: int
    lines: list[str] = field(default_factory=list)
    size: int = 0
    sentinels: int = 0
    truncated: bool = False

    @property
    def complete(self) -> bool:
        return self.sentinels >= 2

    def add(self, time: str, stream: str, text: str, raw_size: int | None = None) -> None:
        if text.rstrip("\n") == SENTINEL:
            self.sentinels += 1
            return
        if self.truncated:
            return
        size = raw_size if raw_size is not None else len(text.encode()) + len(time) + 30
        if self.size + size > self.limit_bytes:
            self.truncated = True
            return
        self.size += size
        self.lines.append(format_line(time, stream, text))

    def finish(
        self, now_iso: str, developer_error: bool = False, failed: bool = False
    ) -> list[str]:
        out = list(self.lines)
        if self.truncated:
            out.append(format_line(now_iso, "stderr", TRUNCATED.format(self.limit_bytes)))
        if developer_error:
            out.append(format_line(now_iso, "stderr", DEVELOPER_ERROR_NOTE))
        if failed:
            out.append(format_line(now_iso, "stderr", COLLECTION_FAILED))
        return out


def iso_time(epoch_ns: int) -> str:
    """``2024-05-29T16:26:40.590123456Z`` (nanoseconds, UTC), as Docker timestamps lines."""
    secs, ns = divmod(epoch_ns, 1_000_000_000)
    base = _dt.datetime.fromtimestamp(secs, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{ns:09d}Z"
