"""Reading one activation's lines from a container's json-file log (spec 3.6).

The log holds Docker json-file lines, ``{"log":"text\\n","stream":"stdout","time":"..."}``,
written by whoever drains the runtime's stdout/stderr (the zygote for the process backend).
An activation's output ends with one sentinel line per stream. :class:`LogParser` is the
pure part (bytes in, lines out); :class:`LogFile` remembers the offset and waits for the
sentinels with the reference's idle (2 s) and overall (``max(limit MB, 5) * 2`` s) timeouts.
The sentinels usually land in the file a few microseconds after the runtime's answer, so
waiting is woken by inotify (one instance per backend, :class:`LogWatcher`) rather than by
polling, which would cost a millisecond per activation; polling remains the fallback.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import struct
from collections.abc import Callable

from containers.backend import LogLine
from whisk.protocol import json
from whisk.protocol.logs import SENTINEL

IDLE_TIMEOUT_S = 2.0
READ_CHUNK = 256 * 1024
TRIM_BYTES = 1 << 20  # give back the disk space of read log bytes once this much has piled up
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
_STREAMS = frozenset(("stdout", "stderr"))
_SENTINEL_MARK = b'"' + SENTINEL.encode() + b"\\n"
# How the zygote writes a sentinel line: recognised without a JSON parse.
_SENTINEL_PREFIX = b'{"log":"' + SENTINEL.encode() + b'\\n","stream":"'
_FAST_STREAMS = {b"stdout": "stdout", b"stderr": "stderr"}
log = logging.getLogger(__name__)


def overall_timeout_s(limit_bytes: int) -> float:
    """The reference's collection timeout: ``max(limit in MB, 5) * 2`` seconds."""
    return max(limit_bytes / (1024 * 1024), 5.0) * 2.0


def parse_line(raw: bytes) -> LogLine | None:
    """One json-file line (newline included in ``raw``); None if it is not one."""
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict):
        return None
    text, stream, time = obj.get("log"), obj.get("stream"), obj.get("time")
    if not isinstance(text, str) or not isinstance(stream, str):
        return None
    return LogLine(time if isinstance(time, str) else "", stream, text, len(raw))


def _stream_of(raw: bytes) -> str | None:
    """The stream of a json-file line, cheaply (parsed only when the fast checks fail)."""
    if b'"stream":"stdout"' in raw:
        return "stdout"
    if b'"stream":"stderr"' in raw:
        return "stderr"
    line = parse_line(raw)
    return line.stream if line is not None else None


class LogParser:
    """Collects one activation's lines from json-file bytes, up to both sentinels.

    Only complete (newline-terminated) lines are consumed. Once the raw size of the kept
    lines exceeds ``limit_bytes`` the rest is consumed but not kept; the line that crossed
    the limit is kept, so a size-counting consumer (``LogCollector``) sees the truncation.
    Lines that are not json-file entries are skipped.

    The two streams are drained independently, so once one stream's sentinel is seen its
    further lines already belong to the next activation: they are set aside in ``deferred``
    and must be fed first to the next activation's parser (see :meth:`carry`)."""

    __slots__ = ("deferred", "limit_bytes", "lines", "seen", "size", "skipped")

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.lines: list[LogLine] = []
        self.size = 0
        self.skipped = 0
        self.seen: set[str] = set()
        self.deferred: list[bytes] = []

    def carry(self, rest: bytes) -> bytes:
        """What the next activation's parser must read first: the deferred lines, then
        ``rest`` (bytes this parser did not consume). Each stream keeps its order."""
        return b"".join(self.deferred) + rest if self.deferred else rest

    @property
    def complete(self) -> bool:
        return self.seen >= _STREAMS

    @property
    def truncated(self) -> bool:
        return self.size > self.limit_bytes

    def feed(self, data: bytes | bytearray, start: int = 0) -> int:
        """Consume complete lines of ``data`` from ``start``; returns the position after the
        last line consumed. Stops right after the line that completes the activation (the
        rest belongs to the next one). Only the lines are copied, never ``data``."""
        pos = start
        while not self.complete:
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            raw = bytes(data[pos : nl + 1])
            pos = nl + 1
            if raw.startswith(_SENTINEL_PREFIX):
                stream = _FAST_STREAMS.get(raw[len(_SENTINEL_PREFIX) : len(_SENTINEL_PREFIX) + 6])
                if stream is not None:
                    if stream in self.seen:
                        self.deferred.append(raw)  # the next activation's sentinel
                    else:
                        self.seen.add(stream)
                    continue
            if self.seen and _stream_of(raw) in self.seen:
                self.deferred.append(raw)  # this stream is done: the next activation's line
                continue
            if self.truncated and _SENTINEL_MARK not in raw:
                self.skipped += len(raw)  # beyond the limit: only look for the sentinels
                continue
            line = parse_line(raw)
            if line is None:
                self.skipped += len(raw)
            elif line.text.rstrip("\r\n") == SENTINEL:
                self.seen.add(line.stream)
            elif self.truncated:
                self.skipped += len(raw)
            else:
                self.size += len(raw)
                self.lines.append(line)
        return pos


IN_MODIFY = 0x2
IN_IGNORED = 0x8000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")


class LogWatcher:
    """One inotify instance shared by many log files: ``wait`` returns once a watched file
    was written to. Registered with the event loop only while someone waits, so chatty
    actions do not wake the invoker for every line."""

    def __init__(self) -> None:
        self._fd = -1
        self._libc: ctypes.CDLL | None = None
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self._dirty: set[int] = set()
        self._reading: asyncio.AbstractEventLoop | None = None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd >= 0:
            self._fd, self._libc = fd, libc

    @property
    def available(self) -> bool:
        return self._fd >= 0

    def add(self, path: str) -> int | None:
        """Watch a file; None if it cannot be watched (the caller then polls)."""
        if self._libc is None:
            return None
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), IN_MODIFY)
        return wd if wd >= 0 else None

    def remove(self, wd: int) -> None:
        if self._libc is not None:
            self._libc.inotify_rm_watch(self._fd, wd)
        self._dirty.discard(wd)
        fut = self._waiters.pop(wd, None)
        if fut is not None and not fut.done():
            fut.set_result(None)
        self._update_reader()

    async def wait(self, wd: int, timeout_s: float) -> None:
        """Until the file changes (or ``timeout_s``; spurious wake-ups are possible)."""
        if wd in self._dirty:
            self._dirty.discard(wd)
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters[wd] = fut
        self._update_reader()
        try:
            async with asyncio.timeout(timeout_s):
                await fut
        except TimeoutError:
            pass
        finally:
            if self._waiters.get(wd) is fut:
                del self._waiters[wd]
            self._update_reader()

    def _update_reader(self) -> None:
        if self._fd < 0:
            return
        if self._waiters and self._reading is None:
            self._reading = asyncio.get_running_loop()
            self._reading.add_reader(self._fd, self._on_events)
        elif not self._waiters and self._reading is not None:
            self._reading.remove_reader(self._fd)
            self._reading = None

    def _on_events(self) -> None:
        try:
            data = os.read(self._fd, 64 * 1024)
        except BlockingIOError:
            return
        pos = 0
        while pos + _EVENT.size <= len(data):
            wd, mask, _, length = _EVENT.unpack_from(data, pos)
            pos += _EVENT.size + length
            fut = self._waiters.pop(wd, None)
            if fut is not None:
                if not fut.done():
                    fut.set_result(None)
            elif not mask & IN_IGNORED:
                self._dirty.add(wd)

    def close(self) -> None:
        if self._fd >= 0:
            if self._reading is not None:
                self._reading.remove_reader(self._fd)
                self._reading = None
            os.close(self._fd)
            self._fd = -1
            self._libc = None


def _punch_hole(path: str, start: int, end: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        mode = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
        if libc.fallocate(fd, mode, ctypes.c_int64(start), ctypes.c_int64(end - start)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    finally:
        os.close(fd)


class LogFile:
    """A container's log file, read activation by activation from a remembered offset.

    ``convert`` turns one raw line of another log format (newline excluded) into json-file
    line(s), e.g. Podman's ``k8s-file``; by default the file already is json-file.

    With ``trim`` (a file this process owns) the bytes already read are punched out of the
    file: offsets stay valid for the writer and the reader, but a warm container that lives
    for days holds only its unread log on disk, not everything it ever printed."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        watcher: LogWatcher | None = None,
        convert: Callable[[bytes], bytes] | None = None,
        trim: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self._watcher = watcher
        self._wd = watcher.add(self.path) if watcher is not None else None
        self._fd: int | None = None
        self._convert = convert
        self._read_pos = 0  # file offset up to which bytes were read
        self._raw_tail = b""  # with ``convert``: a partial raw line
        self._buf = bytearray()  # json-file bytes read; ``_pos`` is where the unread part starts
        self._pos = 0
        self._carry = b""  # lines the last activation set aside for the next (LogParser.carry)
        self._trimmed: int | None = 0 if trim else None  # file bytes given back so far
        self._closed = False

    def _json(self, data: bytes) -> bytes:
        if self._convert is None or not data:
            return data
        raw = self._raw_tail + data
        cut = raw.rfind(b"\n") + 1
        self._raw_tail = raw[cut:]
        return b"".join(self._convert(line) for line in raw[:cut].split(b"\n")[:-1])

    def close(self) -> None:
        """For good: a read still waiting for the sentinels ends with what it has and never
        opens the file again (it did, and the descriptor outlived the container)."""
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._watcher is not None and self._wd is not None:
            self._watcher.remove(self._wd)
            self._wd = None

    def _compact(self) -> None:
        """Drop consumed bytes once they are most of the buffer (amortised O(1) per byte),
        and with ``trim`` the disk blocks of what was read."""
        if self._pos > 65536 and self._pos * 2 > len(self._buf):
            del self._buf[: self._pos]
            self._pos = 0
        if self._trimmed is not None and self._read_pos - self._trimmed >= TRIM_BYTES:
            end = self._read_pos - self._read_pos % 4096  # whole blocks only
            try:
                _punch_hole(self.path, self._trimmed, end)
                self._trimmed = end
            except OSError as e:  # a filesystem without hole punching: keep the log whole
                log.warning("not trimming %s: %s", self.path, e)
                self._trimmed = None

    def _read(self) -> bytes:
        if self._closed:
            return b""
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return b""
        data = os.pread(self._fd, READ_CHUNK, self._read_pos)
        self._read_pos += len(data)
        return data

    async def read(
        self,
        limit_bytes: int,
        wait_for_sentinels: bool,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        overall_timeout: float | None = None,
    ) -> tuple[list[LogLine], bool]:
        """Lines since the last call, up to (excluding) the two sentinels.

        With ``wait_for_sentinels`` returns ``(lines, False)`` if they did not arrive in time;
        without, returns what is there now, as complete."""
        loop = asyncio.get_running_loop()
        parser = LogParser(limit_bytes)
        start = last_progress = loop.time()
        overall = overall_timeout if overall_timeout is not None else overall_timeout_s(limit_bytes)
        delay = 0.0005
        carry, self._carry = self._carry, b""
        leftover = carry[parser.feed(carry) :]
        pos = self._pos = parser.feed(self._buf, self._pos)  # what a backlog already holds
        while True:
            if parser.complete:
                self._carry = parser.carry(leftover)
                self._compact()
                return parser.lines, True
            if self._closed:  # the container is gone: its sentinels will not come
                return parser.lines, not wait_for_sentinels
            data = self._read()
            if data:
                self._buf += self._json(data)
            self._pos = parser.feed(self._buf, self._pos)
            now = loop.time()
            if data:
                if self._pos != pos:
                    last_progress, pos = now, self._pos
                delay = 0.0005
                if len(data) == READ_CHUNK:
                    await asyncio.sleep(0)  # a big backlog: let others run between chunks
                    continue
            if parser.complete:
                continue
            if (
                not wait_for_sentinels
                or now - last_progress >= idle_timeout_s
                or (now - start >= overall)
            ):
                self._carry = parser.carry(leftover)
                self._compact()
                return parser.lines, not wait_for_sentinels
            if self._watcher is not None and self._wd is not None:
                await self._watcher.wait(self._wd, 0.05)  # the timeout guards a lost event
            else:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.02)
