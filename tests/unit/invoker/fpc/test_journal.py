"""The journal of pulled calls: entries round-trip, a crash never leaves half of one, and an
unreadable entry is dropped with a log line."""

from __future__ import annotations

from pathlib import Path

import pytest

from invoker.fpc.journal import Journal, Pulled


def entry(aid: str) -> Pulled:
    return Pulled(
        "127.0.0.1",
        50051,
        "guest",
        {"path": "guest", "name": "hello", "version": "0.0.1"},
        "1-abc",
        {"activationId": aid, "transid": ["t", 1]},
    )


def test_entries_round_trip_and_leave_once_removed(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j")
    journal.add(entry("a" * 32))
    journal.add(entry("b" * 32))
    assert len(journal) == 2
    assert Journal(tmp_path / "j").entries() == [entry("a" * 32), entry("b" * 32)]
    journal.remove("a" * 32)
    journal.remove("a" * 32)  # twice: nothing to do
    assert [e.activation_id for e in journal.entries()] == ["b" * 32]


def test_what_a_crash_leaves_half_written_or_garbled_is_dropped(tmp_path: Path, caplog) -> None:
    journal = Journal(tmp_path)
    journal.add(entry("c" * 32))
    (tmp_path / f".{'d' * 32}.json.tmp").write_text('{"host": "127.')  # cut off mid-write
    (tmp_path / f"{'e' * 32}.json").write_text("not json")
    assert [e.activation_id for e in journal.entries()] == ["c" * 32]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{'c' * 32}.json"]
    assert "unreadable" in caplog.text


@pytest.mark.parametrize("aid", ["", "../x", ".hidden", "a/b"])
def test_an_activation_id_is_never_a_path(tmp_path: Path, aid: str) -> None:
    with pytest.raises(ValueError, match="not an activation id"):
        Journal(tmp_path).remove(aid)
