"""The sandbox's read-only binds are read-only all the way down: a writable mount below a
bound directory (a tmpfs below ``/usr``, say) is read-only, nosuid and nodev inside too.

A recursive bind copies each submount with flags of its own; remounting the bind's top (all
``_bind`` did before, 2026-12) left those writable. Both ways of making them read-only are
tried: mount_setattr(2) with AT_RECURSIVE, and the remount of each submount that kernels
before 5.12 get."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from containers.process.backend import ProcessBackend
from tests.integration.containers.backends import (
    ROOT,
    Maker,
    new_prefix,
    py,
    result,
    run,
    state_dir,  # noqa: F401  (a fixture)
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root")


@pytest.fixture
def writable_below(tmp_path: Path) -> Iterator[Path]:
    """A directory with a world-writable tmpfs mounted below it, at ``scratch``; the mount
    is the test's own, under its tmp_path, and gone after it."""
    top = tmp_path / "bound"
    below = top / "scratch"
    below.mkdir(parents=True)
    (top / "file").write_text("top")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,size=1m", "tmpfs", below], check=True)
    try:
        (below / "seen").write_text("below")
        yield top
    finally:
        subprocess.run(["umount", "--lazy", below], check=False)


WRITE_PY = py("""
    import errno

    def attempt(fn):
        try:
            return fn()
        except OSError as e:
            return errno.errorcode[e.errno]

    def main(a):
        top = a["top"]
        return {
            "read_below": attempt(lambda: open(top + "/scratch/seen").read()),
            "write_below": attempt(lambda: open(top + "/scratch/new", "w").write("x")),
            "read_top": attempt(lambda: open(top + "/file").read()),
        }
    """)


async def test_a_writable_mount_below_a_bind_is_read_only_in_the_sandbox(
    state_dir: Path,  # noqa: F811
    writable_below: Path,
) -> None:
    b = ProcessBackend(state_dir / "binds", new_prefix())
    original = b._sandbox_settings

    def with_bind() -> dict[str, Any]:
        settings = original()
        return {**settings, "binds": [*settings["binds"], str(writable_below)]}

    b._sandbox_settings = with_bind  # type: ignore[method-assign]
    await b.start()
    try:
        r = result(await run(await Maker(b)(WRITE_PY), {"top": str(writable_below)}))
    finally:
        await b.close()
    assert r == {"read_below": "below", "write_below": "EROFS", "read_top": "top"}
    assert not (writable_below / "scratch" / "new").exists()


BIND_HERE = """
import ctypes, errno, json, os, sys
sys.path.insert(0, sys.argv[1])
from containers.runtimes import sandbox
if sys.argv[4] == "remount":
    sandbox.SYS_MOUNT_SETATTR = None  # as on a kernel without mount_setattr
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(sandbox.CLONE_NEWNS) != 0:  # the mounts below are this process's alone
    sys.exit(os.strerror(ctypes.get_errno()))
sandbox._mount(None, "/", None, sandbox.MS_REC | sandbox.MS_PRIVATE)
sandbox._bind(sys.argv[2], sys.argv[3])
out = {}
for name, path in (("top", "/new"), ("below", "/scratch/new")):
    try:
        open(sys.argv[3] + path, "w").close()
        out[name] = "written"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
flags = os.statvfs(sys.argv[3] + "/scratch").f_flag
out["nosuid_nodev"] = bool(flags & os.ST_NOSUID and flags & os.ST_NODEV)
print(json.dumps(out))
"""


@pytest.mark.parametrize("way", ["mount_setattr", "remount"])
def test_bind_makes_every_mount_below_read_only(
    writable_below: Path, tmp_path: Path, way: str
) -> None:
    dst = tmp_path / "inside"
    done = subprocess.run(
        [sys.executable, "-c", BIND_HERE, str(ROOT), str(writable_below), str(dst), way],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    # as root: only a read-only mount refuses the write
    assert json.loads(done.stdout) == {"top": "EROFS", "below": "EROFS", "nosuid_nodev": True}
    assert not (writable_below / "scratch" / "new").exists()
