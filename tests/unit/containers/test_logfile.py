"""Container logs: the zygote's json-file writer and the invoker's per-activation parser."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest

from containers.logfile import (
    TRIM_BYTES,
    LogFile,
    LogParser,
    LogWatcher,
    overall_timeout_s,
    parse_line,
)
from containers.runtimes.python_runtime import MAX_LOG_LINE, SENTINEL, LogStream, iso_time
from whisk.protocol import logs
from whisk.supervisor import child

T0 = 1_717_000_000_123_456_789
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")


def entries(data: bytes) -> list[dict[str, str]]:
    assert data.endswith(b"\n") or not data
    return [json.loads(line) for line in data.splitlines()]


def test_iso_time_matches_the_protocol_module() -> None:
    assert iso_time(T0) == logs.iso_time(T0) == "2024-05-29T16:26:40.123456789Z"


def test_log_stream_renders_docker_json_file_lines() -> None:
    s = LogStream("stdout")
    out = entries(s.feed(b"hello\nwor", T0) + s.feed(b"ld \xc3\xa9\n", T0 + 1))
    assert [e["log"] for e in out] == ["hello\n", "world é\n"]
    assert {e["stream"] for e in out} == {"stdout"}
    assert all(TIME_RE.match(e["time"]) for e in out)
    assert s.flush(T0) == b""


def test_log_stream_flushes_an_unterminated_last_line() -> None:
    s = LogStream("stderr")
    assert s.feed(b"no newline", T0) == b""
    assert entries(s.flush(T0)) == [{"log": "no newline", "stream": "stderr", "time": iso_time(T0)}]


def test_log_stream_splits_a_sentinel_glued_to_unterminated_output() -> None:
    s = LogStream("stdout")
    out = entries(s.feed(b"partial", T0) + s.feed(SENTINEL, T0))
    assert [e["log"] for e in out] == ["partial", SENTINEL.decode()]


def test_log_stream_cuts_long_lines_on_utf8_boundaries() -> None:
    s = LogStream("stdout")
    text = ("é" * MAX_LOG_LINE).encode()  # 2 bytes per character
    out = entries(s.feed(text + b"\n", T0))
    assert len(out) >= 2
    assert "".join(e["log"] for e in out) == "é" * MAX_LOG_LINE + "\n"
    assert all("\ufffd" not in e["log"] for e in out)


def test_log_stream_replaces_invalid_utf8() -> None:
    out = entries(LogStream("stdout").feed(b"\xff\xfe ok\n", T0))
    assert out[0]["log"].endswith(" ok\n")


def line(text: str, stream: str = "stdout", time: str = "2024-05-29T16:26:40.590123456Z") -> bytes:
    return json.dumps({"log": text, "stream": stream, "time": time}).encode() + b"\n"


def sentinels() -> bytes:
    s = SENTINEL.decode()
    return line(s, "stdout") + line(s, "stderr")


def test_parse_line() -> None:
    raw = line("hi\n", "stderr")
    parsed = parse_line(raw)
    assert parsed is not None
    assert (parsed.stream, parsed.text, parsed.raw_size) == ("stderr", "hi\n", len(raw))
    assert parse_line(b"not json\n") is None
    assert parse_line(b'{"log": 1}\n') is None


def test_parser_stops_after_both_sentinels() -> None:
    first = line("a\n") + line("b\n", "stderr") + sentinels()
    data = first + line("next activation\n")
    p = LogParser(10_000)
    used = p.feed(data)
    assert used == len(first)
    assert p.complete
    assert [(ln.stream, ln.text) for ln in p.lines] == [("stdout", "a\n"), ("stderr", "b\n")]


def test_parser_leaves_partial_lines_and_needs_one_sentinel_per_stream() -> None:
    s = SENTINEL.decode()
    data = line("a\n") + line(s, "stdout")
    p = LogParser(10_000)
    assert p.feed(data + b'{"log":"par') == len(data)
    assert not p.complete
    assert (
        p.feed(line(s, "stdout")) > 0 and not p.complete
    )  # a second stdout sentinel is not enough
    assert p.feed(line(s, "stderr")) > 0 and p.complete


def test_parser_accepts_sentinels_written_by_the_zygote() -> None:
    data = LogStream("stdout").feed(b"x\n" + SENTINEL, T0) + LogStream("stderr").feed(SENTINEL, T0)
    p = LogParser(1000)
    assert p.feed(data) == len(data)
    assert p.complete and [ln.text for ln in p.lines] == ["x\n"]


def test_parser_truncates_but_consumes_up_to_the_sentinels() -> None:
    body = b"".join(line(f"line {i}\n") for i in range(100))
    p = LogParser(300)
    data = body + sentinels()
    assert p.feed(data) == len(data)
    assert p.complete and p.truncated
    kept = sum(ln.raw_size for ln in p.lines)
    assert kept > 300 and kept - p.lines[-1].raw_size <= 300  # the crossing line is kept
    collector = logs.LogCollector(300)
    for ln in p.lines:
        collector.add(ln.time, ln.stream, ln.text, ln.raw_size)
    assert collector.truncated
    assert p.skipped == len(body) - kept


def test_parser_skips_garbage_lines() -> None:
    data = b"garbage\n" + line("ok\n") + sentinels()
    p = LogParser(1000)
    assert p.feed(data) == len(data)
    assert [ln.text for ln in p.lines] == ["ok\n"]


def test_overall_timeout_follows_the_reference() -> None:
    assert overall_timeout_s(10 * 1024 * 1024) == 20.0
    assert overall_timeout_s(0) == 10.0


@pytest.mark.parametrize("watched", [True, False])
async def test_log_file_reads_activation_by_activation(tmp_path: Path, watched: bool) -> None:
    path = tmp_path / "log.json"
    path.write_bytes(b"")
    watcher = LogWatcher() if watched else None
    f = LogFile(path, watcher)
    try:
        with path.open("ab") as w:
            w.write(line("one\n") + sentinels() + line("two\n"))
            w.flush()
            lines, complete = await f.read(1000, True)
            assert complete and [ln.text for ln in lines] == ["one\n"]

            async def finish_later() -> None:
                await asyncio.sleep(0.05)
                w.write(line("three\n", "stderr") + b'{"log":"XXX')
                w.flush()
                await asyncio.sleep(0.05)
                w.write(b'_THE_END_OF_A_WHISK_ACTIVATION_XXX\\n","stream":"stdout","time":"t"}\n')
                w.write(line(SENTINEL.decode(), "stderr"))
                w.flush()

            task = asyncio.create_task(finish_later())
            lines, complete = await f.read(1000, True)
            await task
            assert complete and [ln.text for ln in lines] == ["two\n", "three\n"]
            assert await f.read(1000, False) == ([], True)  # everything was handed out
    finally:
        f.close()
        if watcher is not None:
            watcher.close()


async def test_log_file_gives_back_the_disk_space_of_read_lines(tmp_path: Path) -> None:
    """A warm container that prints a lot keeps only its unread log on disk."""
    path = tmp_path / "log.json"
    path.write_bytes(b"")
    f = LogFile(path, trim=True)
    chunk = line("x" * 1000 + "\n") * 1000  # about 1 MB per activation
    try:
        with path.open("ab") as w:
            for i in range(20):
                w.write(chunk + line(f"last {i}\n") + sentinels())
                w.flush()
                lines, complete = await f.read(10 << 20, True)
                assert complete and len(lines) == 1001 and lines[-1].text == f"last {i}\n"
        st = os.stat(path)
        assert st.st_size > 20 * len(chunk)  # offsets unchanged: the writer just appends
        assert st.st_blocks * 512 < 3 * TRIM_BYTES  # but the disk holds only the unread tail
    finally:
        f.close()


async def test_log_file_times_out_without_sentinels(tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    path.write_bytes(line("lonely\n"))
    f = LogFile(path)
    lines, complete = await f.read(1000, True, idle_timeout_s=0.1)
    assert not complete and [ln.text for ln in lines] == ["lonely\n"]
    path.write_bytes(line("lonely\n") + line("more\n"))
    lines, complete = await f.read(1000, False)
    assert complete and [ln.text for ln in lines] == ["more\n"]
    f.close()


def _open_fds_of(path: Path) -> int:
    return sum(1 for fd in os.listdir("/proc/self/fd") if _link(fd) == str(path))


def _link(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


@pytest.mark.parametrize("watched", [False, True])
async def test_a_log_closed_while_a_read_waits_is_never_opened_again(
    tmp_path: Path, watched: bool
) -> None:
    # A container destroyed while its call's logs are read (a timeout, an eviction): the
    # read that was waiting for the sentinels opened the file again and nothing closed it,
    # one descriptor per such container (the soak saw hundreds in an hour).
    path = tmp_path / "log.json"
    path.write_bytes(line("no sentinels yet\n"))
    watcher = LogWatcher() if watched else None
    f = LogFile(path, watcher)
    reading = child(f.read(1000, True, idle_timeout_s=30))
    await asyncio.sleep(0.05)
    assert _open_fds_of(path) == 1
    f.close()  # destroy()
    path.write_bytes(line("written after\n"))
    async with asyncio.timeout(5):  # it ends now, not after the idle timeout
        lines, complete = await reading
    assert [ln.text for ln in lines] == ["no sentinels yet\n"] and not complete
    assert _open_fds_of(path) == 0
    assert await f.read(1000, False) == ([], True)  # closed: nothing more is read
    assert _open_fds_of(path) == 0
    if watcher is not None:
        watcher.close()


@pytest.mark.parametrize("size", [MAX_LOG_LINE - 1, MAX_LOG_LINE, MAX_LOG_LINE + 1, 100_000])
def test_lines_of_any_length_around_the_cut(size: int) -> None:
    """A 16 KiB line (exactly the cut) once crashed the zygote's log drain."""
    s = LogStream("stdout")
    out = entries(s.feed(b"y" * size, T0) + s.feed(b"\n", T0))
    assert "".join(e["log"] for e in out) == "y" * size + "\n"
    assert all(len(e["log"].encode()) <= MAX_LOG_LINE + 1 for e in out)
