"""Reading one activation's log lines of a Docker-backend container (spec 3.6).

Two sources, both cut at the sentinels by :class:`containers.logfile.LogParser`, so the
sentinels, the byte limit and ``raw_size`` behave exactly as in the process backend, and
times are normalised to ``2024-05-29T16:26:40.590123456Z`` (nanoseconds, UTC):

- **the log file**, tailed from a remembered offset as the reference invoker does, when the
  engine runs on this host and the invoker may read it: Docker's json-file as is
  (:class:`containers.logfile.LogFile`), Podman's ``k8s-file`` (``<time> <stream> <F|P>
  <text>``, what Podman writes for "json-file") converted line by line (``LogFile`` with
  :func:`k8s_to_json`).
  Preferred: both engines' logs endpoints scan the whole log on every request (measured on
  Podman 4.3: +3 ms per 1000 lines of history), the file costs only the new bytes.
- **the engine's logs endpoint** (:class:`EngineLog`), for remote engines. The cursor is a
  timestamp per stream: ``GET /containers/{id}/logs?timestamps=1&since=<t>`` returns every
  entry at or after ``t`` (inclusive in Docker and Podman), so for each stream the cursor is
  the timestamp of its last consumed entry plus how many of its entries with exactly that
  timestamp were consumed already; those are skipped on the next read, which starts at the
  older of the two. Podman's compat API prints timestamps to the second
  only (``2026-11-29T16:09:25Z``; the times then read ``...25.000000000Z``), so there the
  skip count covers a whole second; the cursor stays exact because a log is append-only.
  While the sentinels are awaited the endpoint is followed (``follow=1``), so lines arrive
  when the engine writes them instead of by polling.

Each entry is re-rendered as the json-file line the process backend's zygote would have
written (``{"log":...,"stream":...,"time":...}``) before parsing.
"""

from __future__ import annotations

import asyncio
import calendar
import json
import re
import struct
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from time import gmtime

from containers.backend import LogLine
from containers.logfile import (
    IDLE_TIMEOUT_S,
    LogFile,
    LogParser,
    LogWatcher,
    overall_timeout_s,
)
from whisk.protocol.logs import SENTINEL

_HEADER = struct.Struct(">BxxxI")
_STREAMS = {1: "stdout", 2: "stderr"}
_SENTINEL_LINE = SENTINEL + "\n"
_SENTINEL_BYTES = SENTINEL.encode()
_SENTINEL_ENTRY = b'{"log":"' + _SENTINEL_BYTES + b'\\n"'
_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d)$")


class FrameDecoder:
    """Splits Docker's multiplexed stream (8-byte header: stream, 3 zero bytes, big-endian
    length; then the payload) into ``(stream, payload)``; frames may span chunks."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> Iterator[tuple[str, bytes]]:
        buf = self._buf + data if self._buf else data
        pos = 0
        while len(buf) - pos >= _HEADER.size:
            kind, size = _HEADER.unpack_from(buf, pos)
            end = pos + _HEADER.size + size
            if end > len(buf):
                break
            # stdin (0) never appears in logs; anything else is treated as stdout
            yield _STREAMS.get(kind, "stdout"), buf[pos + _HEADER.size : end]
            pos = end
        self._buf = buf[pos:]


def split_entry(payload: bytes) -> tuple[str, str]:
    """``b"<timestamp> <text>"`` → (timestamp, text); text keeps its newline."""
    ts, _, text = payload.partition(b" ")
    return ts.decode("ascii", "replace"), text.decode("utf-8", "replace")


def epoch_ns(ts: str) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 timestamp; None if it is not one."""
    m = _TIME.match(ts)
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, zone = m.groups()
    secs = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(s), 0, 0, 0))
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        secs -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return secs * 1_000_000_000 + int((frac or "").ljust(9, "0"))


def iso_ns(ns: int) -> str:
    """``2024-05-29T16:26:40.590123456Z``, the process backend's time format."""
    secs, frac = divmod(ns, 1_000_000_000)
    y, mo, d, h, mi, s = gmtime(secs)[:6]
    return f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{frac:09d}Z"


def since_param(ns: int) -> str:
    """The ``since`` query value for a timestamp, ``<seconds>.<nanoseconds>``."""
    secs, frac = divmod(ns, 1_000_000_000)
    return f"{secs}.{frac:09d}"


def json_lines(time: str, stream: str, text: str) -> Iterator[bytes]:
    """The json-file line(s) for one entry; a sentinel glued to an unterminated line (the
    action printed without a newline) is split off, as the process backend's zygote does."""
    if len(text) > len(_SENTINEL_LINE) and text.endswith(_SENTINEL_LINE):
        yield from json_lines(time, stream, text[: -len(_SENTINEL_LINE)])
        text = _SENTINEL_LINE
    yield (
        '{"log":' + encode_basestring(text) + ',"stream":"' + stream + '","time":"' + time + '"}\n'
    ).encode()


@dataclass(slots=True)
class Cursor:
    """Where the next read starts, per stream: the latest stamp consumed and how many of the
    stream's entries carry exactly that stamp (``marks``). Each stream is stamped in order by
    its own reader, but the two interleave in the log out of stamp order: a stderr sentinel
    stamped before the end of a stdout burst can be logged after it, and the next call's
    stderr lines can be stamped before a stdout line of that call already read. So an entry
    is consumed only if its own stream's mark covers it, and ``since`` is the older mark (an
    engine whose ``since`` is coarser than its stamps serves older entries again too)."""

    marks: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def since_ns(self) -> int | None:
        """Both streams' entries from here on may be unread; None: read the whole log."""
        if len(self.marks) < len(_STREAMS):
            return None  # a stream never read yet: all of it is unread
        return min(ns for ns, _ in self.marks.values())

    def advance(self, ns: int, stream: str) -> None:
        last, count = self.marks.get(stream, (-1, 0))
        if ns >= last:  # (a stream's clock stepping back leaves its mark where it was)
            self.marks[stream] = (ns, count + 1 if ns == last else 1)


# (since, follow) -> an async context manager yielding the response body's chunks
OpenLogs = Callable[[str | None, bool], AbstractAsyncContextManager[AsyncIterator[bytes]]]


class EngineLog:
    """One container's log as served by the engine's endpoint, read activation by activation."""

    def __init__(self, open_logs: OpenLogs) -> None:
        self._open = open_logs
        self.cursor = Cursor()
        self._carry = b""  # lines already fetched that belong to the next activation
        self._times: tuple[str, int, str] = ("", 0, "")  # last (stamp, ns, normalised)

    def close(self) -> None:
        pass  # nothing held between reads

    def _time(self, stamp: str) -> tuple[int, str]:
        if stamp == self._times[0]:
            return self._times[1], self._times[2]
        ns = epoch_ns(stamp)
        if ns is None:  # not a timestamp: as the entry before it
            ns = self._times[1]
        self._times = (stamp, ns, iso_ns(ns))
        return ns, self._times[2]

    async def read(
        self,
        limit_bytes: int,
        wait_for_sentinels: bool,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        overall_timeout: float | None = None,
    ) -> tuple[list[LogLine], bool]:
        """Lines since the last call, up to (excluding) the two sentinels; ``(lines, False)``
        if they did not arrive in time (or the container stopped first). Without
        ``wait_for_sentinels``, what the engine has now, as complete."""
        parser = LogParser(limit_bytes)
        carried, self._carry = self._carry, b""
        rest = carried[parser.feed(carried) :]
        try:
            if parser.complete:
                return parser.lines, True
            return await self._read_engine(
                parser, wait_for_sentinels, idle_timeout_s, overall_timeout
            )
        finally:
            self._carry = parser.carry(rest)

    async def _read_engine(
        self,
        parser: LogParser,
        wait_for_sentinels: bool,
        idle_timeout_s: float,
        overall_timeout: float | None,
    ) -> tuple[list[LogLine], bool]:
        loop = asyncio.get_running_loop()
        limit_bytes = parser.limit_bytes
        overall = overall_timeout if overall_timeout is not None else overall_timeout_s(limit_bytes)
        deadline = loop.time() + overall
        last_progress = loop.time()
        cursor = self.cursor
        since_ns = cursor.since_ns
        since = since_param(since_ns) if since_ns is not None else None
        marks = dict(cursor.marks)
        served_again = Counter({stream: count for stream, (_, count) in marks.items()})
        decoder = FrameDecoder()
        async with self._open(since, wait_for_sentinels) as chunks:
            it = chunks.__aiter__()
            while True:
                wait = min(last_progress + idle_timeout_s, deadline) - loop.time()
                if wait <= 0:
                    return parser.lines, False
                try:
                    async with asyncio.timeout(wait):
                        chunk = await anext(it)
                except (StopAsyncIteration, TimeoutError):
                    return parser.lines, not wait_for_sentinels
                for stream, payload in decoder.feed(chunk):
                    stamp, text = split_entry(payload)
                    ns, time = self._time(stamp)
                    mark = marks.get(stream)
                    if mark is not None and ns <= mark[0]:
                        if ns < mark[0]:
                            continue  # consumed before
                        if served_again[stream]:
                            served_again[stream] -= 1
                            continue  # consumed at the stream's latest stamp
                    for raw in json_lines(time, stream, text):
                        parser.feed(raw)
                    cursor.advance(ns, stream)
                    last_progress = loop.time()
                    if parser.complete:
                        return parser.lines, True


class JsonLogFile(LogFile):
    """Docker's json-file log: read as the process backend's, times normalised (Docker
    trims trailing zeros: ``...40.59012345Z``), a sentinel glued to an unterminated line
    split off (:func:`split_glued_sentinel`)."""

    def __init__(self, path: str, watcher: LogWatcher | None = None) -> None:
        super().__init__(path, watcher, convert=split_glued_sentinel)

    async def read(
        self,
        limit_bytes: int,
        wait_for_sentinels: bool,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        overall_timeout: float | None = None,
    ) -> tuple[list[LogLine], bool]:
        lines, complete = await super().read(
            limit_bytes, wait_for_sentinels, idle_timeout_s, overall_timeout
        )
        return [normalised(line) for line in lines], complete


def split_glued_sentinel(raw: bytes) -> bytes:
    """One line of Docker's json-file (newline excluded), as json-file line(s). Docker ends an
    entry at a newline only, so an action's last output without one arrives glued to the
    sentinel (``"no newlineXXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\\n"``); split it off as
    the process backend's zygote does. Lines without the sentinel pass unparsed."""
    if _SENTINEL_BYTES not in raw or raw.startswith(_SENTINEL_ENTRY):
        return raw + b"\n"
    try:
        entry = json.loads(raw)
        text, stream, time = entry["log"], entry["stream"], entry["time"]
    except (ValueError, KeyError, TypeError):
        return raw + b"\n"
    return b"".join(json_lines(time, stream, text))


def normalised(line: LogLine) -> LogLine:
    """The line with its time as ``2024-05-29T16:26:40.590123456Z``."""
    if len(line.time) == 30 and line.time.endswith("Z"):
        return line
    ns = epoch_ns(line.time)
    return line if ns is None else LogLine(iso_ns(ns), line.stream, line.text, line.raw_size)


def k8s_to_json(raw: bytes) -> bytes:
    """One ``k8s-file`` line (``<time> <stream> <F|P> <text>``, newline excluded) as json-file
    line(s); a ``P`` (partial) entry is a line without its newline, as Docker reports it."""
    parts = raw.split(b" ", 3)
    if len(parts) < 3:
        return b""
    stamp, stream, tag = parts[0].decode("ascii", "replace"), parts[1], parts[2]
    text = parts[3].decode("utf-8", "replace") if len(parts) == 4 else ""
    ns = epoch_ns(stamp)
    if ns is None or stream not in (b"stdout", b"stderr"):
        return b""
    if tag != b"P":
        text += "\n"
    return b"".join(json_lines(iso_ns(ns), stream.decode(), text))
