"""``open_netns`` on a container whose init is gone: the create that races its exit must see
ESRCH (it exited since the inspect), which the backend turns into a refusing dialer, not an
error of the engine's set-up."""

from __future__ import annotations

import errno
import subprocess

import pytest

from containers.docker.netns import NetnsError, open_netns


def test_an_init_that_exited_since_the_inspect_is_esrch():
    child = subprocess.Popen(["true"])
    child.wait()  # reaped: /proc/<pid> is gone
    info = {"State": {"Running": True, "Pid": child.pid}}
    with pytest.raises(NetnsError) as caught:
        open_netns("c0a7f20ace68", info)
    assert caught.value.errno == errno.ESRCH


def test_a_stopped_container_is_esrch():
    with pytest.raises(NetnsError) as caught:
        open_netns("c0a7f20ace68", {"State": {"Running": False, "Pid": 0}})
    assert caught.value.errno == errno.ESRCH
