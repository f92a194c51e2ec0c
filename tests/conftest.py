"""Session fixtures for the real services (see tests/services.py and docs/services.md).

    kafka         .bootstrap "127.0.0.1:19092", .host, .port, .stop() .start() .kill() .restart()
    couchdb       .url "http://127.0.0.1:15984", .user, .password, .auth, .stop() .start() ...
    etcd          .hosts "127.0.0.1:12379" (CONFIG_whisk_etcd_hosts), .url, .stop() .start() ...
    podman        .docker_host "unix:///.../podman.sock", .socket_path, .busybox_image,
                  .container_label, .remove_containers(label), .stop() .start() ...
    dockerd       the same for a Docker Engine (dockerd): .docker_host "unix:///.../docker.sock"
    wsk_cli       Path of the wsk binary
    node_modules  Path of a node_modules folder holding the `openwhisk` npm client

Each service starts the first time a test asks for it and stops at the end of the session.
A missing component fails the test with the `scripts/install.sh <component>` to run.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hostguard
import lanes
import skip_guard
from services import (
    COUCHDB_PASSWORD,
    COUCHDB_TEST_PORT,
    COUCHDB_USER,
    ETCD_PEER_TEST_PORT,
    ETCD_TEST_PORT,
    KAFKA_PROXIED_TEST_PORT,
    KAFKA_PROXY_TEST_PORT,
    KAFKA_TEST_PORT,
    TOXIPROXY_TEST_PORT,
    CouchDBService,
    DockerService,
    EtcdService,
    ExternalCouchDB,
    ExternalDocker,
    ExternalEtcd,
    ExternalKafka,
    ExternalPodman,
    KafkaService,
    PodmanService,
    Slot,
    ToxiproxyService,
    acquire_slot,
    find_node_modules,
    find_wsk,
)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if hostguard.start(config):  # first: before the session's temporary directories exist
        config.pluginmanager.register(hostguard, "ow-host-guard")
        config.pluginmanager.register(skip_guard, "ow-skip-guard")
    config.pluginmanager.register(lanes, "ow-lanes")
    config.addinivalue_line(
        "markers", "docker_only: an engine test run on the Docker Engine only (not on Podman)"
    )
    # scripts/test.sh stops a session with SIGINT, so that its fixtures stop the services
    # they started; a session started in the background by a shell inherits SIGINT ignored.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def service_slot() -> Iterator[Slot]:
    """Ports and a state dir no other pytest session on this machine uses."""
    slot = acquire_slot()
    yield slot
    slot.release()


@pytest.fixture(scope="session")
def kafka(service_slot: Slot) -> Iterator[KafkaService]:
    external = os.environ.get("OW_TEST_KAFKA_BOOTSTRAP")
    if external:
        yield ExternalKafka(external)
        return
    svc = KafkaService(
        service_slot.state_dir,
        port=service_slot.port(KAFKA_TEST_PORT),
        controller_port=service_slot.port(KAFKA_TEST_PORT + 1),
        proxied=(
            service_slot.port(KAFKA_PROXIED_TEST_PORT),
            service_slot.port(KAFKA_PROXY_TEST_PORT),
        ),
    )
    try:
        svc.setup()
        yield svc
    finally:
        svc.teardown()


@pytest.fixture(scope="session")
def couchdb(service_slot: Slot) -> Iterator[CouchDBService]:
    external = os.environ.get("OW_TEST_COUCHDB_URL")
    if external:
        yield ExternalCouchDB(
            external,
            os.environ.get("OW_TEST_COUCHDB_USER", COUCHDB_USER),
            os.environ.get("OW_TEST_COUCHDB_PASSWORD", COUCHDB_PASSWORD),
        )
        return
    svc = CouchDBService(
        service_slot.state_dir,
        port=service_slot.port(COUCHDB_TEST_PORT),
        user=COUCHDB_USER,
        password=COUCHDB_PASSWORD,
    )
    try:
        svc.setup()
        yield svc
    finally:
        svc.teardown()


@pytest.fixture(scope="session")
def etcd(service_slot: Slot) -> Iterator[EtcdService]:
    external = os.environ.get("OW_TEST_ETCD_HOSTS")
    if external:
        yield ExternalEtcd(external)
        return
    svc = EtcdService(
        service_slot.state_dir,
        port=service_slot.port(ETCD_TEST_PORT),
        peer_port=service_slot.port(ETCD_PEER_TEST_PORT),
    )
    try:
        svc.setup()
        yield svc
    finally:
        svc.teardown()


@pytest.fixture(scope="session")
def toxiproxy(service_slot: Slot) -> Iterator[ToxiproxyService]:
    svc = ToxiproxyService(service_slot.state_dir, port=service_slot.port(TOXIPROXY_TEST_PORT))
    try:
        svc.setup()
        yield svc
    finally:
        svc.teardown()


@pytest.fixture(scope="session")
def podman(service_slot: Slot) -> Iterator[PodmanService]:
    external = os.environ.get("OW_TEST_DOCKER_HOST")
    if external:
        yield ExternalPodman(external)
        return
    svc = PodmanService(service_slot.state_dir)
    try:
        svc.setup()
        yield svc
    finally:
        svc.teardown()


@pytest.fixture(scope="session")
def dockerd(service_slot: Slot) -> Iterator[DockerService]:
    external = os.environ.get("OW_TEST_DOCKERD_HOST")
    if external:
        yield ExternalDocker(external)
        return
    svc = DockerService(service_slot.state_dir)
    try:
        svc.setup()
        yield svc
    finally:
        svc.teardown()


@pytest.fixture(scope="session")
def wsk_cli() -> Path:
    return find_wsk()


@pytest.fixture(scope="session")
def node_modules() -> Path:
    return find_node_modules()
