"""The host as the suite found it: a session-level guard (a pytest plugin, tests/conftest.py).

At the session's start it takes a snapshot of what a test could leave behind on the machine
it runs on: the mount table, processes, network namespaces and interfaces, cgroups, uids in
use by processes, and ``/tmp``'s entries. At the end, after every fixture (the services too)
has been torn down, it takes another, waits a few seconds for what is still going away, and
fails the run, naming each difference, when the two differ. A mount that vanished counts as
much as one left behind: both were seen (a test's tmpfs over the host's ``/tmp``; a
sandbox's detach taking the host's mounts with it).

Processes count as the run's when they descend from pytest, carry this session's marker in
their environment, run as a container uid, or name the checkout in their command line; other
programs on the machine may come and go. The differences fail the run with
``OW_TEST_HOST_GUARD=strict`` (``scripts/test.sh`` sets it, so CI has it); otherwise they are
named at the end (two suites run at once on one machine see each other's). Entries of
``/tmp`` that other programs make while the suite runs can be named, as glob patterns, in
``OW_TEST_HOST_GUARD_IGNORE`` (space-separated).

``OW_TEST_HOST_GUARD_SCOPE=session`` narrows the guard to what tells a session's doing apart
from a neighbour's, for a session run beside others that change the host (the guard's own
tests, which run their sessions beside the suite's other lanes): its processes (its marker,
its descendants) and its temporary directory (``TMPDIR``); not mounts, network namespaces,
interfaces and cgroups, which carry no owner."""

from __future__ import annotations

import fnmatch
import os
import secrets
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARKER = "OW_TEST_SESSION"
CONTAINER_UIDS = range(1_500_000_000, 1_500_000_000 + 4096 * 1024)  # containers.process.claim's
SETTLE_S = 20.0  # how long what is going away (a service's last children) may take


@dataclass(frozen=True)
class Proc:
    pid: int
    start: int  # clock ticks since boot: a pid reused later is another process
    uid: int
    cmdline: str


@dataclass(frozen=True)
class Snapshot:
    mounts: Counter[tuple[str, str, str]]  # (mount point, type, source)
    procs: dict[tuple[int, int], Proc]
    netns: frozenset[str]
    links: frozenset[str]
    cgroups: frozenset[str]
    tmp: frozenset[str]


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _mounts() -> Counter[tuple[str, str, str]]:
    out: Counter[tuple[str, str, str]] = Counter()
    for line in _read("/proc/self/mountinfo").decode(errors="replace").splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) >= 5 and len(rest) >= 2:
            out[(fields[4], rest[0], rest[1])] += 1
    return out


def _procs() -> dict[tuple[int, int], Proc]:
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _read(f"/proc/{name}/stat").decode(errors="replace")
        try:
            start = int(stat.rsplit(")", 1)[1].split()[19])
            uid = os.stat(f"/proc/{name}").st_uid
        except (IndexError, ValueError, OSError):
            continue  # gone meanwhile
        cmd = _read(f"/proc/{name}/cmdline").replace(b"\0", b" ").decode(errors="replace")
        out[(int(name), start)] = Proc(int(name), start, uid, cmd.strip())
    return out


def _listdir(path: str) -> frozenset[str]:
    try:
        return frozenset(os.listdir(path))
    except OSError:
        return frozenset()


def _cgroups() -> frozenset[str]:
    found = []
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        found += (os.path.join(top, d) for d in dirs)
    return frozenset(found)


def take() -> Snapshot:
    return Snapshot(
        mounts=_mounts(),
        procs=_procs(),
        netns=_listdir("/run/netns") | _listdir("/var/run/netns"),
        links=_listdir("/sys/class/net"),
        cgroups=_cgroups(),
        tmp=_listdir(tempfile.gettempdir()),
    )


class HostGuard:
    def __init__(self, token: str, own_tmp: tuple[str, ...]) -> None:
        self.token = token
        self.own_tmp = own_tmp  # this run's entries of /tmp, removed before the last look
        self.ignore = os.environ.get("OW_TEST_HOST_GUARD_IGNORE", "").split()
        self.session_only = os.environ.get("OW_TEST_HOST_GUARD_SCOPE") == "session"
        self.before = take()
        self.gone: list[str] = []

    def _ours(self, p: Proc) -> bool:
        if p.pid == os.getpid():
            return False
        if not self.session_only and (p.uid in CONTAINER_UIDS or str(ROOT) in p.cmdline):
            return True
        if f"{MARKER}={self.token}".encode() in _read(f"/proc/{p.pid}/environ"):
            return True
        return self._descends(p.pid)

    @staticmethod
    def _descends(pid: int) -> bool:
        for _ in range(64):
            stat = _read(f"/proc/{pid}/stat").decode(errors="replace")
            try:
                pid = int(stat.rsplit(")", 1)[1].split()[1])
            except (IndexError, ValueError):
                return False
            if pid == os.getpid():
                return True
            if pid <= 1:
                return False
        return False

    def differences(self) -> list[str]:
        before, now = self.before, take()
        found = []
        if self.session_only:  # what carries no owner is left out (the module's doc)
            now = replace(
                now,
                mounts=before.mounts,
                netns=before.netns,
                links=before.links,
                cgroups=before.cgroups,
            )
        for m in sorted((now.mounts - before.mounts).elements()):
            found.append(f"a mount left behind: {m[0]} ({m[1]} {m[2]})")
        for m in sorted((before.mounts - now.mounts).elements()):
            found.append(f"a mount of the host's is gone: {m[0]} ({m[1]} {m[2]})")
        for key in sorted(now.procs.keys() - before.procs.keys()):
            p = now.procs[key]
            if self._ours(p):
                found.append(f"a process left running: pid {p.pid} uid {p.uid}: {p.cmdline[:200]}")
        for name in sorted(now.netns - before.netns):
            found.append(f"a network namespace left behind: {name}")
        for name in sorted(now.links - before.links):
            found.append(f"a network interface left behind: {name}")
        for name in sorted(before.links - now.links):
            found.append(f"a network interface of the host's is gone: {name}")
        for path in sorted(now.cgroups - before.cgroups):
            found.append(f"a cgroup left behind: {path}")
        own = {os.path.basename(p) for p in self.own_tmp}  # made by the run, removed at its end
        for name in sorted(now.tmp - before.tmp - own):
            if not any(fnmatch.fnmatch(name, pattern) for pattern in self.ignore):
                found.append(f"left in {tempfile.gettempdir()}: {name}")
        # An entry gone from /tmp is named but fails nothing: other programs remove their own
        # (a tmpfs over /tmp, which hides them all, is a mount left behind above).
        self.gone = [
            f"gone from {tempfile.gettempdir()}: {n}" for n in sorted(before.tmp - now.tmp - own)
        ]
        return found

    def settle(self) -> list[str]:
        """The differences that stay: what is still stopping gets ``SETTLE_S`` seconds."""
        deadline = time.monotonic() + SETTLE_S
        while (found := self.differences()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return found


_guard: HostGuard | None = None


def start(config: pytest.Config) -> bool:
    """From the first ``pytest_configure``, before the session's temporary directories exist:
    they go in directories of this run, removed at its end, and every child this session
    starts carries its marker. False for a pytest that a test runs (mutmut's), which the
    outer session's guards cover."""
    global _guard
    if config.option.collectonly or MARKER in os.environ:
        return False
    token = secrets.token_hex(8)
    os.environ[MARKER] = token
    own: list[str] = []
    if config.option.basetemp is None:
        config.option.basetemp = tempfile.mkdtemp(prefix="ow-tests-")
        own.append(config.option.basetemp)
    # A pytest that a test runs (mutmut's) keeps its temporary directories in one of this
    # run's too, not in /tmp/pytest-of-<user>.
    os.environ["PYTEST_DEBUG_TEMPROOT"] = tempfile.mkdtemp(prefix="ow-pytest-")
    own.append(os.environ["PYTEST_DEBUG_TEMPROOT"])
    # The simulator's runs, shared by the benchmarks and tests that make the same ones
    # (invoker.simulate.simulate): the heavy-tail tables, their bounds, the docs' rows.
    os.environ["OW_SIMULATION_CACHE"] = tempfile.mkdtemp(prefix="ow-simulations-")
    own.append(os.environ["OW_SIMULATION_CACHE"])
    if "OW_INVOKER_RUN_DIR" not in os.environ:
        # The invokers' host-wide lock and socket directory (containers.process.claim.lock_dir): one
        # of this run's, traversable by containers' uids as /run/ow-invoker is.
        run = tempfile.mkdtemp(prefix="ow-run-")
        os.chmod(run, 0o711)
        os.environ["OW_INVOKER_RUN_DIR"] = run
        own.append(run)
    _guard = HostGuard(token, tuple(own))
    return True


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After every fixture's teardown: remove this run's directories (the session's
    temporary one is kept when a test failed, for its files), then compare."""
    if _guard is None:
        return
    failed = exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    for path in _guard.own_tmp:
        if failed and path == str(session.config.option.basetemp):
            continue
        shutil.rmtree(path, ignore_errors=True)
    kept = [os.path.basename(p) for p in _guard.own_tmp if os.path.exists(p)]
    found = _guard.settle()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        if kept:
            reporter.write_line(f"[host guard] this failed run's files kept in {', '.join(kept)}")
        for line in _guard.gone:
            reporter.write_line(f"[host guard] {line} (not the run's doing, as far as it can tell)")
    if not found:
        return
    strict = os.environ.get("OW_TEST_HOST_GUARD") == "strict"
    if reporter is not None:
        reporter.section("the host differs from how the suite found it", sep="=", red=strict)
        for line in found:
            reporter.write_line(f"  {line}")
    if strict and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
