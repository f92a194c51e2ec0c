"""Hostile zip archives (random bytes, path tricks, links) are refused cleanly and never write
outside the action's directory."""

from __future__ import annotations

import io
import os
import string
import tempfile
import warnings
import zipfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from containers.runtimes.python_runtime import UnsafeArchive, safe_extract

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
segments = st.sampled_from(["..", ".", "", "a", "b", "/", "\\", "C:", "~", "\x00", "é", "x" * 50])
names = st.lists(segments, min_size=1, max_size=6).map("/".join) | st.text(
    alphabet=string.printable, min_size=1, max_size=40
)


def archive(entries: list[tuple[str, int]]) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
        warnings.simplefilter("ignore")  # duplicate names are part of the fuzz
        for name, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, b"data")
    return buf.getvalue()


def _outside(root: Path, sandbox: Path) -> list[str]:
    return [p for p in os.listdir(sandbox) if p != root.name]


@FUZZ
@given(
    st.lists(
        st.tuples(names, st.sampled_from([0, 0o100644, 0o120777, 0o40755])), min_size=1, max_size=5
    )
)
def test_entries_never_escape(entries):
    with tempfile.TemporaryDirectory() as sandbox:
        root = Path(sandbox) / "action"
        root.mkdir()
        try:
            data = archive(entries)
        except (ValueError, OSError):
            return  # zipfile itself refuses the name
        try:
            written = safe_extract(data, str(root))
        except (UnsafeArchive, zipfile.BadZipFile, OSError, ValueError):
            written = []
        assert not _outside(root, Path(sandbox))
        for rel in written:
            real = os.path.realpath(root / rel)
            assert real.startswith(str(root.resolve()) + os.sep)


@FUZZ
@given(st.binary(max_size=3000))
def test_random_bytes_are_refused_cleanly(data):
    with tempfile.TemporaryDirectory() as d:
        try:
            safe_extract(data, d)
        except (UnsafeArchive, zipfile.BadZipFile, ValueError, OSError, EOFError):
            pass


def test_zip_bomb_is_refused():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big.bin", b"\0" * (64 * 1024 * 1024))
    with tempfile.TemporaryDirectory() as d:
        try:
            safe_extract(buf.getvalue(), d, max_bytes=16 * 1024 * 1024)
        except UnsafeArchive as e:
            assert "expands beyond" in str(e)
        else:
            raise AssertionError("a 64 MB expansion passed a 16 MB limit")
