"""CPU shares from two readings of a container's CPU times."""

import pytest


def test_a_cpu_share_between_two_readings_leaves_out_the_wait():
    from containers.cpu import CpuTimes, share_between

    assert share_between(CpuTimes(1.0), CpuTimes(1.25), 0.5) == pytest.approx(0.5)
    assert share_between(CpuTimes(1.0, 2.0), CpuTimes(1.25, 2.25), 0.5) == pytest.approx(1.0)
    assert share_between(CpuTimes(1.0, 2.0), CpuTimes(1.0, 2.5), 0.5) == 1.0  # all waiting
    assert share_between(CpuTimes(1.0), CpuTimes(1.0), 0.0) is None
