"""The real services, started and stopped through scripts/services.sh (the script a developer
uses): Apache Kafka, a CouchDB-API server (pouchdb-server), etcd, Toxiproxy, Podman's Docker API
and a Docker Engine, each on the ports and state dir it is given, so that a local deployment is
never touched. The test suite's fixtures (tests/conftest.py, tests/services.py) and the benchmarks
(benchmarks/common.py) both stand on these classes."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from containers.docker.calls_group import remove_calls_group

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
CACHE = Path(os.environ.get("OW_CACHE_DIR", ROOT / ".cache"))
COUCHDB_USER = "whisk_admin"
COUCHDB_PASSWORD = "some_passw0rd"
BUSYBOX_IMAGE = "localhost/ow-busybox:latest"
# Containers the tests create carry this label (a session's Podman or dockerd removes them).
TEST_CONTAINER_LABEL = "ow-invoker-test"


class ServiceError(RuntimeError):
    """A service did not start or stop; the message carries the script's output."""

    def __init__(self, message: str, exit_status: int | None = None) -> None:
        super().__init__(message)
        self.exit_status = exit_status  # scripts/services.sh's, when it failed


IMAGES_FAILED = 4  # services.sh: the engine started, but its images could not be made


class ServiceMissing(ServiceError):
    """The component is not installed; the message names the install command."""


class ServiceUnusable(ServiceError):
    """This machine cannot run the service (no root for dockerd, no usable OCI runtime)."""


class NotRestartable(ServiceError):
    """A service given by the environment: this process neither starts nor stops it."""


def _install_hint(component: str) -> str:
    return f"run `scripts/install.sh {component}` (or `scripts/install.sh all`)"


# ------------------------------------------------------------------------------------------
class ManagedService:
    """A service this session starts and stops through scripts/services.sh."""

    name = ""
    component = ""  # the scripts/install.sh component that provides it
    external = False

    def __init__(self, state_root: Path, env: dict[str, str]):
        self.state_root = state_root
        self.state_dir = state_root / self.name
        self._env = {**os.environ, "OW_STATE_DIR": str(state_root), **env}
        self.started = False

    # -- script plumbing -------------------------------------------------------------------
    def _script(self, action: str, timeout: float = 180) -> str:
        proc = subprocess.run(
            [str(SCRIPTS / "services.sh"), action, self.name],
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0 and action != "status":
            raise ServiceError(
                f"scripts/services.sh {action} {self.name} failed (exit {proc.returncode}):\n"
                f"{proc.stdout}",
                proc.returncode,
            )
        return proc.stdout

    def check_installed(self) -> None:
        """Raise ServiceMissing (with the install command) when the component is missing,
        ServiceUnusable when this machine cannot run it."""

    # -- what tests use --------------------------------------------------------------------
    def start(self) -> None:
        """Start the service (no-op when it runs) and wait until it answers."""
        self._record()
        self._script("start")
        self.started = True

    def _record(self) -> None:
        """Note the service in ``$OW_TEST_STARTED`` (scripts/test.sh sets it) before it
        starts, so that the script stops it even when this session is killed and never
        reaches its teardown."""
        path = os.environ.get("OW_TEST_STARTED")
        if path and not self.started:
            with open(path, "a") as f:
                f.write(f"{self.name}\t{self.state_root}\n")

    def stop(self) -> None:
        """Stop it gracefully (SIGTERM to the recorded PID) and wait for the exit."""
        self._script("stop")

    def kill(self) -> None:
        """Crash it: SIGKILL to the recorded PID, no clean shutdown."""
        self._script("kill")

    def restart(self) -> None:
        self.stop()
        self.start()

    def frozen(self) -> AbstractContextManager[None]:
        """The service stalled (SIGSTOP: process and connections kept) while the block runs."""
        return _frozen(self._script)

    def is_running(self) -> bool:
        return "running" in self._script("status").split(":", 1)[-1]

    @property
    def log_path(self) -> Path:
        return self.state_dir / f"{self.name}.log"

    # -- session life cycle ----------------------------------------------------------------
    def setup(self) -> None:
        """First start in a session: stop a leftover of a crashed session, wipe old data."""
        self.check_installed()
        self._script("clean")
        self.start()

    def teardown(self) -> None:
        if self.started:
            try:
                self.stop()
            except ServiceError as exc:  # keep going: the other services must stop too
                print(f"teardown of {self.name}: {exc}")


@contextmanager
def _frozen(script: Callable[[str], str]) -> Iterator[None]:
    script("freeze")
    try:
        yield
    finally:
        script("thaw")


class _External:
    """Mixin for a service given by the environment: never started or stopped here."""

    external = True
    name: str

    def setup(self) -> None:
        pass

    def teardown(self) -> None:
        pass

    def start(self) -> None:
        raise NotRestartable(
            f"{self.name} is an external service (from the environment): not restartable"
        )

    stop = kill = restart = start

    def frozen(self) -> AbstractContextManager[None]:
        raise NotRestartable(f"{self.name} is an external service (from the environment)")


# ------------------------------------------------------------------------------------------
class KafkaService(ManagedService):
    """Apache Kafka (KRaft, single node). `bootstrap` is "127.0.0.1:<port>"."""

    name = "kafka"
    component = "kafka"

    def __init__(
        self,
        state_root: Path,
        port: int,
        controller_port: int,
        proxied: tuple[int, int] | None = None,
        controller_via: int | None = None,
        broker_session_timeout_ms: int | None = None,
    ):
        """``proxied``: (the port of a listener for clients behind a fault proxy, the port
        of that proxy, which the listener advertises). ``controller_via``: the port of a
        fault proxy in front of the controller, through which the broker reaches it (cut
        it, and the broker is fenced once ``broker_session_timeout_ms`` has passed)."""
        self.host = "127.0.0.1"
        self.port = port
        self.controller_port: int | None = controller_port
        self.proxied = proxied
        env = {
            "KAFKA_HOST": self.host,
            "KAFKA_PORT": str(port),
            "KAFKA_CONTROLLER_PORT": str(controller_port),
        }
        if proxied is not None:
            env["KAFKA_PROXIED_PORT"] = str(proxied[0])
            env["KAFKA_PROXIED_ADVERTISED"] = f"{self.host}:{proxied[1]}"
        if controller_via is not None:
            env["KAFKA_CONTROLLER_VIA"] = f"{self.host}:{controller_via}"
        if broker_session_timeout_ms is not None:
            env["KAFKA_BROKER_SESSION_TIMEOUT_MS"] = str(broker_session_timeout_ms)
        super().__init__(state_root, env)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "server.log"

    def check_installed(self) -> None:
        if not (CACHE / "kafka" / ".installed").is_file():
            raise ServiceMissing(f"Kafka is not installed: {_install_hint('kafka')}")
        if shutil.which("java") is None:
            raise ServiceMissing("java is not on PATH (Kafka needs Java 17+)")


class ExternalKafka(_External, KafkaService):
    def __init__(self, bootstrap: str):
        self.name = "kafka"
        host, _, port = bootstrap.rpartition(":")
        self.host, self.port, self.controller_port = host, int(port), None
        self.proxied = None
        self._bootstrap = bootstrap
        self.started = False

    @property
    def bootstrap(self) -> str:
        return self._bootstrap


# ------------------------------------------------------------------------------------------
class CouchDBService(ManagedService):
    """A CouchDB-API server (pouchdb-server, LevelDB under the state dir).

    `url` has no credentials in it; send `user`/`password` with every request (an
    unauthenticated PUT of a database crashes pouchdb-server once an admin exists).
    """

    name = "couchdb"
    component = "couchdb"

    def __init__(self, state_root: Path, port: int, user: str, password: str):
        self.host = "127.0.0.1"
        self.port = port
        self.user = user
        self.password = password
        super().__init__(
            state_root,
            {
                "COUCHDB_HOST": self.host,
                "COUCHDB_PORT": str(port),
                "COUCHDB_USER": user,
                "COUCHDB_PASSWORD": password,
            },
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def auth(self) -> tuple[str, str]:
        return (self.user, self.password)

    def check_installed(self) -> None:
        if not (CACHE / "pouchdb" / "node_modules" / ".bin" / "pouchdb-server").exists():
            raise ServiceMissing(
                f"the CouchDB-API server (pouchdb-server) is not installed: "
                f"{_install_hint('couchdb')}",
            )


class ExternalCouchDB(_External, CouchDBService):
    def __init__(self, url: str, user: str, password: str):
        self.name = "couchdb"
        self._url = url.rstrip("/")
        self.user, self.password = user, password
        self.started = False

    @property
    def url(self) -> str:
        return self._url


# ------------------------------------------------------------------------------------------
class EtcdService(ManagedService):
    """etcd 3.4 (Debian's etcd-server), one member: `hosts` is "127.0.0.1:<port>", in the
    form of CONFIG_whisk_etcd_hosts; `url` its client URL (v3 gRPC and the JSON gateway)."""

    name = "etcd"
    component = "etcd"

    def __init__(self, state_root: Path, port: int, peer_port: int):
        self.host = "127.0.0.1"
        self.port = port
        self.peer_port = peer_port
        super().__init__(
            state_root,
            {"ETCD_HOST": self.host, "ETCD_PORT": str(port), "ETCD_PEER_PORT": str(peer_port)},
        )

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.hosts}"

    def check_installed(self) -> None:
        if shutil.which("etcd") is None:
            raise ServiceMissing(f"etcd is not installed: {_install_hint('etcd')}")


class ExternalEtcd(_External, EtcdService):
    def __init__(self, hosts: str):
        self.name = "etcd"
        host, _, port = hosts.split(",")[0].rpartition(":")
        self.host, self.port = host, int(port)
        self._hosts = hosts
        self.started = False

    @property
    def hosts(self) -> str:
        return self._hosts


# ------------------------------------------------------------------------------------------
class ToxiproxyService(ManagedService):
    """Toxiproxy's server: its HTTP API on `url`, the proxies made by its clients
    (harness/toxiproxy.py)."""

    name = "toxiproxy"
    component = "toxiproxy"

    def __init__(self, state_root: Path, port: int):
        self.host = "127.0.0.1"
        self.port = port
        super().__init__(state_root, {"TOXIPROXY_HOST": self.host, "TOXIPROXY_PORT": str(port)})

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def check_installed(self) -> None:
        if not (CACHE / "toxiproxy" / "bin" / "toxiproxy-server").exists():
            raise ServiceMissing(f"Toxiproxy is not installed: {_install_hint('toxiproxy')}")


# ------------------------------------------------------------------------------------------
CGROUP_PARENT = "{{.HostConfig.CgroupParent}}"


def calls_groups(inspected: subprocess.CompletedProcess[str]) -> set[str]:
    """The Docker backend's calls groups (containers.docker.calls_group) among the cgroup
    parents ``inspect --format CGROUP_PARENT`` printed: a killed invoker leaves its group
    to the engine's containers, which the tests' engines remove."""
    return {p for p in inspected.stdout.split() if p.startswith("/") and p.endswith("-calls")}


def remove_calls_groups(groups: set[str]) -> None:
    for group in groups:
        remove_calls_group(group)


class PodmanService(ManagedService):
    """Podman's Docker-compatible API on a unix socket (`docker_host` is "unix://...")."""

    name = "podman"
    component = "podman"
    engine = "podman"
    busybox_image = BUSYBOX_IMAGE
    container_label = TEST_CONTAINER_LABEL

    def __init__(self, state_root: Path):
        # Podman's storage is the machine's: every session sees every container, so a
        # session labels (and at start and end removes) its own by a label of its slot's
        # (slot 0 keeps the plain label), never another session's running containers.
        if state_root.name != "test":
            self.container_label = f"{TEST_CONTAINER_LABEL}-{state_root.name}"
        # A unix socket path must stay under ~108 bytes; fall back to a short temp dir.
        if len(str(state_root / "podman" / "podman.sock")) > 100:
            state_root = Path(tempfile.mkdtemp(prefix="ow-test-"))
        super().__init__(state_root, {})

    @property
    def socket_path(self) -> Path:
        return self.state_dir / "podman.sock"

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket_path}"

    def _podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CONTAINERS_CONF": str(CACHE / "podman" / "containers.conf")}
        return subprocess.run(
            ["podman", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def check_installed(self) -> None:
        if shutil.which("podman") is None or shutil.which("runc") is None:
            raise ServiceMissing(f"podman/runc are not installed: {_install_hint('podman')}")
        if not (CACHE / "podman" / "containers.conf").is_file():
            raise ServiceMissing(
                f"{CACHE / 'podman' / 'containers.conf'} is missing: {_install_hint('podman')}",
            )
        info = self._podman("info", "--format", "{{.Host.OCIRuntime.Name}}")
        if info.returncode != 0:
            raise ServiceUnusable(
                f"podman cannot run on this machine: {info.stderr.strip()[-500:]}"
            )
        if self._podman("image", "exists", self.busybox_image).returncode != 0:
            raise ServiceMissing(
                f"image {self.busybox_image} is missing: run `scripts/images.sh` "
                f"(part of `scripts/install.sh podman`)",
            )

    def remove_containers(self, label: str | None = None) -> None:
        """Force-remove every container that carries `label` (default: this session's
        `container_label`; any value)."""
        label = label or self.container_label
        ids = self._podman("ps", "-aq", "--filter", f"label={label}").stdout.split()
        if ids:
            groups = calls_groups(self._podman("inspect", "--format", CGROUP_PARENT, *ids))
            self._podman("rm", "-f", "-t", "0", *ids)
            remove_calls_groups(groups)

    def setup(self) -> None:
        self.check_installed()
        self.remove_containers()
        self._script("clean")
        try:
            self.start()
        except ServiceError as exc:
            raise ServiceUnusable(
                f"podman's API service cannot run on this machine: {exc}"
            ) from exc

    def teardown(self) -> None:
        if self.started:
            self.remove_containers()
        super().teardown()


class _ExternalEngine(_External):
    """A container engine given by the environment as a ``unix://`` DOCKER_HOST."""

    def __init__(self, docker_host: str):
        self._docker_host = docker_host
        self.started = False

    @property
    def docker_host(self) -> str:
        return self._docker_host

    @property
    def socket_path(self) -> Path:
        return Path(self._docker_host.removeprefix("unix://"))


class ExternalPodman(_ExternalEngine, PodmanService):
    name = "podman"


# ------------------------------------------------------------------------------------------
class DockerService(ManagedService):
    """A Docker Engine (Debian's dockerd) on its own unix socket, data root and exec root,
    started as root by scripts/services.sh with no iptables, NAT or default bridge; the
    busybox and runtime images are built in it at start (`docker_host` is "unix://...")."""

    name = "docker"
    component = "docker"
    engine = "docker"
    busybox_image = BUSYBOX_IMAGE
    container_label = TEST_CONTAINER_LABEL

    def __init__(self, state_root: Path):
        # dockerd's managed containerd puts the deepest unix socket below the state dir
        # (at most ~108 bytes); fall back to a short temp dir, as services.sh requires.
        deepest = state_root / "docker" / "exec" / "containerd" / "containerd-debug.sock"
        if len(str(deepest)) > 100:
            state_root = Path(tempfile.mkdtemp(prefix="ow-test-"))
        super().__init__(state_root, {})

    @property
    def socket_path(self) -> Path:
        return self.state_dir / "docker.sock"

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket_path}"

    def _docker(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker", *args],
            env={**os.environ, "DOCKER_HOST": self.docker_host},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def check_installed(self) -> None:
        if shutil.which("dockerd") is None or shutil.which("docker") is None:
            raise ServiceMissing(f"dockerd is not installed: {_install_hint('docker')}")
        if os.geteuid() != 0:
            raise ServiceUnusable("dockerd needs root")

    def remove_containers(self, label: str = TEST_CONTAINER_LABEL) -> None:
        """Force-remove every container that carries `label` (any value)."""
        if not self.socket_path.exists():
            return
        ids = self._docker("ps", "-aq", "--filter", f"label={label}").stdout.split()
        if ids:
            groups = calls_groups(self._docker("inspect", "--format", CGROUP_PARENT, *ids))
            self._docker("rm", "-f", *ids)
            remove_calls_groups(groups)

    def setup(self) -> None:
        self.check_installed()
        self.remove_containers()
        self._script("clean")
        try:
            self.start()
        except ServiceError as exc:
            if exc.exit_status == IMAGES_FAILED:  # a failure to report, not a machine to skip
                raise
            raise ServiceUnusable(f"dockerd cannot run on this machine: {exc}") from exc

    def teardown(self) -> None:
        if self.started:
            self.remove_containers()
        super().teardown()


class ExternalDocker(_ExternalEngine, DockerService):
    name = "docker"
