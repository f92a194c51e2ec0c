"""Blocks of container uids, one per live process backend on a host
(``containers/process/claim.py``): two backends never hand out the same uid, however their
temporary directories differ (``TMPDIR``, systemd's ``PrivateTmp=yes``), because the locks
are in a host-wide directory.

Every lock here is under ``tmp_path`` (``OW_INVOKER_RUN_DIR``, or an explicit directory)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from containers.process import claim
from containers.process.claim import UID_BASE, UID_BLOCK, PrefixClaim, PrefixInUse, UidBlockClaim

ROOT = Path(__file__).resolve().parents[4]
HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from containers.process.claim import UidBlockClaim
c = UidBlockClaim()
print(c.base, flush=True)
time.sleep(60)
"""


def test_two_claims_take_two_blocks_and_a_release_frees_one(tmp_path: Path) -> None:
    first, second = UidBlockClaim(directory=tmp_path), UidBlockClaim(directory=tmp_path)
    assert (first.base, second.base) == (UID_BASE, UID_BASE + UID_BLOCK)
    assert first.count == second.count == UID_BLOCK
    first.release()
    again = UidBlockClaim(directory=tmp_path)
    assert again.base == UID_BASE, "the released block is free again"
    again.release()
    second.release()


def test_subordinate_ranges_give_as_many_blocks_as_they_hold(tmp_path: Path) -> None:
    ranges = ((3_000_000, 2 * UID_BLOCK + 7), (4_000_000, 3 * UID_BLOCK))  # 2 whole blocks
    a, b = UidBlockClaim(*ranges, directory=tmp_path), UidBlockClaim(*ranges, directory=tmp_path)
    assert (a.base, a.gid_base) == (3_000_000, 4_000_000)
    assert (b.base, b.gid_base) == (3_000_000 + UID_BLOCK, 4_000_000 + UID_BLOCK)
    with pytest.raises(PrefixInUse, match="no free block"):
        UidBlockClaim(*ranges, directory=tmp_path)
    a.release()
    b.release()


def test_invokers_with_different_temporary_directories_take_different_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One invoker holds a block with TMPDIR=a; another, with TMPDIR=b, must not get it."""
    run = tmp_path / "run"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setenv("OW_INVOKER_RUN_DIR", str(run))
    env = {"PATH": "/usr/bin:/bin", "OW_INVOKER_RUN_DIR": str(run), "TMPDIR": str(tmp_path / "a")}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and int(holder.stdout.readline()) == UID_BASE
        monkeypatch.setenv("TMPDIR", str(tmp_path / "b"))
        monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
        assert tempfile.gettempdir() == str(tmp_path / "b")
        mine = UidBlockClaim()
        assert mine.base == UID_BASE + UID_BLOCK, "the other invoker's block"
        prefix = PrefixClaim("wsk0")
        assert prefix.path.parent == run
        prefix.release()
        mine.release()
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in run.iterdir()) == ["uids.0.lock", "uids.1.lock", "wsk0.lock"]


def test_the_lock_directory_is_host_wide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never in the temporary directory; for a non-root user its runtime directory, else
    /dev/shm (PrivateTmp hides /tmp and /var/tmp)."""
    monkeypatch.delenv("OW_INVOKER_RUN_DIR", raising=False)
    seen = set()
    for tmp in ("a", "b"):
        (tmp_path / tmp).mkdir()
        monkeypatch.setenv("TMPDIR", str(tmp_path / tmp))
        monkeypatch.setattr(tempfile, "tempdir", None)
        assert tempfile.gettempdir() == str(tmp_path / tmp)
        seen.add(claim.lock_dir())
    (found,) = seen
    assert not str(found).startswith(("/tmp", "/var/tmp", str(tmp_path)))
    monkeypatch.setattr(claim.os, "geteuid", lambda: 0)
    assert claim.lock_dir() == claim.sandbox_dir() == Path("/run/ow-invoker")
    monkeypatch.setattr(claim.os, "geteuid", lambda: 4_000_000_123)  # no /run/user/<uid>
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert claim.lock_dir() == tmp_path / "ow-invoker"
    # Its runtime directory is 0700: sandbox roots, which containers' uids must reach, not.
    assert claim.sandbox_dir() == Path("/dev/shm/ow-invoker-4000000123")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    assert claim.lock_dir() == Path("/dev/shm/ow-invoker-4000000123")
    monkeypatch.setenv("OW_INVOKER_RUN_DIR", str(tmp_path / "run"))
    assert claim.lock_dir() == claim.sandbox_dir() == tmp_path / "run"


def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    """In /dev/shm another user could make our lock directory first, or a link to theirs."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError, match="not a directory of uid"):
        UidBlockClaim(directory=tmp_path / "link")
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 4_000_000_123, 4_000_000_123)
        with pytest.raises(PermissionError, match="not a directory of uid"):
            PrefixClaim("wsk0", theirs)
