"""Real services for the tests: Kafka, a CouchDB-API server, etcd, Podman's Docker API, a Docker
Engine (dockerd), the wsk CLI.

The session fixtures in tests/conftest.py build these objects. Each service is started by
scripts/services.sh (the same script a developer uses), lazily (the first time a test asks for
it), on the tests' own ports and state dir so a locally running deployment is never touched:

    Kafka    127.0.0.1:19092 (KRaft controller 19093)   state .state/test/kafka/
             19094: a listener for clients behind Toxiproxy, advertised as 19095 (its proxy)
    CouchDB  http://127.0.0.1:15984 whisk_admin / some_passw0rd   state .state/test/couchdb/
             15985: its proxy in Toxiproxy
    etcd     127.0.0.1:12379 (peer 12380)   state .state/test/etcd/
             12381: its proxy in Toxiproxy
    Toxiproxy  http://127.0.0.1:18474 (its API)   state .state/test/toxiproxy/
    Podman   unix://<repo>/.state/test/podman/podman.sock
    Docker   unix://<repo>/.state/test/docker/docker.sock (dockerd, its own data and exec root)

If another pytest session already holds those (a lock file per slot), the next slot is used:
ports + 10, state in .state/test-1/, and so on. Each session starts from empty data.

Point the tests at services that already run instead (then stop()/start() skip the test):
    OW_TEST_KAFKA_BOOTSTRAP=host:port
    OW_TEST_COUCHDB_URL=http://host:port  OW_TEST_COUCHDB_USER=...  OW_TEST_COUCHDB_PASSWORD=...
    OW_TEST_ETCD_HOSTS=host:port[,host:port]
    OW_TEST_DOCKER_HOST=unix:///path/to/podman.sock      (the podman fixture)
    OW_TEST_DOCKERD_HOST=unix:///path/to/docker.sock     (the dockerd fixture)
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import socket
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest

from harness import services as real
from harness.services import (  # noqa: F401 (what the tests import from here)
    BUSYBOX_IMAGE,
    CACHE,
    COUCHDB_PASSWORD,
    COUCHDB_USER,
    SCRIPTS,
    TEST_CONTAINER_LABEL,
    NotRestartable,
    ServiceError,
    ServiceMissing,
    ServiceUnusable,
    _install_hint,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
TEST_STATE_ROOT = Path(os.environ.get("OW_TEST_STATE_DIR", REPO_ROOT / ".state"))

KAFKA_TEST_PORT = 19092
KAFKA_PROXIED_TEST_PORT = KAFKA_TEST_PORT + 2  # the broker's listener behind the proxy
KAFKA_PROXY_TEST_PORT = KAFKA_TEST_PORT + 3  # the proxy, which that listener advertises
# A second broker for the leadership scenario (tests/integration/invoker/test_chaos.py): its client
# port, its controller's and the fault proxy through which its broker reaches the controller.
KAFKA_FENCED_TEST_PORT = KAFKA_TEST_PORT + 4
KAFKA_FENCED_CONTROLLER_TEST_PORT = KAFKA_TEST_PORT + 5
KAFKA_FENCED_VIA_TEST_PORT = KAFKA_TEST_PORT + 6
COUCHDB_TEST_PORT = 15984
COUCHDB_PROXY_TEST_PORT = COUCHDB_TEST_PORT + 1
ETCD_TEST_PORT = 12379
ETCD_PEER_TEST_PORT = ETCD_TEST_PORT + 1
ETCD_PROXY_TEST_PORT = ETCD_TEST_PORT + 2  # etcd's proxy in Toxiproxy (the outage tests)
TOXIPROXY_TEST_PORT = 18474

_MAX_SLOTS = 20


def unique_name(prefix: str = "t") -> str:
    """A fresh name for a topic, database or container."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# ------------------------------------------------------------------------------------------
@dataclass
class Slot:
    """A set of ports and a state dir that this pytest session holds exclusively."""

    index: int
    state_dir: Path
    locks: list[IO[str]] = field(repr=False)

    def port(self, base: int) -> int:
        return base + 10 * self.index

    def release(self) -> None:
        """Each lock let go; the machine-wide one's file (in /tmp) removed while still held,
        and its folder with the last one: the suite leaves no file of its own in /tmp."""
        machine = Path(self.locks[0].name)
        machine.unlink(missing_ok=True)
        for lock in self.locks:
            lock.close()
        with contextlib.suppress(OSError):
            machine.parent.rmdir()  # fails while another session holds a slot


def _ports_free(index: int) -> bool:
    """Whether nothing on this machine listens on the slot's ports (another clone's tests,
    or a deployment left running, would make the services fail to start)."""
    for base in (
        KAFKA_TEST_PORT,
        KAFKA_TEST_PORT + 1,
        KAFKA_PROXIED_TEST_PORT,
        KAFKA_PROXY_TEST_PORT,
        KAFKA_FENCED_TEST_PORT,
        KAFKA_FENCED_CONTROLLER_TEST_PORT,
        KAFKA_FENCED_VIA_TEST_PORT,
        COUCHDB_TEST_PORT,
        COUCHDB_PROXY_TEST_PORT,
        ETCD_TEST_PORT,
        ETCD_PEER_TEST_PORT,
        ETCD_PROXY_TEST_PORT,
        TOXIPROXY_TEST_PORT,
    ):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
            try:
                s.bind(("127.0.0.1", base + 10 * index))
            except OSError:
                return False
    return True


def acquire_slot() -> Slot:
    """Take the first free test slot (0: .state/test, 1: .state/test-1, ...).

    The ports belong to the machine, not to this clone: a slot is also locked in a
    machine-wide folder, and skipped while something else listens on its ports, so two
    clones (a newcomer's private one beside another) can run their suites at once."""
    TEST_STATE_ROOT.mkdir(parents=True, exist_ok=True)
    machine_locks = Path(tempfile.gettempdir()) / "ow-invoker-test-slots"
    machine_locks.mkdir(exist_ok=True)
    with contextlib.suppress(PermissionError):
        machine_locks.chmod(0o1777)
    for index in range(_MAX_SLOTS):
        name = "test" if index == 0 else f"test-{index}"
        held = []
        for path in (machine_locks / f"slot-{index}.lock", TEST_STATE_ROOT / f"{name}.lock"):
            path.parent.mkdir(exist_ok=True)  # another session's release may remove it
            lock = open(path, "a")  # noqa: SIM115 - held for the session
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(lock.fileno()).st_ino != os.stat(path).st_ino:
                    raise BlockingIOError  # removed by its last holder meanwhile
            except (BlockingIOError, FileNotFoundError):
                lock.close()
                break
            held.append(lock)
        if len(held) == 2 and _ports_free(index):
            return Slot(index, TEST_STATE_ROOT / name, held)
        for lock in held:
            lock.close()
    raise ServiceError(f"all {_MAX_SLOTS} test slots are in use (or their ports are taken)")


# ------------------------------------------------------------------------------------------
# The project's services (harness/services.py), their refusals as test outcomes:
# a missing component fails the test with its install command, a machine that cannot run
# the service skips it, and so does restarting a service given by the environment.
F = TypeVar("F", bound=Callable[..., Any])


def _as_outcomes(method: F) -> F:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except ServiceMissing as e:
            pytest.fail(str(e), pytrace=False)
        except (ServiceUnusable, NotRestartable) as e:
            pytest.skip(str(e))

    return wrapper  # type: ignore[return-value]


C = TypeVar("C", bound=type)


def _for_tests(cls: C) -> C:
    for name in ("setup", "start", "stop", "kill", "restart", "check_installed"):
        setattr(cls, name, _as_outcomes(getattr(cls, name)))
    return cls


@_for_tests
class KafkaService(real.KafkaService):
    pass


@_for_tests
class ExternalKafka(real.ExternalKafka):
    pass


@_for_tests
class CouchDBService(real.CouchDBService):
    pass


@_for_tests
class ExternalCouchDB(real.ExternalCouchDB):
    pass


@_for_tests
class EtcdService(real.EtcdService):
    pass


@_for_tests
class ExternalEtcd(real.ExternalEtcd):
    pass


@_for_tests
class ToxiproxyService(real.ToxiproxyService):
    pass


@_for_tests
class PodmanService(real.PodmanService):
    pass


@_for_tests
class ExternalPodman(real.ExternalPodman):
    pass


@_for_tests
class DockerService(real.DockerService):
    pass


@_for_tests
class ExternalDocker(real.ExternalDocker):
    pass


# ------------------------------------------------------------------------------------------
def find_wsk() -> Path:
    """The wsk CLI: $WSK_BIN, else .cache/bin/wsk; skip when the install recorded that it
    cannot be built here; fail when nobody tried to install it."""
    env_bin = os.environ.get("WSK_BIN")
    if env_bin:
        path = Path(env_bin)
        if not (path.is_file() and os.access(path, os.X_OK)):
            pytest.fail(f"WSK_BIN={env_bin} is not an executable file", pytrace=False)
        return path
    path = CACHE / "bin" / "wsk"
    if path.exists() and os.access(path, os.X_OK):
        return path
    unavailable = CACHE / "wsk" / "UNAVAILABLE"
    if unavailable.is_file():
        pytest.skip(
            "the wsk CLI could not be built on this machine (set WSK_BIN to a wsk binary): "
            + unavailable.read_text().strip().replace("\n", " ")[:400]
        )
    pytest.fail(f"the wsk CLI is not installed: {_install_hint('wsk')}", pytrace=False)


def find_node_modules() -> Path:
    """The node_modules folder that holds the official `openwhisk` JS client."""
    path = CACHE / "node" / "node_modules"
    if not (path / "openwhisk" / "package.json").is_file():
        pytest.fail(
            f"the openwhisk npm client is not installed: {_install_hint('openwhisk-js')}",
            pytrace=False,
        )
    return path
