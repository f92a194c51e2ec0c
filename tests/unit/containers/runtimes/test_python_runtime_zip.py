"""Zip safety of the python runtime: nothing of an archive may land outside the action dir."""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path

import pytest

from containers.runtimes.python_runtime import UnsafeArchive, archive_member_path, safe_extract


def make_zip(entries: list[tuple[str, bytes, int]]) -> bytes:
    """(name, data, unix mode) entries; mode 0 leaves the default attributes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if mode:
                info.external_attr = mode << 16
            zf.writestr(info, data)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("__main__.py", "__main__.py"),
        ("pkg/mod.py", "pkg/mod.py"),
        ("./pkg//mod.py", "pkg/mod.py"),
        ("pkg/", None),
        ("a/./b.py", "a/b.py"),
    ],
)
def test_member_path_accepts_relative_names(name: str, expected: str | None) -> None:
    assert archive_member_path(name, 0) == expected


@pytest.mark.parametrize(
    "name",
    [
        "/etc/passwd",
        "../evil.py",
        "a/../../evil.py",
        "a/..",
        "C:/x.py",
        "\\abs.py",
        "a\\..\\..\\x",
        "x\x00y",
        "",
    ],
)
def test_member_path_rejects_escapes(name: str) -> None:
    with pytest.raises(UnsafeArchive):
        archive_member_path(name, 0)


def test_member_path_rejects_symlinks() -> None:
    with pytest.raises(UnsafeArchive, match="symbolic link"):
        archive_member_path("link", (stat.S_IFLNK | 0o777) << 16)


def test_safe_extract_writes_files_and_keeps_exec_bit(tmp_path: Path) -> None:
    data = make_zip(
        [
            ("__main__.py", b"def main(a): return a\n", 0),
            ("pkg/", b"", 0),
            ("pkg/helper.py", b"X = 1\n", 0),
            ("bin/tool", b"#!/bin/sh\necho hi\n", stat.S_IFREG | 0o755),
        ]
    )
    written = safe_extract(data, str(tmp_path))
    assert sorted(written) == ["__main__.py", "bin/tool", "pkg/helper.py"]
    assert (tmp_path / "pkg" / "helper.py").read_bytes() == b"X = 1\n"
    assert os.access(tmp_path / "bin" / "tool", os.X_OK)
    assert not os.access(tmp_path / "__main__.py", os.X_OK)


@pytest.mark.parametrize("bad", ["../escape.py", "/abs.py", "ok/../../escape.py"])
def test_safe_extract_refuses_traversal_before_writing_anything(tmp_path: Path, bad: str) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    data = make_zip([("first.py", b"1", 0), (bad, b"evil", 0)])
    with pytest.raises(UnsafeArchive):
        safe_extract(data, str(dest))
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "escape.py").exists()


def test_safe_extract_refuses_symlink_entries(tmp_path: Path) -> None:
    data = make_zip([("link", b"/etc", stat.S_IFLNK | 0o777), ("link/passwd", b"x", 0)])
    with pytest.raises(UnsafeArchive):
        safe_extract(data, str(tmp_path))
    assert not (tmp_path / "link").exists()


def test_safe_extract_does_not_follow_existing_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "sub").symlink_to(outside)
    with pytest.raises(UnsafeArchive):
        safe_extract(make_zip([("sub/x.py", b"evil", 0)]), str(dest))
    assert list(outside.iterdir()) == []


def test_safe_extract_limits_the_expanded_size(tmp_path: Path) -> None:
    data = make_zip([("big.bin", b"\0" * 100_000, 0)])
    with pytest.raises(UnsafeArchive, match="expands beyond"):
        safe_extract(data, str(tmp_path), max_bytes=10_000)
