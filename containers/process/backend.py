"""The process backend: action containers as local processes instead of Docker containers.

One *zygote* (``runtimes/python_runtime.py zygote``) per backend forks every container:
``python:*`` containers are forks of the pre-warmed interpreter (cold start of a few ms),
``nodejs:*`` containers are the same prepared child exec'ing ``node -`` with
``node_runtime.js`` on its stdin.

**Sandboxed** (the default, ``sandbox=True``; needs root): each container enters, before any
action code runs, a pid, mount, network, IPC, UTS and cgroup namespace of its own on a
read-only tmpfs root, as a host uid of its own, without capabilities, with ``no_new_privs``
and a seccomp filter; its runtime listens on a Unix socket in the invoker's private
directory; outbound connections go through slirp4netns (``network="outbound"``) with the
host's loopback out of reach, or nowhere (``"none"``). See :mod:`containers.runtimes.sandbox`
and docs/security.md.

Each container has

- a directory ``<state_dir>/<name>/`` (0700, in a 0700 state dir) holding ``log.json``
  (Docker json-file lines, written by the zygote from the child's fd 1/2) and
  ``container.json`` (pid, start time, cgroup: what :meth:`remove_leftovers` needs);
  unsandboxed, also ``work/`` (cwd and HOME) and ``tmp/`` (TMPDIR, bind-mounted on ``/tmp``
  in a private mount namespace when running as root);
- its own session/process group (pause = SIGSTOP of the group and of its cgroup's
  processes, destroy = SIGKILL);
- a memory cgroup named after it (see :mod:`containers.cgroups`), or ``RLIMIT_AS`` /
  ``--max-old-space-size`` when cgroups are not usable;
- an environment of only PATH, HOME, LANG, TMPDIR/TEMP/TMP and the spec's ``env``; the zygote
  itself starts with a minimal environment, so nothing of the invoker's leaks through
  ``/proc/self/environ`` either.

When the invoker dies, the zygote gets EOF/SIGTERM (PR_SET_PDEATHSIG) and kills every
container; containers get SIGKILL if the zygote dies.

Unsandboxed (``sandbox=False``, ``--sandbox none``): actions run as the invoker's user and can
see the host. ``user=`` runs them as another user (e.g. ``nobody``), which keeps them from
signalling the invoker or reading its ``/proc/<pid>/environ``, provided the interpreters and
their libraries are readable by it (the python runtime is already loaded in the zygote, the
node runtime comes on stdin, the log and the listening socket are file descriptors, and the
working directory is entered before the switch).

Restarts: container names carry the pool's per-run generation and spare cgroups the zygote's
run tag, so a new run never needs a name a killed run still holds; :meth:`remove_leftovers`
kills everything left at once and removes in the background the cgroups whose processes are
still exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
import math
import os
import pwd
import re
import shutil
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from containers import cgroups, cpu, memory
from containers.backend import (
    ContainerError,
    ContainerGone,
    ContainerSpec,
    HttpResult,
    LogLine,
)
from containers.http import DEFAULT_MAX_RESPONSE_BYTES, RuntimeClient
from containers.logfile import LogFile, LogWatcher
from containers.process.claim import PrefixClaim, UidBlockClaim, own_dir, sandbox_dir
from containers.process.settings import NETWORKS
from containers.runtimes import sandbox
from whisk.manifest import BLACKBOX
from whisk.protocol import json
from whisk.supervisor import spawn

log = logging.getLogger(__name__)

RUNTIMES_DIR = Path(__file__).resolve().parents[1] / "runtimes"
PYTHON_RUNTIME = RUNTIMES_DIR / "python_runtime.py"
NODE_RUNTIME = RUNTIMES_DIR / "node_runtime.js"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MARKER_VAR = "OW_PROCESS_BACKEND"
META_FILE = "container.json"
LOG_FILE = "log.json"
HOST = "127.0.0.1"
LEFTOVER_GRACE_S = 0.5  # how long start-up waits for a previous run's processes to exit
BUSY_WARN_S = 60.0  # a leftover cgroup still busy this long is worth a warning
CLOSE_REAP_S = 10.0  # how long close() waits for busy cgroups before leaving them behind
SLIRP_DNS = "10.0.2.3"
GPU_CLIENT = ("__init__.py", "client.py", "protocol.py")  # what a GPU action imports


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _family(kind: str) -> str:
    return kind.split(":", 1)[0]


def process_start_time(pid: int) -> int | None:
    """Start time of a process (clock ticks since boot): with the pid, identifies it for sure."""
    fields = cpu.stat_fields(f"/proc/{pid}/stat")
    try:
        return None if fields is None else int(fields[19])
    except (IndexError, ValueError):
        return None


def _is_ours(pid: int, start_time: int | None, prefix: str) -> bool:
    """Only a live process with the recorded start time and our marker on its command line."""
    if pid <= 1 or start_time is None or process_start_time(pid) != start_time:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    runtime = PYTHON_RUNTIME.name.encode() in cmdline or NODE_RUNTIME.name.encode() in cmdline
    return runtime and b"\0--marker\0" + prefix.encode() + b"\0" in cmdline


def _resolve_user(user: str | int | None) -> tuple[int, int] | None:
    """(uid, gid) of a user name or uid; None keeps the invoker's own user."""
    if user is None:
        return None
    entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def _unreachable(directory: Path, uid: int, gid: int) -> Path | None:
    """The first of ``directory`` and its parents that ``uid``/``gid`` (no supplementary
    groups, as actions run) may not traverse, or None."""
    for d in (*reversed(directory.parents), directory):
        try:
            st = d.stat()
        except OSError:
            return d
        bit = (
            stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid == gid else stat.S_IXOTH
        )
        if uid != 0 and not st.st_mode & bit:
            return d
    return None


def _subordinate(path: str, user: str, uid: int) -> tuple[int, int] | None:
    """(first, count) of the user's largest range in /etc/subuid or /etc/subgid."""
    best: tuple[int, int] | None = None
    try:
        with open(path) as f:
            for line in f:
                name, _, rest = line.strip().partition(":")
                first, _, count = rest.partition(":")
                ours = name in (user, str(uid)) and first.isdigit() and count.isdigit()
                if ours and (best is None or int(count) > best[1]):
                    best = int(first), int(count)
    except OSError:
        return None
    return best


def _kill_group(pid: int) -> None:
    if pid <= 1:
        return
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)


class ZygoteExited(ContainerError):
    """The zygote's channel closed: it exited, and its containers with it."""


class _Zygote:
    """The zygote process and its JSON-lines control channel."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, tag: str) -> None:
        self.argv, self.env, self.cwd = argv, env, cwd
        self.tag = tag  # unique per zygote: its spares' cgroups are <prefix>_spare_<tag>_<n>
        self.proc: asyncio.subprocess.Process | None = None
        self.pid = 0
        self._seq = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[dict[str, Any]] | None = None
        self.on_exit: Any = None  # callable(pid, status)
        self.on_gone: Any = None  # callable()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and self._reader is not None

    async def start(self, timeout_s: float) -> dict[str, Any]:
        """Start the zygote; its ``ready`` event (with ``sandbox_error`` if a probe sandbox
        could not be built)."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,  # terminal signals are not for it: it follows our lifetime
        )
        self.pid = self.proc.pid
        if not cpu.leave_special_classes(self.pid):
            log.warning("the zygote keeps our scheduling class: CPU weights may do nothing")
        self._reader = spawn(self._read(), name="zygote-reader")
        try:
            async with asyncio.timeout(timeout_s):
                return await self._ready
        except BaseException:
            await self.stop()
            raise

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while line := await self.proc.stdout.readline():
                msg = json.loads(line)
                if (mid := msg.get("id")) is not None:
                    fut = self._pending.pop(mid, None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
                    elif fut is None and "pid" in msg:  # the caller gave up waiting
                        _kill_group(int(msg["pid"]))
                elif msg.get("event") == "exit" and self.on_exit is not None:
                    self.on_exit(int(msg["pid"]), int(msg["status"]))
                elif msg.get("event") == "ready" and self._ready and not self._ready.done():
                    self._ready.set_result(msg)
        except Exception as e:  # a garbled channel is as bad as a dead zygote
            log.error("zygote channel failed: %s", e)
        finally:
            self._reader = None
            err = ZygoteExited("the process backend's zygote exited")
            for fut in (*self._pending.values(), self._ready):
                if fut is not None and not fut.done():
                    fut.set_exception(err)
            self._pending.clear()
            if self.on_gone is not None:
                self.on_gone()

    async def spawn(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if not self.alive or self.proc is None or self.proc.stdin is None:
            raise ContainerError("the process backend's zygote is not running")
        self._seq += 1
        req["id"] = self._seq
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._seq] = fut
        self.proc.stdin.write(json.dumps(req) + b"\n")
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(fut)
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                _kill_group(int(fut.result().get("pid") or 0))  # spawned, but nobody wants it
            raise
        finally:
            self._pending.pop(req["id"], None)  # a late answer's process is killed

    async def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        try:
            async with asyncio.timeout(3.0):
                await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await self._reader


def nice_of(weight: int) -> int:
    """The nice value whose CFS weight is closest to a cgroup CPU weight (nice 0 = weight
    100; each step is a factor 1.25), within -20..19."""
    return max(-20, min(19, round(-math.log(cgroups.check_cpu_weight(weight) / 100, 1.25))))


class ProcessContainer:
    """One action runtime process (see the module docstring)."""

    def __init__(
        self,
        name: str,
        kind: str,
        directory: Path,
        pid: int,
        port: int,
        cgroup: cgroups.ContainerCgroup | None,
        socket_path: str | None = None,
        *,
        log_watcher: LogWatcher,
        on_removed: Callable[[ProcessContainer], None],
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.name = name
        self.kind = kind
        self.dir = directory
        self.pid = pid
        self.port = port  # 0 when sandboxed: the runtime listens on socket_path instead
        self.socket_path = socket_path
        self.cgroup = cgroup
        self.exit_status: int | None = None  # set when the zygote reports the exit
        # Set by destroy when the cgroup's processes were still exiting: the backend's to reap.
        self.busy_cgroup: cgroups.ContainerCgroup | None = None
        self._on_removed = on_removed  # the backend's hook, called once by destroy
        self._client = RuntimeClient(HOST, port, max_response_bytes, unix_path=socket_path)
        self._log = LogFile(directory / LOG_FILE, log_watcher, trim=True)
        self._cores: frozenset[int] | None = None
        self._weight: int | None = None  # as created (the spec's cpu_shares) until set
        self._paused = False
        self._destroyed = False
        self._oom: bool | None = None

    @property
    def address(self) -> tuple[str, int]:
        return HOST, self.port

    def _check(self) -> None:
        if self._destroyed:
            raise ContainerGone(f"container {self.name} was destroyed")

    async def init(self, body: bytes, timeout_s: float) -> HttpResult:
        self._check()
        return await self._client.post_init(body, timeout_s)

    async def run(self, body: bytes, timeout_s: float) -> HttpResult:
        self._check()
        return await self._client.post_run(body, timeout_s)

    async def assign_cores(self, cores: frozenset[int]) -> None:
        """Pin every thread of the container (descendants included) to ``cores``."""
        self._check()
        if not cores:
            raise ValueError("assign_cores needs at least one core")
        if cores == self._cores:
            return  # threads and children created since inherited the same mask
        for tid in self._all_threads():
            try:
                os.sched_setaffinity(tid, cores)
            except ProcessLookupError:
                pass  # a thread that just ended
            except OSError as e:
                raise ContainerError(f"cannot pin {self.name} to cores {sorted(cores)}: {e}") from e
        self._cores = cores

    async def cpu_times(self) -> cpu.CpuTimes | None:
        """The container cgroup's CPU accounting (v2), else its processes' (10 ms ticks)."""
        if self._destroyed:
            return None
        if self.cgroup is not None and self.cgroup.version == 2:
            used = cpu.read_cgroup_cpu(self.cgroup.memory / "cpu.stat")
            if used is not None:
                waited = cpu.read_cgroup_pressure(self.cgroup.memory / "cpu.pressure")
                if waited is not None:
                    return cpu.CpuTimes(used, waited)
                threads = self._threads()
                waited = cpu.threads_waited_seconds(threads)
                return cpu.CpuTimes(used, waited, runnable=cpu.threads_runnable(threads))
        threads = self._threads()
        used = cpu.processes_cpu_seconds(threads)
        if used is None:
            return None
        waited = cpu.threads_waited_seconds(threads)
        runnable = cpu.threads_runnable(threads)
        return cpu.CpuTimes(used, waited, tick=1 / cpu.TICK, runnable=runnable)

    def _threads(self) -> dict[int, list[int]]:
        """The container's processes (its cgroup's, else its process tree) with their
        threads, listed once per CPU reading."""
        pids = self.cgroup.pids() if self.cgroup is not None else []
        return (cpu.threads_of(pids) if pids else {}) or cpu.process_threads(self.pid)

    async def read_logs(
        self, limit_bytes: int, wait_for_sentinels: bool
    ) -> tuple[list[LogLine], bool]:
        if self._destroyed:  # its log went with it
            return [], not wait_for_sentinels
        return await self._log.read(limit_bytes, wait_for_sentinels)

    async def set_cpu_weight(self, weight: int) -> None:
        """The container cgroup's CPU weight, else (no CPU controller) the nice value of
        the same weight on each of its threads (threads and children made later inherit
        it) and on its session's autogroup: with autogroups on, the kernel weighs sessions
        first and nice only within one, and the container is a session of its own. Each
        thread is put in the normal class first: SCHED_IDLE ignores nice values, and a
        container may have been forked in it (the zygote's own reset can come too late)."""
        self._check()
        if weight == self._weight:
            return
        try:
            if self.cgroup is None or not self.cgroup.set_cpu_weight(weight):
                nice = nice_of(weight)
                for tid in self._all_threads():
                    if not cpu.leave_special_classes(tid):
                        raise PermissionError("no CAP_SYS_NICE to leave SCHED_IDLE")
                    with contextlib.suppress(ProcessLookupError):  # a thread that just ended
                        os.setpriority(os.PRIO_PROCESS, tid, nice)
                cpu.set_autogroup_nice(self.pid, nice)
        except OSError as e:
            raise ContainerError(f"cannot set the CPU weight of {self.name}: {e}") from e
        self._weight = weight

    def _all_threads(self) -> list[int]:
        tids = self.cgroup.threads() if self.cgroup is not None else []
        return tids or [t for ts in cpu.process_threads(self.pid).values() for t in ts]

    async def memory_usage(self) -> int | None:
        """The working set of its cgroup, else its processes' resident memory."""
        if self._destroyed:
            return None
        if self.cgroup is not None:
            used = memory.cgroup_working_set(self.cgroup.memory, self.cgroup.version)
            if used is not None:
                return used
        return memory.resident_bytes(self._threads())

    async def pause(self) -> None:
        self._check()
        self._signal_group(signal.SIGSTOP)
        self._paused = True

    async def resume(self) -> None:
        self._check()
        self._signal_group(signal.SIGCONT)
        self._paused = False

    def _signal_group(self, sig: int) -> None:
        """The process group, and every process of the cgroup: one the action moved to a
        session of its own is paused (and resumed) too. Two passes for a fork in between."""
        if self.exit_status is not None:
            raise ContainerGone(f"container {self.name} exited ({self.exit_status})")
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError as e:
            raise ContainerGone(f"container {self.name} is gone") from e
        if self.cgroup is not None:
            for _ in range(2):
                for pid in self.cgroup.pids():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)

    async def was_oom_killed(self) -> bool:
        if self._oom is not None:
            return self._oom
        return self.cgroup is not None and self.cgroup.oom_kills() > 0

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        try:
            self._client.close()
            self._log.close()
            if self.cgroup is not None:
                self._oom = self.cgroup.oom_kills() > 0
            if self.exit_status is None:  # once reaped, the pid may belong to someone else
                _kill_group(self.pid)
            if self.cgroup is not None and not await _remove_cgroup(self.cgroup, warn=False):
                self.busy_cgroup = self.cgroup  # never left behind while the backend runs
            await asyncio.to_thread(shutil.rmtree, self.dir, ignore_errors=True)
        except Exception as e:
            log.warning("destroying container %s: %s", self.name, e)
        finally:
            self._on_removed(self)


async def _remove_cgroup(
    cg: cgroups.ContainerCgroup, timeout_s: float = 5.0, warn: bool = True
) -> bool:
    """Kill what is left in the cgroup and remove it, waiting for the processes to exit."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    delay = 0.001
    while True:
        cg.kill_all()
        if cg.remove():
            return True
        if loop.time() >= deadline:
            if warn:
                log.warning("cgroup %s still busy; left behind", cg.memory)
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


class ProcessBackend:
    """Containers as local processes forked by a zygote (see the module docstring).

    ``state_dir`` holds the container directories (the private ``/tmp`` needs it outside
    ``/tmp``); ``name_prefix`` is the invoker's container-name prefix (``wsk0`` ...);
    ``python`` runs the zygote and the ``python:*`` actions (default: this interpreter);
    ``node`` runs ``nodejs:*`` actions (default: ``node`` on PATH). Options: ``use_cgroups``,
    ``private_tmp`` (a mount namespace with the container's ``tmp/`` on ``/tmp``),
    ``zygote_fork`` (False: a fresh interpreter per python container, the slow baseline),
    ``max_response_bytes`` (of a runtime's answer kept), ``nofile`` (RLIMIT_NOFILE), ``user``
    (run actions as this user), ``spares`` (children the zygote forks ahead of demand),
    ``network_deny``/``network_allow`` (IPv4 prefixes sandboxed actions may not reach, and
    may even so; the node's own addresses and link-local are refused unless allowed)."""

    name = "process"

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        name_prefix: str,
        python: str | None = None,
        node: str | None = None,
        *,
        use_cgroups: bool = True,
        private_tmp: bool = True,
        zygote_fork: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        nofile: int = 1024,
        user: str | int | None = None,
        spares: int = 2,
        spawn_timeout_s: float = 30.0,
        sandbox: bool = True,
        network: str = "outbound",
        pids_limit: int = 1024,
        host_ports: tuple[int, ...] = (),
        network_deny: tuple[str, ...] = (),
        network_allow: tuple[str, ...] = (),
    ) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name_prefix):
            raise ValueError(f"bad name prefix {name_prefix!r}")
        self.state_dir = Path(state_dir).resolve()
        self.name_prefix = name_prefix
        self.python = python or sys.executable
        self.node = node or shutil.which("node")
        self.use_cgroups = use_cgroups
        self.private_tmp = private_tmp
        self.zygote_fork = zygote_fork
        self.max_response_bytes = max_response_bytes
        self.nofile = nofile
        self.spares = spares
        self.user = _resolve_user(user)
        if self.user is not None and os.geteuid() not in (0, self.user[0]):
            raise ValueError(f"running actions as user {user!r} needs the invoker to run as root")
        self.spawn_timeout_s = spawn_timeout_s
        if network not in NETWORKS:
            raise ValueError(f"action network {network!r}: choose {' or '.join(NETWORKS)}")
        self.sandbox = sandbox
        self.network = network
        self.pids_limit = pids_limit
        self.host_ports = host_ports
        # Besides the node's addresses and link-local (sandbox.ALWAYS_DENIED): a.b.c.d/n.
        self.network_deny, self.network_allow = (
            tuple(str(ipaddress.IPv4Network(p, strict=False)) for p in prefixes)
            for prefixes in (network_deny, network_allow)
        )
        self._shared: dict[str, str] = {}  # inside path -> host path, e.g. the GPU pool
        self._uids: UidBlockClaim | None = None
        self._rootless: tuple[tuple[int, int], tuple[int, int]] | None = None
        self._tools: tuple[str, str] = ("newuidmap", "newgidmap")
        self.cgroup_support = cgroups.CgroupSupport(0, reason="not probed yet")
        self._probed = False
        self.log_watcher = LogWatcher()
        self._zygote: _Zygote | None = None
        self._containers: dict[str, ProcessContainer] = {}
        self._by_pid: dict[int, ProcessContainer] = {}
        self._early_exits: dict[int, int] = {}
        self._start_lock = asyncio.Lock()
        self._closed = False
        self._busy: dict[Path, cgroups.ContainerCgroup] = {}  # leftovers still exiting
        self._claim: PrefixClaim | None = None  # this prefix is ours on the host while we run
        self._reaper: asyncio.Task[None] | None = None

    # -- ContainerBackend --------------------------------------------------------------------

    @property
    def weights_among_calls(self) -> bool:
        """In the calls group (:mod:`containers.cgroups`); not when weights are nice values."""
        return self.cgroup_support.calls_group is not None

    def supports(self, kind: str) -> bool:
        family = _family(kind)
        return family == "python" or (family == "nodejs" and self.node is not None)

    async def start(self) -> None:
        if self._claim is None:
            self._claim = PrefixClaim(self.name_prefix)  # before anything is removed
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o700)  # logs and sockets of every tenant's containers
        if self.sandbox:
            self._check_sandbox()
        else:
            log.warning(
                "--sandbox none: actions run unsandboxed, as the invoker's user (or "
                "--action-user), and can see the host's processes, files and loopback"
            )
        if self.use_cgroups:
            if not self._probed:
                self.cgroup_support = await asyncio.to_thread(cgroups.probe, self.name_prefix)
                self._probed = True
            if not self.cgroup_support.usable:
                log.warning(
                    "cgroups unusable (%s): memory limits fall back to RLIMIT_AS",
                    self.cgroup_support.reason,
                )
        else:
            self.cgroup_support = cgroups.CgroupSupport(0, reason="disabled by configuration")
        if self.private_tmp and (os.geteuid() != 0 or self._under_tmp()):
            log.info(
                "no private /tmp per container (needs root, and the state dir and the "
                "project outside /tmp)"
            )
            self.private_tmp = False
        if self.user is not None and (blocked := _unreachable(self.state_dir, *self.user)):
            log.warning(
                "the action user (uid %d) cannot traverse %s: actions run (their working "
                "directory is entered before the switch), but absolute paths under %s (HOME, "
                "TMPDIR, unpacked zip actions) are out of their reach",
                self.user[0], blocked, self.state_dir,
            )  # fmt: skip
        await self._ensure_zygote()

    async def create(self, spec: ContainerSpec) -> ProcessContainer:
        if spec.kind == BLACKBOX:
            raise ValueError(
                f"blackbox actions (image {spec.image!r}) need the docker backend; this "
                "invoker runs the process backend, which has no container images"
            )
        if not self.supports(spec.kind):
            raise ValueError(f"the process backend cannot run kind {spec.kind!r}")
        if self._closed:
            raise ContainerError("the process backend is closed")
        zygote = await self._ensure_zygote()
        dirname = _safe_name(spec.name)
        if not dirname.startswith(self.name_prefix + "_"):
            dirname = f"{self.name_prefix}_{dirname}"
        cdir = self.state_dir / dirname
        work, tmp = cdir / "work", cdir / "tmp"
        cg: cgroups.ContainerCgroup | None = None
        try:
            if cdir.exists():
                await self._remove_leftover_dir(cdir)
            cdir.mkdir(mode=0o700)
            if not self.sandbox:  # sandboxed, both are tmpfs mounts of the container's own
                work.mkdir()
                tmp.mkdir()
            if self.user is not None:
                for d in (work, tmp):
                    os.chown(d, *self.user)
            self._write_meta(cdir, None, None, None, spec.kind)
            req = self._spawn_request(spec, dirname, cdir)
            try:
                reply = await zygote.spawn(req, self.spawn_timeout_s)
            except ZygoteExited:
                # It died (killed, crashed) before it answered, its children with it, and
                # the death was seen only now: the request made nothing. A fresh zygote
                # takes it; a create never fails on a zygote already dead.
                zygote = await self._ensure_zygote()
                reply = await zygote.spawn(req, self.spawn_timeout_s)
            if "error" in reply:
                raise ContainerError(f"spawning {spec.name}: {reply['error']}")
            if reply.get("cgroup"):
                cg = cgroups.ContainerCgroup.from_json(reply["cgroup"])
        except BaseException as e:
            if cg is not None:
                await _remove_cgroup(cg, 1.0)
            shutil.rmtree(cdir, ignore_errors=True)
            if isinstance(e, (ContainerError, asyncio.CancelledError)):
                raise
            raise ContainerError(f"Failed to provision resources to run the action: {e}") from e
        pid, port = int(reply["pid"]), int(reply["port"])
        self._write_meta(cdir, pid, process_start_time(pid), cg, spec.kind)
        container = ProcessContainer(
            spec.name,
            spec.kind,
            cdir,
            pid,
            port,
            cg,
            reply.get("socket"),
            log_watcher=self.log_watcher,
            on_removed=self._removed,
            max_response_bytes=self.max_response_bytes,
        )
        self._containers[spec.name] = container
        if pid in self._early_exits:
            container.exit_status = self._early_exits.pop(pid)
        else:
            self._by_pid[pid] = container
        return container

    def share_socket(self, path: str) -> None:
        if self.sandbox:
            # Sandboxes run as uids of their own: the socket must let them connect (its
            # directory, 0700, still keeps it from everyone outside a container).
            os.chmod(path, 0o666)
            self._shared[path] = path

    async def remove_leftovers(self) -> int:
        """Destroy this backend's containers, then whatever a previous run left behind:
        processes (verified by start time and command-line marker), directories, cgroups.

        Everything is killed at once; a cgroup whose processes are still exiting after
        ``LEFTOVER_GRACE_S`` is removed in the background instead of holding up start-up
        (this run's container names never collide with a previous run's)."""
        if self.use_cgroups and not self._probed:
            self.cgroup_support = await asyncio.to_thread(cgroups.probe, self.name_prefix)
            self._probed = True
        removed: set[str] = set()
        for c in list(self._containers.values()):
            await c.destroy()
            removed.add(c.dir.name)
        zygote = self._zygote
        own_zygote = zygote.pid if zygote is not None else 0
        found: dict[Path, cgroups.ContainerCgroup] = {}
        if self.state_dir.is_dir():
            for f in self.state_dir.glob(f"{self.name_prefix}.zygote.*.json"):
                meta = self._read_json(f)
                pid = int(meta.get("pid") or 0)
                if pid != own_zygote:
                    if _is_ours(pid, meta.get("start_time"), self.name_prefix):
                        _kill_group(pid)
                    f.unlink(missing_ok=True)
            for d in list(self.state_dir.iterdir()):
                if d.is_dir() and d.name.startswith(self.name_prefix + "_"):
                    if (cg := self._kill_leftover(d)) is not None:
                        found[cg.memory] = cg
                    await asyncio.to_thread(shutil.rmtree, d, ignore_errors=True)
                    removed.add(d.name)
        live_spares = f"{self.name_prefix}_spare_{zygote.tag}_" if zygote is not None else None
        for cg in cgroups.find_leftovers(self.cgroup_support, self.name_prefix):
            if live_spares and cg.memory.name.startswith(live_spares):
                continue  # the running zygote's own spares
            found.setdefault(cg.memory, cg)
            removed.add(cg.memory.name)
        await self._remove_cgroups(list(found.values()))
        if zygote is None and not self._busy:  # a clean-up, not a running backend's
            cgroups.remove_calls_group(self.cgroup_support)
        spares = (f"{self.name_prefix}_spare_", f"{self.name_prefix}_probe_")
        return sum(1 for name in removed if not name.startswith(spares))

    async def _remove_cgroups(self, found: list[cgroups.ContainerCgroup]) -> None:
        """Kill and remove leftover cgroups, all at once; those still busy after a short grace
        go to the background reaper (while the backend runs) or are left behind (closed)."""
        if not found:
            return
        grace = 2.0 if self._closed else LEFTOVER_GRACE_S
        done = await asyncio.gather(*(_remove_cgroup(cg, grace, warn=False) for cg in found))
        self._reap_later([cg for cg, ok in zip(found, done, strict=True) if not ok])

    def _reap_later(self, busy: list[cgroups.ContainerCgroup]) -> None:
        """Cgroups whose processes are still exiting (a loaded machine, a frozen task):
        removed by the background reaper while the backend runs, named when left behind
        at its close. A destroyed container's cgroup used to be left behind after 5 s: one
        cgroup more for each slow exit, for as long as the invoker ran."""
        if not busy:
            return
        self._busy.update((cg.memory, cg) for cg in busy)
        if self._closed:
            return  # close() gives them their last CLOSE_REAP_S
        names = ", ".join(cg.memory.name for cg in busy)
        log.info("cgroups still busy (processes exiting), removed later: %s", names)
        if self._reaper is None or self._reaper.done():
            self._reaper = spawn(self._reap_busy(), name="process-cgroup-reaper")

    async def _last_reap(self) -> None:
        """At close, the busy cgroups get ``CLOSE_REAP_S`` more (their processes were killed:
        on a loaded machine they can take seconds to exit); what is still busy then is
        named, and removed by the next start with this prefix."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLOSE_REAP_S
        while self._sweep_busy() and loop.time() < deadline:  # noqa: ASYNC110 (polls cgroups)
            await asyncio.sleep(0.1)
        if self._busy:
            names = ", ".join(str(p.name) for p in self._busy)
            log.warning("cgroups still busy at close, left to the next start: %s", names)

    def _sweep_busy(self) -> bool:
        """Kill what is in each busy cgroup and remove those now empty; whether any is left."""
        for key, cg in list(self._busy.items()):
            cg.kill_all()
            if cg.remove():
                del self._busy[key]
        return bool(self._busy)

    async def _reap_busy(self) -> None:
        """Retry the busy leftover cgroups (killing what is in them) with backoff until they go."""
        delay, waited, warned = 0.05, 0.0, False
        while self._busy:
            await asyncio.sleep(delay)
            waited += delay
            if self._sweep_busy() and waited >= BUSY_WARN_S and not warned:
                warned = True
                log.warning(
                    "leftover cgroups still busy after %.0f s (processes that cannot exit?): %s",
                    waited, ", ".join(str(p) for p in self._busy),
                )  # fmt: skip
            delay = min(delay * 2, 2.0)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(c.destroy() for c in list(self._containers.values())))
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
        if self._zygote is not None:
            zygote, self._zygote = self._zygote, None
            await zygote.stop()
            await self._remove_spares_of(zygote)  # their cgroups outlived them, at every close
        await self._last_reap()
        if not self._busy and not cgroups.remove_calls_group(self.cgroup_support):
            log.warning("the calls' cgroup %s is not empty; left", self.cgroup_support.calls_group)
        self.log_watcher.close()
        if self.sandbox:
            for d in (self._socket_dir(), self._sandbox_dir()):
                shutil.rmtree(d, ignore_errors=True)
        if self._claim is not None:
            self._claim.release()
            self._claim = None
        if self._uids is not None:
            self._uids.release()
            self._uids = None

    # -- internals ---------------------------------------------------------------------------

    def _check_sandbox(self) -> None:
        """What the sandbox needs, refused with one clear line each."""
        if os.geteuid() != 0:
            self._check_rootless()
        if self.user is not None:
            raise ValueError("--action-user is for --sandbox none: sandboxed containers "
                             "each run as a uid of their own")  # fmt: skip
        if self.network == "outbound" and shutil.which("slirp4netns") is None:
            raise ContainerError(
                "outbound networking for sandboxed actions needs slirp4netns (apt-get "
                "install slirp4netns), or --action-network none"
            )
        if self._uids is None:
            self._uids = UidBlockClaim(*self._rootless) if self._rootless else UidBlockClaim()

    def _check_rootless(self) -> None:
        """A non-root invoker: user namespaces, uids from its subordinate ranges."""
        user = pwd.getpwuid(os.geteuid()).pw_name
        tools = [shutil.which(t) for t in ("newuidmap", "newgidmap")]
        subuid, subgid = (_subordinate(f"/etc/sub{k}", user, os.geteuid()) for k in ("uid", "gid"))
        if None in tools or subuid is None or subgid is None:
            raise ContainerError(
                f"the process backend's sandbox, as a non-root invoker ({user}), needs user "
                "namespaces with subordinate ids: apt-get install uidmap, then give the user "
                f"a range (usermod --add-subuids 2000000-2065535 --add-subgids "
                f"2000000-2065535 {user}); or run it as root, or use --backend docker, or "
                "--sandbox none (unsafe: actions are not isolated)"
            )
        self._rootless = (subuid, subgid)
        self._tools = (str(tools[0]), str(tools[1]))

    def _sandbox_settings(self) -> dict[str, Any]:
        """The zygote's sandbox settings: what is bind-mounted read-only into every
        container (system directories, the interpreters; never the project, the state
        directory or the store), the network, the limits and this backend's uids."""
        base, sockets = self._sandbox_dir(), self._socket_dir()
        for d in (base, sockets):  # a previous run's: the prefix is ours
            shutil.rmtree(d, ignore_errors=True)
        own_dir(base.parent).chmod(0o711)  # traversable, not listable: sandbox dirs lie in it
        base.mkdir(mode=0o711)
        sockets.mkdir(mode=0o700)
        root, opt = base / "root", base / "opt"
        root.mkdir(mode=0o755)
        # What a sandbox sees of the project, copied where a container's uid can reach it
        # (a non-root invoker's checkout may be private): the runtimes and the GPU client.
        (opt / "gpu").mkdir(mode=0o755, parents=True)
        opt.chmod(0o755)
        for src, dst in (
            (NODE_RUNTIME, opt / NODE_RUNTIME.name),
            (PYTHON_RUNTIME, opt / PYTHON_RUNTIME.name),
            *((PROJECT_ROOT / "gpu" / f, opt / "gpu" / f) for f in GPU_CLIENT),
        ):
            shutil.copyfile(src, dst)
            dst.chmod(0o644)
        python = Path(self.python).resolve()
        binds = {"/usr", "/etc", sys.base_prefix, sys.prefix, str(python.parent.parent)}
        if self.node is not None:
            binds.add(str(Path(self.node).resolve().parent.parent))
        files = {sandbox.PROJECT_ROOT: str(opt), **self._shared}
        if self.network == "outbound":  # slirp4netns's DNS forwarder
            resolv = opt / "resolv.conf"
            resolv.write_text(f"nameserver {SLIRP_DNS}\n")
            resolv.chmod(0o644)
            files["/etc/resolv.conf"] = str(resolv)
        hidden = (PROJECT_ROOT, self.state_dir)
        assert self._uids is not None
        return {
            "root": str(root),
            "project_root": sandbox.PROJECT_ROOT,
            "sockets": str(sockets),
            "binds": sorted(b for b in binds if Path(b) not in hidden and b != "/"),
            "files": files,
            "network": "slirp4netns" if self.network == "outbound" else "none",
            "slirp4netns": shutil.which("slirp4netns"),
            "pids_max": self.pids_limit,
            "host_ports": list(self.host_ports),
            "deny": list(self.network_deny),
            "allow": list(self.network_allow),
            "uid_base": self._uids.base,
            "uid_count": self._uids.count,
            "gid_base": self._uids.gid_base,
            "userns": self._rootless is not None,
            "newuidmap": self._tools[0],
            "newgidmap": self._tools[1],
        }

    def _sandbox_dir(self) -> Path:
        """The new roots' mount point and what sandboxes see of the project, in the host-wide
        run directory (``claim.sandbox_dir``): reachable by containers' uids (0711), one per
        prefix and state dir."""
        key = hashlib.sha256(f"{self.state_dir}\0{self.name_prefix}".encode()).hexdigest()
        return sandbox_dir() / f"sandbox-{key[:12]}"

    def _socket_dir(self) -> Path:
        """Where runtimes listen: short (a Unix socket's path has at most 107 bytes) and
        private (0700, beside the sandbox dir), one per prefix and state dir."""
        key = hashlib.sha256(f"{self.state_dir}\0{self.name_prefix}".encode()).hexdigest()
        return sandbox_dir() / f"sock-{key[:12]}"

    def _under_tmp(self) -> bool:
        """Whether a private /tmp would hide what containers need: their own directories,
        or the runtimes and the GPU client they load from the project."""
        tmp = Path("/tmp").resolve()
        return any(p == tmp or tmp in p.parents for p in (self.state_dir, PROJECT_ROOT))

    async def _ensure_zygote(self) -> _Zygote:
        async with self._start_lock:
            if self._zygote is not None and self._zygote.alive:
                return self._zygote
            if self._closed:
                raise ContainerError("the process backend is closed")
            if self._zygote is not None:  # it died: its unassigned spares' cgroups are ours
                await self._remove_spares_of(self._zygote)
            self.state_dir.mkdir(parents=True, exist_ok=True)
            tag = os.urandom(4).hex()
            argv = [
                self.python, "-I", "-B", str(PYTHON_RUNTIME), "zygote",
                "--parent-pid", str(os.getpid()),
                "--project-root", str(PROJECT_ROOT),
                "--marker", self.name_prefix,
                "--spares", str(self.spares),
                "--run", tag,
            ]  # fmt: skip
            cg = self.cgroup_support
            if cg.usable and cg.memory_parent is not None:
                try:
                    await asyncio.to_thread(cgroups.make_calls_group, cg)
                except OSError as e:
                    raise ContainerError(f"cannot create the calls' cgroup: {e}") from e
                argv += [
                    "--cgroup-version",
                    str(cg.version),
                    "--cgroup-memory",
                    str(cg.memory_parent),
                ]
                if cg.cpu_parent is not None:
                    argv += ["--cgroup-cpu", str(cg.cpu_parent)]
            if self.sandbox:
                argv += ["--sandbox", json.dumps(self._sandbox_settings()).decode()]
            env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", MARKER_VAR: self.name_prefix}
            zygote = _Zygote(argv, env, str(self.state_dir), tag)
            zygote.on_exit = self._on_exit
            zygote.on_gone = self._on_zygote_gone
            try:
                ready = await zygote.start(self.spawn_timeout_s)
            except Exception as e:
                raise ContainerError(f"the process backend's zygote did not start: {e}") from e
            if problem := ready.get("sandbox_error"):
                await zygote.stop()
                raise ContainerError(f"the process backend cannot build a sandbox: {problem}")
            meta = {"pid": zygote.pid, "start_time": process_start_time(zygote.pid)}
            (self.state_dir / f"{self.name_prefix}.zygote.{zygote.pid}.json").write_bytes(
                json.dumps(meta)
            )
            self._zygote = zygote
            return zygote

    async def _remove_spares_of(self, zygote: _Zygote) -> None:
        (self.state_dir / f"{self.name_prefix}.zygote.{zygote.pid}.json").unlink(missing_ok=True)
        spares = f"{self.name_prefix}_spare_{zygote.tag}_"
        found = cgroups.find_leftovers(self.cgroup_support, self.name_prefix)
        await self._remove_cgroups([cg for cg in found if cg.memory.name.startswith(spares)])

    def _spawn_request(self, spec: ContainerSpec, dirname: str, cdir: Path) -> dict[str, Any]:
        if self.sandbox:  # the container's own tmpfs mounts, inside its root
            work, tmp = sandbox.WORKDIR, "/tmp"
        else:
            work, tmp = str(cdir / "work"), str(cdir / "tmp")
        env = {
            "PATH": SAFE_PATH,
            "HOME": work,
            "LANG": "C.UTF-8",
            "TMPDIR": tmp,
            "TEMP": tmp,
            "TMP": tmp,
        }
        env.update({str(k): str(v) for k, v in spec.env.items()})
        req: dict[str, Any] = {
            "op": "spawn",
            "name": dirname,
            "cwd": work,
            "tmp": tmp,
            "log": str(cdir / LOG_FILE),
            "env": env,
            "private_tmp": self.private_tmp and not self.sandbox,
            "nofile": self.nofile,
        }
        if self.user is not None:
            req["uid"], req["gid"] = self.user
        cg = self.cgroup_support.usable
        if cg:
            req["cgroup"] = {
                "name": dirname,
                "memory_mb": spec.memory_mb,
                "cpu_shares": spec.cpu_shares,
            }
        marker = ["--marker", self.name_prefix]
        if _family(spec.kind) == "nodejs":
            assert self.node is not None
            # Without a cgroup nothing else bounds node's heap (RLIMIT_AS would break V8).
            heap = [] if cg else [f"--max-old-space-size={max(spec.memory_mb - 32, 16)}"]
            # The script comes on stdin, opened by the zygote before any change of user: an
            # action user needs no access to the project's directory (its name stays in ps).
            req["exec"] = [self.node, *heap, "-", NODE_RUNTIME.name, "--listen-fd", "3", *marker]
            inside = f"{sandbox.PROJECT_ROOT}/{NODE_RUNTIME.name}"
            req["stdin"] = inside if self.sandbox else str(NODE_RUNTIME)
        elif not self.zygote_fork:
            inside = f"{sandbox.PROJECT_ROOT}/{PYTHON_RUNTIME.name}"
            runtime = inside if self.sandbox else str(PYTHON_RUNTIME)
            req["exec"] = [
                self.python, "-I", "-B", runtime, "serve", "--listen-fd", "3",
                "--project-root", str(PROJECT_ROOT), *marker,
            ]  # fmt: skip
        elif not cg:
            req["rlimit_as"] = spec.memory_mb << 20
        return req

    def _write_meta(
        self,
        cdir: Path,
        pid: int | None,
        start: int | None,
        cg: cgroups.ContainerCgroup | None,
        kind: str,
    ) -> None:
        meta = {
            "pid": pid,
            "start_time": start,
            "kind": kind,
            "cgroup": cg.to_json() if cg else None,
        }
        tmp = cdir / (META_FILE + ".new")
        tmp.write_bytes(json.dumps(meta))
        tmp.replace(cdir / META_FILE)

    @staticmethod
    def _read_json(path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_bytes())
        except (OSError, json.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def _kill_leftover(self, d: Path) -> cgroups.ContainerCgroup | None:
        """Kill a leftover container's process (if it is still ours); its cgroup, if any."""
        meta = self._read_json(d / META_FILE)
        pid = int(meta.get("pid") or 0)
        if pid and _is_ours(pid, meta.get("start_time"), self.name_prefix):
            _kill_group(pid)
        try:
            cg = meta.get("cgroup")
            return cgroups.ContainerCgroup.from_json(cg) if isinstance(cg, dict) else None
        except (KeyError, ValueError):
            return None

    async def _remove_leftover_dir(self, d: Path) -> None:
        if (cg := self._kill_leftover(d)) is not None:
            await self._remove_cgroups([cg])
        await asyncio.to_thread(shutil.rmtree, d, ignore_errors=True)

    def _on_exit(self, pid: int, status: int) -> None:
        c = self._by_pid.pop(pid, None)
        if c is not None:
            c.exit_status = status
        else:  # it may have died before create() registered it
            self._early_exits[pid] = status
            while len(self._early_exits) > 256:
                del self._early_exits[next(iter(self._early_exits))]

    def _on_zygote_gone(self) -> None:
        # Its children died with it (PR_SET_PDEATHSIG) and were reaped elsewhere: their pids
        # must not be signalled any more.
        for c in self._by_pid.values():
            if c.exit_status is None:
                c.exit_status = -int(signal.SIGKILL)
        self._by_pid.clear()

    def _removed(self, c: ProcessContainer) -> None:
        """Each container's ``on_removed``: it is destroyed; a cgroup it left busy is reaped
        in the background."""
        if self._containers.get(c.name) is c:
            del self._containers[c.name]
        if self._by_pid.get(c.pid) is c:
            del self._by_pid[c.pid]
        if c.busy_cgroup is not None:
            self._reap_later([c.busy_cgroup])
