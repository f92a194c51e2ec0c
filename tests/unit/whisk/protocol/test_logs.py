"""Activation logs (whisk/protocol/logs.py): lines, sentinels, sizes and notes, exactly."""

from __future__ import annotations

import time

from whisk.protocol.logs import (
    COLLECTION_FAILED,
    DEVELOPER_ERROR_NOTE,
    SENTINEL,
    TRUNCATED,
    LogCollector,
    format_line,
    iso_time,
)

# -- activation logs ------------------------------------------------------------------------

T = "2024-05-29T16:26:40.590123456Z"


def test_a_log_line_is_the_time_padded_the_stream_and_the_text_stripped():
    assert format_line(T, "stdout", "  hello \n") == f"{T} stdout: hello"
    assert format_line("t", "stderr", "x") == "t" + " " * 29 + " stderr: x"


def test_sentinels_are_counted_exactly_and_only_as_written():
    c = LogCollector(limit_bytes=1000)
    for not_one in (SENTINEL + " \n", "\n" + SENTINEL, " " + SENTINEL):
        c.add(T, "stdout", not_one)
    assert c.sentinels == 0 and len(c.lines) == 3
    c.add(T, "stdout", SENTINEL + "\n")
    assert (c.sentinels, c.complete) == (1, False)
    c.add(T, "stderr", SENTINEL)
    assert (c.sentinels, c.complete) == (2, True) and len(c.lines) == 3
    c.add(T, "stderr", SENTINEL)
    assert c.sentinels == 3


def test_log_size_is_counted_as_the_reference_counts_it_up_to_the_limit():
    line = "abc"  # counted as its bytes + the time + 30, unless the raw line's size is given
    each = len(line) + len(T) + 30
    c = LogCollector(limit_bytes=2 * each + 10)
    c.add(T, "stdout", line)
    assert c.size == each
    c.add(T, "stdout", "é", raw_size=10)
    assert c.size == each + 10
    c.add(T, "stdout", line)  # exactly at the limit: kept
    assert c.size == 2 * each + 10 and not c.truncated and len(c.lines) == 3
    c.add(T, "stdout", "")  # one more byte than the limit
    assert c.truncated and len(c.lines) == 3
    c.add(T, "stdout", "x", raw_size=0)  # once truncated, nothing more
    assert len(c.lines) == 3


def test_the_notes_a_log_ends_with():
    c = LogCollector(limit_bytes=1)
    c.add(T, "stdout", "too long for the limit")
    assert c.finish(T) == [format_line(T, "stderr", TRUNCATED.format(1))]
    assert TRUNCATED.format(1).endswith("exceeds the limit of 1 bytes.")
    assert c.finish(T, developer_error=True, failed=True) == [
        f"{T} stderr: Logs were truncated because the total bytes size exceeds the limit "
        "of 1 bytes.",
        f"{T} stderr: {DEVELOPER_ERROR_NOTE}",
        f"{T} stderr: {COLLECTION_FAILED}",
    ]
    fine = LogCollector(limit_bytes=100)
    fine.add(T, "stdout", "ok")
    assert fine.finish(T) == [f"{T} stdout: ok"]


def test_iso_time_is_utc_with_nanoseconds_whatever_the_local_zone(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        assert iso_time(1_716_999_999_590_123_456) == "2024-05-29T16:26:39.590123456Z"
        assert iso_time(5) == "1970-01-01T00:00:00.000000005Z"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
