"""The sandbox's uid pool (containers/runtimes/sandbox.py), the pure parts: which uids are
still alive, from their cgroups or else a scan of the host's processes."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from containers.runtimes import sandbox
from containers.runtimes.sandbox import SandboxError, UidPool, alive_uids

UNUSED = 4_000_000_123  # no process of a host runs as it


class Fake:
    """A liveness check: the uids in ``living`` are alive; records what it was asked."""

    def __init__(self) -> None:
        self.living: set[int] = set()
        self.asked: list[tuple[dict[int, list[str]], int, bool]] = []

    def __call__(self, held: dict[int, list[str]], step: int, scan: bool) -> set[int]:
        self.asked.append((dict(held), step, scan))
        return self.living & set(held)


def test_uids_are_reused_oldest_first() -> None:
    pool = UidPool(100, 4, alive=Fake())
    a, b, c = pool.take(), pool.take(), pool.take()
    assert (a, b, c) == (100, 101, 102)
    pool.give_back(a)
    pool.give_back(b)
    assert [pool.take(), pool.take(), pool.take()] == [103, a, b], "the longest free first"


def test_a_uid_waits_until_nothing_of_its_container_is_alive() -> None:
    alive = Fake()
    pool = UidPool(100, 2, alive=alive)
    a, b = pool.take(), pool.take()
    alive.living.add(a)  # a process of its pid namespace is still dying
    pool.give_back(a, ["/sys/fs/cgroup/memory/wsk0_1_guest"])
    assert alive.asked[-1][0] == {a: ["/sys/fs/cgroup/memory/wsk0_1_guest"]}, "its cgroup"
    with pytest.raises(SandboxError, match="1 waiting for their container's last process"):
        pool.take()
    pool.give_back(b)  # a release rechecks the quarantine too: b is free, a is not
    assert pool.take() == b
    alive.living.clear()
    assert pool.take() == a, "free once its container is empty"
    assert alive.asked[-1][0] == {a: ["/sys/fs/cgroup/memory/wsk0_1_guest"]}


def test_a_user_namespace_holds_two_uids_per_container() -> None:
    alive = Fake()
    pool = UidPool(1000, 6, step=2, alive=alive)
    assert [pool.take(), pool.take(), pool.take()] == [1000, 1002, 1004]
    pool.give_back(1001)  # not a container's first uid: ignored
    pool.give_back(999)  # not the pool's
    pool.give_back(1006)
    with pytest.raises(SandboxError):
        pool.take()
    pool.give_back(1002)
    assert alive.asked[-1][1] == 2, "the check looks at both of its uids"
    assert pool.take() == 1002


def test_no_uid_left_is_an_error() -> None:
    pool = UidPool(100, 2, alive=Fake())
    pool.take(), pool.take()
    with pytest.raises(SandboxError, match="all 2 container uids in use") as e:
        pool.take()
    assert e.value.errno == errno.EAGAIN


def test_a_proc_scan_at_most_once_a_second_unless_no_uid_is_free() -> None:
    alive = Fake()
    pool = UidPool(100, 4, alive=alive)
    a, b = pool.take(), pool.take()
    alive.living |= {a, b}
    pool.give_back(a)
    pool.give_back(b)
    pool.take(), pool.take()  # the last two free ones
    with pytest.raises(SandboxError):
        pool.take()
    assert [scan for *_, scan in alive.asked] == [True, False, False, False, True]


def cgroup(tmp_path: Path, name: str, files: dict[str, str]) -> str:
    d = tmp_path / name
    d.mkdir()
    for f, text in files.items():
        (d / f).write_text(text)
    return str(d)


def test_the_check_reads_the_cgroup_or_else_scans_the_hosts_processes(tmp_path: Path) -> None:
    me = os.getuid()  # this test runs as it
    unused = UNUSED
    assert me in sandbox._running_uids() and unused not in sandbox._running_uids()
    v2_busy = cgroup(tmp_path, "v2busy", {"cgroup.events": "populated 1\nfrozen 0\n"})
    v2_empty = cgroup(tmp_path, "v2empty", {"cgroup.events": "populated 0\nfrozen 0\n"})
    v1_busy = cgroup(tmp_path, "v1busy", {"cgroup.procs": "4242\n"})
    v1_empty = cgroup(tmp_path, "v1empty", {"cgroup.procs": ""})
    gone = str(tmp_path / "removed-by-the-backend")
    held = {1: [v2_busy], 2: [v2_empty], 3: [v1_busy], 4: [v1_empty], me: [gone], unused: []}
    assert alive_uids(held, 1) == {1, 3, me}, "a removed cgroup is no proof: the uid scan"
    assert alive_uids(held, 1, scan=False) == {1, 3, me, unused}, "unscanned: assumed alive"
    assert alive_uids({me - 1: [gone]}, 2) == {me - 1}, "either of a user namespace's uids"
