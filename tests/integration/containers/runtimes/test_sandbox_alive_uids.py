"""The sandbox's uid scan sees a process of the uid until it is gone (root: the test changes a
child's uid)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from containers.runtimes.sandbox import alive_uids
from tests.unit.containers.runtimes.test_sandbox import UNUSED


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a process's uid needs root")
def test_the_scan_sees_a_process_of_the_uid_until_it_is_gone() -> None:
    uid = UNUSED
    code = f"import os, time; os.setuid({uid}); print('ready', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        assert alive_uids({uid: []}, 1) == {uid}
        assert alive_uids({uid - 1: []}, 2) == {uid - 1}, "a user namespace's second uid"
    finally:
        child.kill()
        child.wait()
    assert alive_uids({uid: []}, 1) == set()
