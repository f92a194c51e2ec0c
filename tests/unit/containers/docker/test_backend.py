"""A Docker container's CPU wait, read from its cgroup: v2's pressure file, else (a v1
hierarchy, as on hosts with the legacy layout) its processes' run-queue delay."""

from __future__ import annotations

import os
from pathlib import Path

from containers.docker.backend import _cgroup_waited


def test_v2_pressure_is_read_when_the_cgroup_has_it(tmp_path: Path) -> None:
    (tmp_path / "cpu.pressure").write_text(
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=2500000\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    (tmp_path / "cgroup.procs").write_text(f"{os.getpid()}\n")
    assert _cgroup_waited(tmp_path) == 2.5


def test_v1_falls_back_to_the_run_queue_delay_of_the_cgroups_processes(tmp_path: Path) -> None:
    (tmp_path / "cgroup.procs").write_text(f"{os.getpid()}\n")
    own = sum(
        int(Path(f"/proc/self/task/{t}/schedstat").read_text().split()[1])
        for t in os.listdir("/proc/self/task")
    )
    assert _cgroup_waited(tmp_path) >= own / 1e9 > 0  # this process has waited for a CPU


def test_no_processes_file_reads_as_no_wait(tmp_path: Path) -> None:
    assert _cgroup_waited(tmp_path) == 0.0
