"""Parsing of /proc/self/cgroup and mountinfo, and the cgroup wrapper on plain directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from containers import cgroups
from containers.docker.calls_group import calls_group_parent
from containers.process.backend import nice_of

HYBRID_CGROUP = """\
9:name=systemd:/
4:memory:/process_api/abc
2:cpu,cpuacct:/
0::/
"""

MOUNTINFO = """\
25 30 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
27 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
28 25 0:25 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
29 30 8:1 /docker/xyz /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
"""


def test_parse_proc_cgroup() -> None:
    own = cgroups.parse_proc_cgroup(HYBRID_CGROUP)
    assert own["memory"] == "/process_api/abc"
    assert own["cpu"] == own["cpuacct"] == "/"
    assert own[""] == "/"


def test_parse_mountinfo() -> None:
    mounts = cgroups.parse_mountinfo(MOUNTINFO)
    assert mounts["memory"] == ("/sys/fs/cgroup/memory", "/")
    assert mounts["cpu"] == ("/sys/fs/cgroup/cpu,cpuacct", "/")
    assert mounts[""] == ("/sys/fs/cgroup/unified", "/")
    assert mounts["pids"] == ("/sys/fs/cgroup/pids", "/docker/xyz")


def test_cgroup_hierarchies_are_every_cgroup_mount_once_with_its_root() -> None:
    twice = MOUNTINFO + "31 30 0:23 / /mnt/memory\\040again rw - cgroup cgroup rw,memory\n"
    twice += "32 25 0:26 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n"
    assert cgroups.cgroup_hierarchies(twice) == [
        (Path("/sys/fs/cgroup/memory"), "/"),
        (Path("/sys/fs/cgroup/cpu,cpuacct"), "/"),
        (Path("/sys/fs/cgroup/unified"), "/"),
        (Path("/sys/fs/cgroup/pids"), "/docker/xyz"),  # a container's part only
        (Path("/sys/fs/cgroup/systemd"), "/"),  # named hierarchies too: engines use them
    ]


def test_the_docker_calls_group_needs_a_local_cgroupfs_engine() -> None:
    """Where the backend could not remove the group it leaves the engine's parent alone."""
    remote = calls_group_parent("wsk0", "cgroupfs", local=False)
    systemd = calls_group_parent("wsk0", "systemd", local=True)
    unknown = calls_group_parent("wsk0", "", local=True)
    assert remote == (None, "the engine is not on this host: its cgroups are not ours to remove")
    assert systemd == (None, "the engine's cgroup driver is systemd, not cgroupfs")
    assert unknown == (None, "the engine's cgroup driver is unknown, not cgroupfs")


def test_a_pid_whose_cgroup_does_not_name_the_container_is_not_its_cgroup() -> None:
    """The Docker backend writes a weight to the cgroup of the container's pid only if the
    cgroup names the container: a reused pid, or one seen from a pid namespace of our own,
    is another process (this one: its cgroup names no container)."""
    assert cgroups.engine_container_cgroup(os.getpid(), "4f1c0ffee") is None


def test_own_dir_strips_the_mount_root() -> None:
    assert cgroups._own_dir("/sys/fs/cgroup/pids", "/docker/xyz", "/docker/xyz/sub") == Path(
        "/sys/fs/cgroup/pids/sub"
    )
    assert cgroups._own_dir("/sys/fs/cgroup/memory", "/", "/a/b") == Path(
        "/sys/fs/cgroup/memory/a/b"
    )


def test_container_cgroup_reads_files(tmp_path: Path) -> None:
    mem = tmp_path / "memory" / "wsk0_1_guest_x"
    mem.mkdir(parents=True)
    (mem / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (mem / "cgroup.procs").write_text("12\n13\n")
    (mem / "tasks").write_text("12\n13\n14\n")
    cg = cgroups.ContainerCgroup(1, mem)
    assert cg.oom_kills() == 2
    assert cg.pids() == [12, 13]
    assert cg.threads() == [12, 13, 14]
    assert cg.procs_files == [str(mem / "cgroup.procs")]
    assert cgroups.ContainerCgroup.from_json(cg.to_json()) == cg
    v2 = cgroups.ContainerCgroup(2, mem)
    (mem / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    assert v2.oom_kills() == 1


def test_find_leftovers_matches_the_prefix_only(tmp_path: Path) -> None:
    mem, cpu = tmp_path / "memory", tmp_path / "cpu"
    group = cpu / cgroups.calls_group_name("wsk0")
    for name in ("wsk0_1_guest_a", "wsk0_spare_9_1", "wsk0_0_old", "wsk01_2_guest_b", "other"):
        (mem / name).mkdir(parents=True)
    (group / "wsk0_1_guest_a").mkdir(parents=True)
    (cpu / "wsk0_0_old").mkdir()  # beside the group: left by a run from before it
    support = cgroups.CgroupSupport(1, mem, group)
    found = {cg.memory.name: cg for cg in cgroups.find_leftovers(support, "wsk0")}
    assert set(found) == {"wsk0_1_guest_a", "wsk0_spare_9_1", "wsk0_0_old"}
    assert found["wsk0_1_guest_a"].cpu == group / "wsk0_1_guest_a"
    assert found["wsk0_0_old"].cpu == cpu / "wsk0_0_old"
    assert found["wsk0_spare_9_1"].cpu is None


def test_v2_leftovers_are_found_in_the_calls_group_and_beside_it(tmp_path: Path) -> None:
    group = tmp_path / cgroups.calls_group_name("wsk0")
    (group / "wsk0_1_guest_a").mkdir(parents=True)
    (tmp_path / "wsk0_0_old").mkdir()
    (tmp_path / "wsk01_0_other").mkdir()
    support = cgroups.CgroupSupport(2, group, group)
    found = {cg.memory for cg in cgroups.find_leftovers(support, "wsk0")}
    assert found == {tmp_path / "wsk0_0_old", group / "wsk0_1_guest_a"}


def test_the_calls_group_delegates_its_controllers_on_v2_and_goes_once_empty(
    tmp_path: Path,
) -> None:
    """On v2 the group's children get memory (and cpu) only if the group enables them;
    v1's hierarchies need no more than the directory. A directory tree stands in for the
    cgroup file system: the kernel's side is tried by the process backend's tests."""
    group = tmp_path / cgroups.calls_group_name("wsk0")
    support = cgroups.CgroupSupport(2, group, group)
    group.mkdir()
    (group / "cgroup.subtree_control").write_text("")
    cgroups.make_calls_group(support)
    assert (group / "cgroup.subtree_control").read_text() == "+memory +cpu"
    (group / "cgroup.subtree_control").write_text("memory cpu")
    cgroups.make_calls_group(support)  # a killed run's, already delegated: left as it is
    assert (group / "cgroup.subtree_control").read_text() == "memory cpu"
    (group / "cgroup.subtree_control").unlink()
    (group / "wsk0_1_guest_a").mkdir()
    assert not cgroups.remove_calls_group(support), "a container's cgroup is still in it"
    (group / "wsk0_1_guest_a").rmdir()
    assert cgroups.remove_calls_group(support)
    assert not group.exists()
    assert cgroups.remove_calls_group(support), "gone already"
    v1 = cgroups.CgroupSupport(1, tmp_path / "memory", tmp_path / "cpu" / "wsk0-calls")
    cgroups.make_calls_group(v1)
    assert v1.calls_group is not None and v1.calls_group.is_dir()
    assert cgroups.CgroupSupport(1, tmp_path / "memory").calls_group is None  # no cpu


def test_probe_reports_something() -> None:
    support = cgroups.probe("wskprobetest")
    assert support.usable or support.reason


def test_a_cpu_weight_is_written_as_v2_weight_or_v1_shares(tmp_path: Path) -> None:
    mem, cpu = tmp_path / "memory", tmp_path / "cpu"
    mem.mkdir()
    cpu.mkdir()
    (cpu / "cpu.shares").write_text("1024")
    assert cgroups.ContainerCgroup(1, mem, cpu).set_cpu_weight(10)
    assert (cpu / "cpu.shares").read_text() == "102"
    assert not cgroups.ContainerCgroup(1, mem).set_cpu_weight(10)  # no cpu hierarchy
    assert not cgroups.ContainerCgroup(2, mem).set_cpu_weight(10)  # cpu not delegated
    (mem / "cpu.weight").write_text("100")
    assert cgroups.ContainerCgroup(2, mem).set_cpu_weight(10_000)
    assert (mem / "cpu.weight").read_text() == "10000"


def test_cpu_weights_map_to_shares_as_the_kernel_does() -> None:
    assert cgroups.cpu_shares_of(cgroups.DEFAULT_CPU_WEIGHT) == 1024
    assert [cgroups.cpu_shares_of(w) for w in (1, 50, 10_000)] == [10, 512, 102_400]
    for bad in (0, 10_001, -1):
        with pytest.raises(ValueError, match=r"cpu\.weight"):
            cgroups.check_cpu_weight(bad)


def test_without_a_cpu_controller_a_weight_is_the_nice_value_of_the_same_cfs_weight() -> None:
    assert [nice_of(w) for w in (1, 10, 100, 1000, 10_000)] == [19, 10, 0, -10, -20]
