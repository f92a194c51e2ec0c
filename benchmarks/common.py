"""Shared by the benchmarks: real services started by the project's scripts on their own
ports (so a benchmark never disturbs a running deployment or test session)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.services import (  # noqa: E402
    COUCHDB_PASSWORD,
    COUCHDB_USER,
    CouchDBService,
    DockerService,
    KafkaService,
    PodmanService,
)
from whisk.summary import percentile  # noqa: E402,F401 (re-exported)

STATE = ROOT / ".state" / "bench"
LABEL = "ow-invoker-bench"  # on every container a benchmark makes: its engines remove them


# The test suite starts Kafka tuned for a fast start (C1 only, serial GC); benchmarks want
# the broker's steady-state speed. Neither keeps JVM perf data (a /tmp/hsperfdata_* left
# behind).
os.environ.setdefault(
    "KAFKA_JVM_OPTS", "-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:-UsePerfData -Xss512k"
)


@contextmanager
def exclusive_machine() -> Iterator[None]:
    """Hold the machine-wide benchmark lock: two benchmarks at once would share the bench
    ports and state (one's teardown stopping the other's services) and spoil each other's
    figures, so a second one waits here. The file goes with its last holder (removed while
    held; a waiter that then finds it gone takes a new one): nothing is left in /tmp."""
    path = Path(tempfile.gettempdir()) / "ow-invoker-bench.lock"
    while True:
        held = False
        with open(path, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print(f"waiting for another benchmark to finish ({path})", file=sys.stderr)
                fcntl.flock(lock, fcntl.LOCK_EX)
            with suppress(FileNotFoundError):
                held = os.fstat(lock.fileno()).st_ino == path.stat().st_ino
            if held:
                try:
                    yield
                finally:
                    path.unlink(missing_ok=True)
                return


@contextmanager
def kafka_and_couchdb(kafka_port: int = 29092, couchdb_port: int = 25984) -> Iterator[tuple]:
    with exclusive_machine():
        kafka = KafkaService(STATE, port=kafka_port, controller_port=kafka_port + 1)
        couch = CouchDBService(
            STATE, port=couchdb_port, user=COUCHDB_USER, password=COUCHDB_PASSWORD
        )
        try:
            kafka.setup()
            couch.setup()
            yield kafka, couch
        finally:
            kafka.teardown()
            couch.teardown()


def start_engines(names: list[str]) -> tuple[dict[str, str], Callable[[], None]]:
    """dockerd and/or Podman under .state/bench (the project's service classes), images built."""
    started: list[Any] = []

    def stop() -> None:
        for svc in reversed(started):
            svc.remove_containers(LABEL)
            svc.teardown()

    hosts = {}
    try:
        for name in names:
            svc = DockerService(STATE) if name == "docker" else PodmanService(STATE)
            svc.setup()
            started.append(svc)
            build_images(name, svc.docker_host)
            hosts[name] = svc.docker_host
    except BaseException:
        stop()
        raise
    return hosts, stop


def build_images(engine: str, host: str) -> None:
    env = {**os.environ, "OW_ENGINE": engine, "DOCKER_HOST": host}
    proc = subprocess.run(
        [str(ROOT / "scripts" / "runtime-images.sh")],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        sys.exit(f"scripts/runtime-images.sh failed:\n{proc.stdout}{proc.stderr}")
