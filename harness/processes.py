"""The project's own processes as children, configured like the services they join:
``ow-invoker run`` (:class:`InvokerProcess`) and a whole platform, embedded (``standalone``)
or ``front`` + ``run`` on Kafka and CouchDB (:func:`running_platform`). Secrets go in the
children's environment, never on a command line, which every local process can read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from containers import cgroups
from front.identities import GUEST_AUTH, basic_auth
from harness.controller import CouchAddress, KafkaAddress
from invoker.config import InvokerConfig
from sebs_wrappers.procs import free_port
from whisk.clock import SystemClock

ROOT = Path(__file__).resolve().parents[1]  # the project: the children run from there
__all__ = ["ROOT", "InvokerProcess", "Platform", "free_port", "running_platform"]


@dataclass
class Platform:
    mode: str
    url: str
    auth: str = GUEST_AUTH
    state: Path | None = None  # the invoker's (the standalone's) state directory
    pids: tuple[int, ...] = ()

    def rest(
        self,
        method: str,
        path: str,
        body: object | None = None,
        raw: bytes | None = None,
        auth: str | None = None,
    ) -> tuple[int, object]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "Authorization": basic_auth(auth or self.auth),
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


def _spawn(
    args: list[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``env``: more environment (secrets go there, never in ``args``: the command line is
    readable by every process on the machine)."""
    out = open(log, "ab")  # noqa: SIM115 (kept by the child)
    return subprocess.Popen(
        [sys.executable, "-m", "ow_invoker", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        stdout=out,
        stderr=out,
    )


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/ping", timeout=2) as r:
            return "up" in json.loads(r.read())["invokers"].values()
    except OSError:
        return False


def _wait(url: str, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    clock = SystemClock()
    deadline = clock.now() + 90
    while clock.now() < deadline:
        if _healthy(url):
            return
        for p, log in zip(procs, logs, strict=True):
            if p.poll() is not None:
                raise RuntimeError(f"platform process exited:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    raise RuntimeError(
        "the platform did not become healthy:\n"
        + "\n".join(log.read_text()[-2000:] for log in logs)
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextmanager
def running_platform(
    mode: str,
    tmp: Path,
    kafka: KafkaAddress | None = None,
    couchdb: CouchAddress | None = None,
    extra: tuple[str, ...] = (),
) -> Iterator[Platform]:
    """Start the platform in ``mode``; ``kafka``/``couchdb`` are the services for "kafka"."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tag = f"e{uuid.uuid4().hex[:6]}"
    common = ["--unique-name", tag, "--pause-grace-s", "60", *extra]
    if "--policy" not in extra:
        common += ["--policy", "fifo"]
    if "--action-cores" not in extra:
        common += ["--action-cores", "1"]
    if mode == "embedded":
        logs = [tmp / "standalone.log"]
        procs = [
            _spawn(
                [
                    "standalone",
                    "--port",
                    str(port),
                    "--state-dir",
                    str(tmp / "state"),
                    "--admin-port",
                    "0",
                    *common,
                ],
                logs[0],
            )
        ]
    else:
        assert kafka is not None and couchdb is not None, "mode kafka needs both services"
        services = [
            "--kafka",
            kafka.bootstrap,
            "--topic-prefix",
            f"{tag}_",
            "--couchdb-url",
            couchdb.url,
            "--couchdb-user",
            couchdb.user,
            "--db-prefix",
            f"{tag}_",
        ]
        secret = {"CONFIG_whisk_couchdb_password": couchdb.password}
        logs = [tmp / "front.log", tmp / "invoker.log"]
        procs = [
            _spawn(["front", "--port", str(port), *services], logs[0], secret),
            _spawn(
                [
                    "run",
                    "--id",
                    "0",
                    "--state-dir",
                    str(tmp / "state"),
                    "--admin-port",
                    str(free_port()),
                    *services,
                    *common,
                ],
                logs[1],
                secret,
            ),
        ]
    try:
        _wait(url, procs, logs)
        yield Platform(mode, url, state=tmp / "state", pids=tuple(p.pid for p in procs))
    finally:
        _stop(procs)


class InvokerProcess:
    """``ow-invoker run`` as a child process, configured like ``config``."""

    def __init__(
        self, config: InvokerConfig, kafka: str, couchdb: CouchAddress, log_path: Path
    ) -> None:
        self.config = config
        self.kafka = kafka
        self.couchdb = couchdb
        self.log_path = log_path
        self.admin_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.entry = ["-m", "ow_invoker"]  # or a script that calls ow_invoker.cli.main
        self.extra_args: list[str] = []

    def start(self) -> None:
        c = self.config
        args = [
            sys.executable,
            *self.entry,
            "run",
            "--id",
            str(c.instance),
            "--unique-name",
            c.unique_name or str(c.instance),
            "--kafka",
            self.kafka,
            "--topic-prefix",
            c.topic_prefix,
            "--couchdb-url",
            self.couchdb.url,
            "--couchdb-user",
            self.couchdb.user,
            "--db-prefix",
            c.db_prefix,
            "--state-dir",
            c.state_dir,
            "--policy",
            c.policy,
            "--action-cores",
            ",".join(map(str, c.action_cores)) + ",",
            "--user-memory-mb",
            str(c.user_memory_mb),
            "--admin-port",
            str(self.admin_port),
            "--shutdown-deadline",
            "10",
            *self.extra_args,
        ]
        # Secrets in the environment: a command line is readable by every local process.
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "CONFIG_whisk_couchdb_password": self.couchdb.password,
            "CONFIG_whisk_invoker_password": c.admin_password or "invoker.pass",
        }
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it)
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=log)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        """Kill it if it still runs, and remove what it leaves (its containers' cgroups)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
            remove_container_cgroups(self.config.container_prefix)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def remove_container_cgroups(prefix: str, timeout_s: float = 10.0) -> list[str]:
    """Remove the cgroups of the containers named ``prefix``_* that a killed invoker leaves
    (its containers die with its zygote; their cgroups stay until the next invoker with that
    prefix starts, which a test's last one never does), killing what is left in them. No
    test may leave a cgroup on the host. Returns the names of those still busy."""
    support = cgroups.probe(prefix)
    left = cgroups.find_leftovers(support, prefix)
    for _ in range(max(1, int(timeout_s * 10))):
        for cg in left:
            cg.kill_all()
        left = [cg for cg in left if not cg.remove()]
        if not left:
            cgroups.remove_calls_group(support)
            break
        time.sleep(0.1)
    return [cg.memory.name for cg in left]
