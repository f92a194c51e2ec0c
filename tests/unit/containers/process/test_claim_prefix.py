"""One live backend per container-name prefix on a host: a second claim is refused with a
clear message while the first holds it, and is granted once the holder releases it or dies
(the kernel drops the lock, however the holder exits)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from containers.process.claim import PrefixClaim, PrefixInUse

HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from containers.process.claim import PrefixClaim
c = PrefixClaim("wskheld0", Path({dir!r}))
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_claim_waits_for_the_first(tmp_path: Path) -> None:
    first = PrefixClaim("wsk0", tmp_path)
    with pytest.raises(PrefixInUse, match=r"containers named wsk0_\*.*--unique-name"):
        PrefixClaim("wsk0", tmp_path)
    other = PrefixClaim("wsk1", tmp_path)  # another prefix is another claim
    first.release()
    again = PrefixClaim("wsk0", tmp_path)
    again.release()
    other.release()


def test_a_dead_holder_frees_its_prefix(tmp_path: Path) -> None:
    root = str(Path(__file__).resolve().parents[4])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(root=root, dir=str(tmp_path))],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(PrefixInUse, match=f"pid {holder.pid}"):
            PrefixClaim("wskheld0", tmp_path)
        holder.kill()  # SIGKILL: no clean-up of its own
        holder.wait()
        deadline = time.monotonic() + 5
        while True:
            try:
                PrefixClaim("wskheld0", tmp_path).release()
                break
            except PrefixInUse:
                assert time.monotonic() < deadline, "the lock outlived its holder"
                time.sleep(0.05)
    finally:
        holder.kill()
        holder.wait()
