"""CPU shares from two readings of a container's CPU times."""

import os
import subprocess
import time

import pytest

from containers import cpu


def test_a_cpu_share_between_two_readings_leaves_out_the_wait():
    from containers.cpu import CpuTimes, share_between

    assert share_between(CpuTimes(1.0), CpuTimes(1.25), 0.5) == pytest.approx(0.5)
    assert share_between(CpuTimes(1.0, 2.0), CpuTimes(1.25, 2.25), 0.5) == pytest.approx(1.0)
    assert share_between(CpuTimes(1.0, 2.0), CpuTimes(1.0, 2.5), 0.5) == 1.0  # all waiting
    assert share_between(CpuTimes(1.0), CpuTimes(1.0), 0.0) is None


def _proc(tmp_path, own: str, **theirs: str):
    """A /proc with ``autogroup`` files as the kernel shows them (empty: the root group)."""
    for pid, text in {"self": own, **theirs}.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "autogroup").write_text(text)
    return tmp_path


@pytest.mark.parametrize("own", ["", "/autogroup-7 nice 0\n"])
def test_an_autogroup_nice_is_written_whatever_our_own_group(tmp_path, own):
    """As on CI, where the test runner sits in the root autogroup (its file reads empty):
    the container's own session still gets the nice value."""
    from containers.cpu import set_autogroup_nice

    proc = _proc(tmp_path, own, **{"42": "/autogroup-9 nice 0\n"})
    assert set_autogroup_nice(42, -10, proc)
    assert (proc / "42" / "autogroup").read_text() == "-10"


def test_an_autogroup_nice_is_not_written_to_our_own_or_the_root_group(tmp_path):
    from containers.cpu import set_autogroup_nice

    ours, root = "/autogroup-7 nice 0\n", ""
    proc = _proc(tmp_path, ours, **{"42": ours, "43": root})
    assert not set_autogroup_nice(42, -10, proc)
    assert not set_autogroup_nice(43, -10, proc)
    assert not set_autogroup_nice(44, -10, proc)  # ended
    assert (proc / "42" / "autogroup").read_text() == ours
    assert (proc / "43" / "autogroup").read_text() == root


def test_a_running_thread_is_runnable_and_a_sleeping_process_is_not():
    """What tells a starved call (runnable, its wait not yet in schedstat) from a call
    asleep on I/O: the threads' state."""
    assert cpu.threads_runnable(cpu.threads_of([os.getpid()]))  # this thread runs now
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        for _ in range(100):  # until it has exec'd and sleeps
            if not cpu.threads_runnable(cpu.threads_of([sleeper.pid])):
                break
            time.sleep(0.01)
        assert not cpu.threads_runnable(cpu.threads_of([sleeper.pid]))
    finally:
        sleeper.kill()
        sleeper.wait()
