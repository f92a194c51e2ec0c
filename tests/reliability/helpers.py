"""Helpers for fault tests: an invoker in its own process, and process inspection."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from invoker.config import InvokerConfig
from tests.e2e.platforms import free_port
from tests.procs import alive

ROOT = Path(__file__).resolve().parents[2]


def processes_with_marker(prefix: str) -> list[int]:
    """Live processes of the process backend carrying this container prefix."""
    needle = b"\0--marker\0" + prefix.encode() + b"\0"
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and alive(int(entry)):
            pids.append(int(entry))
    return pids


class InvokerProcess:
    """``ow-invoker run`` as a child process, configured like ``config``."""

    def __init__(self, config: InvokerConfig, kafka: str, couchdb, log_path: Path) -> None:
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
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
