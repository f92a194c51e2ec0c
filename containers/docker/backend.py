"""The Docker backend: action containers through the Docker Engine API (Docker or Podman).

What the stock invoker does with ``docker run`` (spec 3.2), done with Engine API calls
(:mod:`containers.docker.engine`):

- **create**: the image of the kind (the backend's overrides, else ``spec.image`` from the
  invoker's runtime manifest, else the stock manifest), ``--cpu-shares``, ``--memory`` with
  ``--memory-swap`` equal to it, pids limit 1024, ``nofile=1024:1024``, NET_RAW and NET_ADMIN
  dropped, the json-file log driver, the spec's environment (nothing of the invoker's). A
  managed image missing locally is pulled (as ``docker run`` would); a blackbox image is
  pulled when missing, and for ``latest`` (or no tag) a failed pull is fatal
  (:class:`ImagePullError`).
- **how the runtime is reached** (``reach``): ``netns`` (default) keeps the runtime on the
  container's own loopback, in a network namespace of its own (``network``: ``none``, or a
  network for outbound traffic), and the invoker connects from inside that namespace
  (:mod:`containers.docker.netns`): no other container and nothing on the host's network can
  open the port, and the action cannot reach the host's loopback services. ``publish``
  publishes port 8080 on ``127.0.0.1`` at a random host port read back by inspect;
  ``address`` is the stock invoker's way: the container's own address on ``network``, port
  8080 (a remote engine). ``host`` (test machines only, with a warning) runs the container
  in the host's network with a loopback port of its own (``__OW_RUNTIME_LISTEN``).
- **hardening** as stock and a little more: Docker's default capabilities less NET_RAW and
  NET_ADMIN, its default seccomp profile (never ``unconfined``), ``no-new-privileges``, a
  pids limit (1024), a private ``/dev/shm`` of ``shm_size_mb`` (64, Docker's default) and
  a private IPC namespace; removing the container ends its pid namespace, so everything it
  forked or ``setsid``-ed dies with it.
- **names and labels**: ``spec.name`` (``wsk0_7_guest_hello``), label ``ow-invoker.prefix``
  = the name prefix, plus the spec's and the backend's labels. :meth:`DockerBackend.
  remove_leftovers` removes containers that carry the label *and* the name prefix, nothing
  else.
- **one CPU per call**: :meth:`DockerContainer.assign_cores` sets the cpuset and a CPU quota
  of as many CPUs (``update`` endpoint; see the engine module for Podman's fallbacks).
- **the calls group**: where the backend could remove it, ``CgroupParent`` is
  ``/<prefix>-calls`` (:mod:`containers.docker.calls_group`), so that the calls' CPU weights
  rank them among themselves and not against the invoker's container; removed at close.
- **pause/resume** with the engine's pause (cgroup freezer); **destroy** = unpause if paused,
  then force remove.
- **logs** cut at the sentinels from the engine's log file when it is local and readable
  (as the reference does), else from the engine's logs endpoint (:mod:`containers.docker.logs`).
- **OOM**: ``State.OOMKilled`` (Docker sets it), polled for up to 2 s after a dropped
  connection as the reference does. Podman 4.3 under cgroup v1 never sets it, so on Podman
  an exit by SIGKILL (137) of a memory-limited container that nobody removed counts as OOM:
  inside its PID namespace nothing can SIGKILL the container's init, so the kernel's OOM
  killer (or someone on the host) did.

Errors on create/start/inspect remove the container and raise :class:`ContainerError` (the
invoker answers "Failed to provision resources to run the action."); a runtime that dies or
drops the connection during ``/init`` or ``/run`` raises :class:`ContainerGone`, logged at
WARNING with the reason. During ``/init`` a connection closed before any answer byte
(:class:`~containers.http.NoAnswer`) is retried like a refused one while the container runs:
Docker's userland proxy accepts for a runtime that does not listen yet and then resets, and
taking that for a death killed containers that were still starting.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import random
import re
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from containers import memory
from containers.backend import (
    ContainerError,
    ContainerGone,
    ContainerSpec,
    HttpResult,
    ImagePullError,
    LogLine,
)
from containers.cgroups import ContainerCgroup, cpu_shares_of, engine_container_cgroup
from containers.cpu import (
    CpuTimes,
    cgroup_cpu_file,
    read_cgroup_cpu,
    read_cgroup_pressure,
    threads_of,
    threads_waited_seconds,
)
from containers.docker.calls_group import calls_group_parent, remove_calls_group
from containers.docker.engine import Engine, EngineError, image_tag
from containers.docker.logs import EngineLog, JsonLogFile, k8s_to_json
from containers.docker.netns import (
    NetnsDialer,
    NetnsError,
    can_enter_namespaces,
    is_local_engine,
    open_netns,
)
from containers.docker.settings import REACH_MODES
from containers.http import CONNECT_RETRY_S, DEFAULT_MAX_RESPONSE_BYTES, NoAnswer, RuntimeClient
from containers.logfile import LogFile, LogWatcher
from whisk.manifest import BLACKBOX, Manifest
from whisk.supervisor import child, spawn

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
RUNTIME_PORT = "8080/tcp"
LISTEN_ENV = "__OW_RUNTIME_LISTEN"  # where the local runtime images' runtime listens
NETNS_ADDRESS = (HOST, 8080)  # the runtime, on the container's own loopback
NO_NEW_PRIVILEGES = "no-new-privileges"
ICC_OPTION = "com.docker.network.bridge.enable_icc"


def _host_ports() -> tuple[int, int]:
    """Ports for host-network runtimes: just below the kernel's ephemeral range (30000-32767
    by default; the project's services listen lower)."""
    try:
        ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    return max(1024, ephemeral - 2768), ephemeral


HOST_PORTS = _host_ports()
PREFIX_LABEL = "ow-invoker.prefix"
OOM_WAIT_S = 2.0
EXIT_WATCH_S = 0.25  # /init retries this long before the container's state is checked
SIGKILL_EXIT = 137

ImageSource = Manifest | Mapping[str, str] | Callable[[str], str | None]
LogSource = EngineLog | JsonLogFile | LogFile
LOG_SOURCES = ("auto", "file", "api")
T = TypeVar("T")


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _resolver(images: ImageSource | None) -> Callable[[str], str | None]:
    if images is None:
        return lambda kind: None
    if isinstance(images, Manifest):
        manifest = images
        return lambda kind: r.image if (r := manifest.runtime(kind)) else None
    if isinstance(images, Mapping):
        mapping = dict(images)
        return mapping.get
    return images


def _oom(state: Mapping[str, Any], podman: bool) -> bool:
    """Whether an inspected state says the container was OOM-killed (see module docstring)."""
    if state.get("OOMKilled"):
        return True
    stopped = not state.get("Running") and not state.get("Paused")
    return podman and stopped and state.get("ExitCode") == SIGKILL_EXIT


class DockerContainer:
    """One action container of a :class:`DockerBackend`."""

    def __init__(
        self,
        name: str,
        cid: str,
        kind: str,
        image: str,
        address: tuple[str, int],
        logs: LogSource,
        dialer: NetnsDialer | None = None,
        *,
        engine: Engine,
        on_removed: Callable[[DockerContainer], None],
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.name = name
        self.id = cid
        self.kind = kind
        self.image = image
        self.host, self.port = address
        self._engine = engine
        self._on_removed = on_removed  # the backend's hook, called once by destroy
        self._dialer = dialer  # reach="netns": sockets made in the container's namespace
        self._client = RuntimeClient(self.host, self.port, max_response_bytes, dialer)
        self._log = logs
        self._cores: frozenset[int] | None = None
        self._shares: int | None = None  # as created (the spec's cpu_shares) until set
        self._destroyed = False
        self._oom: bool | None = None
        self._init_pid: int | None = None  # :meth:`_pid`
        self._cpu_file: Path | bool | None = False  # False: not looked for yet
        self._cgroup: ContainerCgroup | bool | None = False  # the same (set_cpu_weight)
        self._memory_dir: tuple[Path, int] | bool | None = False  # (directory, version)

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def socket_factory(self) -> NetnsDialer | None:
        """With ``reach="netns"``, what makes sockets in the container's network namespace
        (for another :class:`RuntimeClient` to :attr:`address`); else None."""
        return self._dialer

    @property
    def log_source(self) -> str:
        """Where :meth:`read_logs` reads: ``file`` (the engine's log file) or ``api``."""
        return "api" if isinstance(self._log, EngineLog) else "file"

    def _check(self) -> None:
        if self._destroyed:
            raise ContainerGone(f"container {self.name} was destroyed")

    def _error(self, e: EngineError) -> ContainerError:
        kind = ContainerGone if e.gone else ContainerError
        return kind(f"container {self.name}: {e}")

    async def init(self, body: bytes, timeout_s: float) -> HttpResult:
        """POST /init; gives up early (ContainerGone) if the container exits while /init
        is still retrying its connection."""
        self._check()
        answer = child(self._post_init(body, timeout_s))
        watch = child(self._watch_exit())
        try:
            await asyncio.wait((answer, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (answer, watch):
                if not task.done():
                    task.cancel()
        try:
            if answer.done() and not answer.cancelled():
                if watch.done() and not watch.cancelled():
                    watch.exception()  # retrieved: the answer wins
                return answer.result()
            await asyncio.gather(answer, return_exceptions=True)
            return await watch  # raises ContainerGone
        except ContainerGone as e:
            log.warning("container %s declared gone during /init: %s", self.name, e)
            raise

    async def _post_init(self, body: bytes, timeout_s: float) -> HttpResult:
        """/init, retrying connections that close before any answer until the timeout (a
        proxy accepting for a runtime not listening yet); :meth:`_watch_exit` tells a
        runtime that really died."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                return await self._client.post_init(body, max(0.0, deadline - loop.time()))
            except NoAnswer as e:
                if loop.time() + CONNECT_RETRY_S >= deadline:
                    raise TimeoutError(
                        f"the runtime of {self.name} closed every connection unanswered"
                    ) from e
                log.debug("container %s: /init unanswered (%s); retrying", self.name, e)
                await asyncio.sleep(CONNECT_RETRY_S)

    async def _watch_exit(self) -> HttpResult:
        await asyncio.sleep(EXIT_WATCH_S)
        while True:
            try:
                state = (await self._engine.inspect(self.id)).get("State") or {}
            except EngineError as e:
                if e.status == 404:
                    raise ContainerGone(f"container {self.name} is gone") from e
                state = {"Running": True}  # keep waiting for /init
            if not state.get("Running") and not state.get("Paused"):
                raise ContainerGone(
                    f"container {self.name} exited ({state.get('ExitCode')}) before /init"
                )
            await asyncio.sleep(0.5)

    async def run(self, body: bytes, timeout_s: float) -> HttpResult:
        self._check()
        try:
            return await self._client.post_run(body, timeout_s)
        except ContainerGone as e:
            log.warning("container %s declared gone during /run: %s", self.name, e)
            raise

    async def assign_cores(self, cores: frozenset[int]) -> None:
        """Cpuset = ``cores`` and a quota of ``len(cores)`` CPUs, for the coming call."""
        self._check()
        if not cores:
            raise ValueError("assign_cores needs at least one core")
        if cores == self._cores:
            return
        cpuset = ",".join(str(c) for c in sorted(cores))
        try:
            await self._engine.update_cpus(self.id, cpuset, len(cores))
        except EngineError as e:
            raise self._error(e) from e
        self._cores = cores

    async def set_cpu_weight(self, weight: int) -> None:
        """Written to the container's cgroup where this host shows it (found once, from the
        container's pid), else the engine's ``CpuShares`` of the same weight
        (:func:`cpu_shares_of`): an engine update took 27 ms on dockerd, and an
        attained-service order writes about five a call, each call's start waiting for its
        own."""
        self._check()
        shares = cpu_shares_of(weight)
        if shares == self._shares:
            return
        if self._cgroup is False:
            pid = await self._engine_call(self._pid())
            self._cgroup = engine_container_cgroup(pid, self.id) if pid else None
        try:
            if isinstance(self._cgroup, ContainerCgroup) and self._cgroup.set_cpu_weight(weight):
                self._shares = shares
                return
        except FileNotFoundError as e:  # removed meanwhile
            raise ContainerGone(f"container {self.name} is gone: {e}") from e
        except OSError as e:
            log.warning("writing the CPU weight of %s to its cgroup: %s", self.name, e)
            self._cgroup = None
        await self._engine_call(self._engine.update_cpu_shares(self.id, shares))
        self._shares = shares

    async def _pid(self) -> int | None:
        """The container's init as this host numbers it (one inspect, kept once known),
        from which its cgroup files are found; raises EngineError."""
        if self._init_pid is None:
            pid = ((await self._engine.inspect(self.id)).get("State") or {}).get("Pid")
            self._init_pid = int(pid) if pid else None
        return self._init_pid

    async def cpu_times(self) -> CpuTimes | None:
        """The container cgroup's CPU accounting, read from the cgroup filesystem when this
        host shows it (found once, from the container's pid), else one stats request (which
        tells no CPU wait)."""
        if self._destroyed:
            return None
        try:
            if self._cpu_file is False:
                pid = await self._pid()
                self._cpu_file = cgroup_cpu_file(pid) if pid else None
            if isinstance(self._cpu_file, Path):
                used = read_cgroup_cpu(self._cpu_file)
                if used is not None:
                    return CpuTimes(used, _cgroup_waited(self._cpu_file.parent))
            stats = await self._engine.stats(self.id)
            return CpuTimes(int(stats["cpu_stats"]["cpu_usage"]["total_usage"]) / 1e9)
        except (EngineError, KeyError, TypeError, ValueError):
            return None

    async def memory_usage(self) -> int | None:
        """The container cgroup's working set, read from the cgroup filesystem when this
        host shows it (found once, from the container's pid), else one stats request."""
        if self._destroyed:
            return None
        try:
            if self._memory_dir is False:
                pid = await self._pid()
                self._memory_dir = memory.cgroup_memory_dir(pid) if pid else None
            if isinstance(self._memory_dir, tuple):
                used = memory.cgroup_working_set(*self._memory_dir)
                if used is not None:
                    return used
            stats = (await self._engine.stats(self.id))["memory_stats"]
            return memory.working_set(int(stats["usage"]), stats.get("stats") or {})
        except (EngineError, KeyError, TypeError, ValueError):
            return None

    async def read_logs(
        self, limit_bytes: int, wait_for_sentinels: bool
    ) -> tuple[list[LogLine], bool]:
        if self._destroyed:  # its log went with it
            return [], not wait_for_sentinels
        try:
            return await self._log.read(limit_bytes, wait_for_sentinels)
        except EngineError as e:
            raise self._error(e) from e

    async def pause(self) -> None:
        self._check()
        # As the reference, no idle connection is kept to a paused container; a call paused
        # in /run (preemption) keeps its own, and the freezer keeps the socket open.
        self._client.close_idle()
        await self._engine_call(self._engine.pause(self.id))

    async def resume(self) -> None:
        self._check()
        await self._engine_call(self._engine.unpause(self.id))

    async def _engine_call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except EngineError as e:
            raise self._error(e) from e

    async def was_oom_killed(self) -> bool:
        if self._oom is not None:
            return self._oom
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OOM_WAIT_S
        while True:
            try:
                state = (await self._engine.inspect(self.id)).get("State") or {}
            except EngineError:
                return False
            if _oom(state, self._engine.is_podman):
                return True
            if not state.get("Running") or loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        try:
            self._client.close()
            self._log.close()
            if self._dialer is not None:
                self._dialer.close()
            try:
                state = (await self._engine.inspect(self.id)).get("State") or {}
                self._oom = _oom(state, self._engine.is_podman)
                if state.get("Paused"):
                    await self._engine.unpause(self.id)
            except EngineError:
                pass  # gone already, or the removal below says more
            await self._engine.remove(self.id)
        except Exception as e:
            log.warning("destroying container %s: %s", self.name, e)
        finally:
            self._on_removed(self)


class DockerBackend:
    """Containers through the Docker Engine API (see the module docstring).

    ``docker_host``: the engine's address (``unix:///var/run/docker.sock``, ``tcp://...``;
    None: ``DOCKER_HOST`` or the default socket). ``name_prefix``: the invoker's container
    name prefix (``wsk0``). ``images``: image per kind, overriding ``spec.image`` (a
    :class:`Manifest`, a mapping, or a function returning None for "no override").
    ``binds``: volumes for every container (``/usr:/usr:ro``), as the stock ``extra-args``.
    ``labels``: put on every container besides ``ow-invoker.prefix``. ``network``: Docker
    network (stock default ``bridge``; ``none`` for no network at all; ignored by
    ``reach="host"``). ``reach``: how the runtime is reached, ``netns``, ``publish``,
    ``address`` or ``host`` (module docstring). ``pids_limit`` and ``shm_size_mb``: the
    container's process count and private ``/dev/shm`` size (stock: 1024, 64 MB).
    ``log_source``: ``auto`` tails the engine's log file when this process can read it (a
    local engine) and uses the logs endpoint otherwise, ``file`` or ``api`` insist on one
    (see :mod:`containers.docker.logs`). Also ``max_response_bytes`` (of a runtime's answer
    kept), ``pids_limit``, ``nofile`` (ulimit), ``log_driver`` (None: the engine's default)
    and ``max_concurrent_creates`` (the reference runs at most 10 ``docker run`` at once)."""

    name = "docker"

    def __init__(
        self,
        docker_host: str | None = None,
        name_prefix: str = "wsk0",
        *,
        images: ImageSource | None = None,
        binds: Sequence[str] = (),
        labels: Mapping[str, str] | None = None,
        network: str | None = "bridge",
        reach: str = "netns",
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        pids_limit: int = 1024,
        shm_size_mb: int = 64,
        nofile: int = 1024,
        log_driver: str | None = "json-file",
        log_source: str = "auto",
        max_concurrent_creates: int = 10,
        dns: tuple[Sequence[str], Sequence[str], Sequence[str]] = ((), (), ()),
    ) -> None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name_prefix):
            raise ValueError(f"bad name prefix {name_prefix!r}")
        if log_source not in LOG_SOURCES:
            raise ValueError(f"log_source must be one of {LOG_SOURCES}, not {log_source!r}")
        if reach not in REACH_MODES:
            raise ValueError(f"reach must be one of {REACH_MODES}, not {reach!r}")
        if reach == "address" and not network:
            raise ValueError('reach="address" needs a network')
        if pids_limit < 1 or shm_size_mb < 1:
            raise ValueError("pids_limit and shm_size_mb must be positive")
        if reach == "host":
            log.warning(
                'docker reach="host": action containers share the host\'s network namespace '
                "and reach every loopback service of the host; for test machines only"
            )
        self.docker_host = docker_host
        self.name_prefix = name_prefix
        self.image_override = _resolver(images)
        self.binds = tuple(binds)
        self.labels = dict(labels or {})
        self.network = network
        self.reach = reach
        self.max_response_bytes = max_response_bytes
        self.pids_limit = pids_limit
        self.shm_size_mb = shm_size_mb
        self.dns = tuple(tuple(v) for v in dns)
        self.nofile = nofile
        self.log_driver = log_driver
        self.log_source = log_source
        self.log_watcher = LogWatcher()
        self.engine = Engine(docker_host)
        self._stock = Manifest()
        self._creating = asyncio.Semaphore(max_concurrent_creates)
        self._containers: dict[str, DockerContainer] = {}
        self._ports: set[int] = set()  # loopback ports given to host-network containers
        self._discards: set[asyncio.Task[None]] = set()
        self._closed = False
        self._network_checked = False
        self._calls_group: str | None = None  # the containers' CgroupParent (calls_group)
        self._calls_group_checked = False

    # -- ContainerBackend --------------------------------------------------------------------

    def supports(self, kind: str) -> bool:
        """Any kind: the image comes with the spec, from the overrides or the stock
        manifest; :meth:`create` raises ValueError when none of them names one."""
        return bool(kind)

    async def start(self) -> None:
        if self._closed:
            raise ContainerError("the docker backend is closed")
        if self.reach == "netns":
            self._check_netns_possible()
        await self._connect()
        if not self._network_checked:
            self._network_checked = True
            await self._warn_if_shared_network()
        if not self._calls_group_checked:
            await self._choose_calls_group()

    @property
    def weights_among_calls(self) -> bool:
        """With a calls group (:mod:`containers.docker.calls_group`); without one the
        engine's parent holds the containers and, on a stock deployment, the invoker's."""
        return self._calls_group is not None

    async def _choose_calls_group(self) -> None:
        self._calls_group_checked = True
        try:
            driver = await self.engine.cgroup_driver()
        except EngineError as e:  # an engine or proxy without /info: no group
            log.warning("the engine did not say its cgroup driver: %s", e)
            driver = ""
        parent, why_not = await asyncio.to_thread(
            calls_group_parent, self.name_prefix, driver, is_local_engine(self.docker_host)
        )
        self._calls_group = parent
        if parent:
            log.info("action containers' cgroups go in %s, the calls group", parent)
        else:
            log.info("action containers' cgroups stay in the engine's parent: %s", why_not)

    async def _remove_calls_group(self) -> None:
        """Once the containers are gone."""
        group = self._calls_group
        if group is not None and not await asyncio.to_thread(remove_calls_group, group):
            log.warning("the calls' cgroup %s still holds processes; left", group)

    def _check_netns_possible(self) -> None:
        """Fail at start, not at every create, where ``reach="netns"`` cannot work."""
        if not is_local_engine(self.docker_host):
            raise ContainerError(
                f'reach="netns" needs an engine on this host, not {self.docker_host!r}: '
                'use reach="address"'
            )
        if not can_enter_namespaces():
            raise ContainerError(
                'reach="netns" needs CAP_SYS_ADMIN (an invoker running as root): '
                'run as root, or use reach="publish" or "address"'
            )

    async def _warn_if_shared_network(self) -> None:
        """Warn once when containers share a bridge that lets them open each other's ports
        (Docker's default: inter-container communication on). The local images' runtimes
        listen on their own loopback with ``reach="netns"``, but the official images do not,
        and neither does anything an action starts."""
        if self.reach == "host" or self.network in (None, "none", "host"):
            return
        try:
            info = await self.engine.network(self.network)
        except EngineError as e:
            log.warning("cannot inspect docker network %r: %s", self.network, e)
            return
        options = info.get("Options") or {}
        if info.get("Driver") == "bridge" and options.get(ICC_OPTION) != "false":
            log.warning(
                "docker network %r lets action containers reach each other's ports; create one "
                "with -o %s=false (and dockerd's iptables on), or use --docker-network none",
                self.network,
                ICC_OPTION,
            )

    async def create(self, spec: ContainerSpec) -> DockerContainer:
        if self._closed:
            raise ContainerError("the docker backend is closed")
        image = self.image_for(spec)
        name = _safe_name(spec.name)
        if not name.startswith(self.name_prefix + "_"):
            name = f"{self.name_prefix}_{name}"
        await self.start()
        port = self._loopback_port() if self.reach == "host" else None
        try:
            async with self._creating:
                if spec.kind == BLACKBOX:
                    await self._ensure_blackbox_image(image)
                cid = await self._create(name, image, spec, pull=spec.kind != BLACKBOX, port=port)
                dialer: NetnsDialer | None = None
                try:
                    await self.engine.start_container(cid)
                    info = await self.engine.inspect(cid)
                    if self.reach == "netns":
                        dialer = await self._dialer(cid, info)
                        address = NETNS_ADDRESS
                    else:
                        address = (HOST, port) if port else self._address(info)
                    logs = self._logs(cid, info)
                except BaseException as e:
                    if dialer is not None:
                        dialer.close()
                    self._discard(cid)
                    if isinstance(e, EngineError):
                        raise ContainerError(f"starting {name}: {e}") from e
                    raise
        except BaseException:
            self._ports.discard(port or 0)
            raise
        container = DockerContainer(
            name,
            cid,
            spec.kind,
            image,
            address,
            logs,
            dialer,
            engine=self.engine,
            on_removed=self._removed,
            max_response_bytes=self.max_response_bytes,
        )
        self._containers[cid] = container
        return container

    def share_socket(self, path: str) -> None:
        self.binds = (*self.binds, f"{path}:{path}")

    async def remove_leftovers(self) -> int:
        """Remove this backend's containers and every container labelled with this prefix
        whose name starts with it (a previous run's); returns how many."""
        removed = {c.id for c in list(self._containers.values())}
        await asyncio.gather(*(c.destroy() for c in list(self._containers.values())))
        await self._connect()
        try:
            found = await self.engine.list(f"{PREFIX_LABEL}={self.name_prefix}")
            mine = [c for c in found if self._owns(c)]
            await asyncio.gather(*(self._remove_leftover(c) for c in mine))
        except EngineError as e:
            raise ContainerError(f"listing leftover containers: {e}") from e
        finally:
            if self._closed:  # asked after close(): leave no connection behind
                await self.engine.close()
        if self._closed:
            await self._remove_calls_group()
        return len(removed | {str(c["Id"]) for c in mine})

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(c.destroy() for c in list(self._containers.values())))
        if self._discards:
            await asyncio.gather(*self._discards, return_exceptions=True)
        if self.engine.connected:  # sweep what a cancelled create may have left
            with contextlib.suppress(EngineError):
                found = await self.engine.list(f"{PREFIX_LABEL}={self.name_prefix}")
                await asyncio.gather(*(self._remove_leftover(c) for c in found if self._owns(c)))
        await self.engine.close()
        self.log_watcher.close()
        await self._remove_calls_group()

    # -- internals ---------------------------------------------------------------------------

    async def _connect(self) -> None:
        try:
            await self.engine.start()
        except EngineError as e:
            raise ContainerError(f"cannot reach the container engine: {e}") from e

    def image_for(self, spec: ContainerSpec) -> str:
        """Blackbox: ``spec.image``; managed kinds: override, ``spec.image``, stock."""
        if spec.kind == BLACKBOX:
            if not spec.image:
                raise ValueError("a blackbox action needs an image")
            return spec.image
        image = self.image_override(spec.kind) or spec.image
        if not image:
            stock = self._stock.runtime(spec.kind)
            if stock is None:
                raise ValueError(f"no image for kind {spec.kind!r}")
            image = stock.image
        return image

    def container_config(
        self, image: str, spec: ContainerSpec, port: int | None = None
    ) -> dict[str, Any]:
        """The create request (``docker run`` flags of spec 3.2); ``port``: the runtime's
        loopback port with ``reach="host"``."""
        memory = spec.memory_mb * 1024 * 1024
        ulimits = [{"Name": "nofile", "Soft": self.nofile, "Hard": self.nofile}]
        if self.engine.is_podman:  # see containers.docker.engine
            ulimits.append({"Name": "nproc", "Soft": 4096, "Hard": 4096})
        host: dict[str, Any] = {
            "Memory": memory,
            "MemorySwap": memory,
            "PidsLimit": self.pids_limit,
            "Ulimits": ulimits,
            "CapDrop": ["NET_RAW", "NET_ADMIN"],
            "SecurityOpt": [NO_NEW_PRIVILEGES],  # and the engine's default seccomp profile
            "IpcMode": "private",
            "ShmSize": self.shm_size_mb * 1024 * 1024,
        }
        env = [f"{k}={v}" for k, v in spec.env.items()]
        if spec.cpu_shares is not None:
            host["CpuShares"] = spec.cpu_shares
        if self._calls_group:
            host["CgroupParent"] = self._calls_group
        if self.reach == "host":
            if port is None:
                raise ValueError('reach="host" needs a port per container')
            host["NetworkMode"] = "host"
            env.append(f"{LISTEN_ENV}={HOST}:{port}")
        elif self.reach == "netns":
            # Only the container's own loopback, even on a network (where the official
            # images, which ignore the variable, listen on every interface).
            host["NetworkMode"] = self.network or "none"
            env.append(f"{LISTEN_ENV}={HOST}:{NETNS_ADDRESS[1]}")
        elif self.network:
            host["NetworkMode"] = self.network
        if self.reach == "publish":
            host["PortBindings"] = {RUNTIME_PORT: [{"HostIp": HOST, "HostPort": ""}]}
        if self.log_driver:
            host["LogConfig"] = {"Type": self.log_driver, "Config": {}}
        if self.binds:
            host["Binds"] = list(self.binds)
        for key, values in zip(("Dns", "DnsSearch", "DnsOptions"), self.dns, strict=True):
            if values:  # the stock invoker's --dns, --dns-search, --dns-opt
                host[key] = list(values)
        labels = {**self.labels, **spec.labels, PREFIX_LABEL: self.name_prefix}
        config: dict[str, Any] = {
            "Image": image,
            "Env": env,
            "Labels": labels,
            "HostConfig": host,
        }
        if self.reach in ("publish", "address"):
            config["ExposedPorts"] = {RUNTIME_PORT: {}}
        return config

    async def _create(
        self, name: str, image: str, spec: ContainerSpec, pull: bool, port: int | None
    ) -> str:
        """Create the container: pull a missing image once if ``pull`` (as ``docker run``),
        and replace a stale container of ours that holds the name."""
        config = self.container_config(image, spec, port)
        pulled, replaced = not pull, False
        while True:
            try:
                return await self.engine.create(config, name)
            except EngineError as e:
                text = e.message.lower()
                if not pulled and e.status == 404 and "image" in text:
                    pulled = True
                    with contextlib.suppress(EngineError):
                        await self.engine.pull(image)
                    continue
                if not replaced and "already in use" in text and await self._replace(name):
                    replaced = True
                    continue
                raise ContainerError(f"creating {name} from {image}: {e}") from e

    async def _replace(self, name: str) -> bool:
        """Remove the container holding ``name`` if it is ours (a stale leftover)."""
        try:
            info = await self.engine.inspect(name)
        except EngineError:
            return True  # it went away meanwhile: just try again
        labels = (info.get("Config") or {}).get("Labels") or {}
        if labels.get(PREFIX_LABEL) != self.name_prefix:
            return False
        await self._remove_leftover(info)
        return True

    async def _ensure_blackbox_image(self, image: str) -> None:
        """A missing image is pulled. As the reference, a failed pull is the action's problem
        (:class:`ImagePullError`) for ``latest``, and for other tags when no local copy
        exists (the reference learns that from the failing ``docker run``): an invoker must
        not turn unhealthy over a user's missing image."""
        present: bool | None = None
        try:
            present = await self.engine.image_exists(image)
            if present:
                return
            await self.engine.pull(image)
        except EngineError as e:
            if image_tag(image) in (None, "latest") or present is False:
                raise ImagePullError(f"Failed to pull container image '{image}'.") from e
            log.warning("pulling %s failed (%s); trying a local copy", image, e)

    @staticmethod
    async def _dialer(cid: str, info: Mapping[str, Any]) -> NetnsDialer:
        """The container's network namespace, held open, and one socket made in it at once
        so that a missing privilege fails the create, not every later /init. A container
        that already exited gets a dialer that refuses: /init then says why it is gone."""
        if not (info.get("State") or {}).get("Running"):
            return NetnsDialer(None, f"container {cid[:12]} is not running")
        try:
            dialer = NetnsDialer(open_netns(cid, info))
        except NetnsError as e:
            if e.errno == errno.ESRCH:  # it exited since the inspect
                return NetnsDialer(None, str(e))
            raise ContainerError(f'reach="netns": {e} (use reach="address" or "publish")') from e
        try:
            (await dialer()).close()
        except NetnsError as e:
            dialer.close()
            hint = (
                " needs CAP_SYS_ADMIN (an invoker running as root)"
                if e.errno == errno.EPERM
                else ""
            )
            raise ContainerError(f'reach="netns"{hint}: {e}') from e
        return dialer

    def _address(self, info: Mapping[str, Any]) -> tuple[str, int]:
        """Where the runtime answers: its published loopback port, or (``address``) its own
        address on the network, port 8080."""
        settings = info.get("NetworkSettings") or {}
        if self.reach == "address":
            net = (settings.get("Networks") or {}).get(self.network or "") or {}
            ip = net.get("IPAddress") or settings.get("IPAddress")
            if not ip:
                raise EngineError("inspect", 0, f"no address on network {self.network!r}")
            return str(ip), int(RUNTIME_PORT.split("/")[0])
        for binding in (settings.get("Ports") or {}).get(RUNTIME_PORT) or ():
            if binding.get("HostIp") in (HOST, "", None) and binding.get("HostPort"):
                return HOST, int(binding["HostPort"])
        raise EngineError("inspect", 0, f"port {RUNTIME_PORT} is not published on {HOST}")

    def _loopback_port(self) -> int:
        """A free loopback port for a host-network runtime, drawn below the kernel's
        ephemeral range (a port an outgoing connection holds there would make the runtime's
        bind fail) and not given to another container of ours (a starting runtime has not
        bound its port yet)."""
        low, high = HOST_PORTS
        for _ in range(200):
            port = random.randrange(low, high)
            if port in self._ports:
                continue
            with socket.socket() as s:
                try:
                    s.bind((HOST, port))
                except OSError:
                    continue
            self._ports.add(port)
            return port
        raise ContainerError(f"no free loopback port in {low}-{high - 1}")

    def _logs(self, cid: str, info: Mapping[str, Any]) -> LogSource:
        """Tail the engine's log file if this process can read it, else use the endpoint."""
        config = (info.get("HostConfig") or {}).get("LogConfig") or {}
        path = info.get("LogPath") or config.get("Path") or ""
        kind = config.get("Type") or ""
        if self.log_source != "api" and path and os.access(path, os.R_OK):
            if self.engine.is_podman and kind in ("json-file", "k8s-file"):
                return LogFile(path, self.log_watcher, convert=k8s_to_json)
            if not self.engine.is_podman and kind == "json-file":
                return JsonLogFile(path, self.log_watcher)
        if self.log_source == "file":
            raise EngineError("logs", 0, f"cannot read the {kind or '?'} log file {path!r}")
        return EngineLog(lambda since, follow: self.engine.logs(cid, since, follow))

    def _owns(self, summary: Mapping[str, Any]) -> bool:
        labels = summary.get("Labels") or {}
        names = [n.lstrip("/") for n in summary.get("Names") or ()]
        return labels.get(PREFIX_LABEL) == self.name_prefix and any(
            n.startswith(self.name_prefix + "_") for n in names
        )

    async def _remove_leftover(self, summary: Mapping[str, Any]) -> None:
        cid = str(summary["Id"])
        state = summary.get("State")
        paused = state == "paused" or (isinstance(state, dict) and state.get("Paused"))
        try:
            if paused:
                with contextlib.suppress(EngineError):
                    await self.engine.unpause(cid)
            await self.engine.remove(cid)
        except EngineError as e:
            log.warning("removing leftover container %s: %s", cid[:12], e)

    def _discard(self, cid: str) -> None:
        """Remove a half-made container in the background (survives our cancellation)."""

        async def remove() -> None:
            with contextlib.suppress(EngineError):
                await self.engine.remove(cid)

        task = spawn(remove(), name="discard-container")
        self._discards.add(task)
        task.add_done_callback(self._discards.discard)

    def _removed(self, c: DockerContainer) -> None:
        """Each container's ``on_removed``: it is destroyed, its name and port are free."""
        if self._containers.get(c.id) is c:
            del self._containers[c.id]
            if self.reach == "host":
                self._ports.discard(c.port)


def _cgroup_waited(cgroup: Path) -> float:
    """Seconds the container's processes waited for a CPU: its v2 ``cpu.pressure``; on a v1
    hierarchy (no pressure file) the run-queue delay of the processes in its ``cgroup.procs``.
    Without it, a CPU-bound call slowed by the node's other work read as one that mostly
    waits (its share low), and was shared instead of paused for."""
    waited = read_cgroup_pressure(cgroup / "cpu.pressure")
    if waited is not None:
        return waited
    try:
        pids = [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return 0.0
    return threads_waited_seconds(threads_of(pids))
