"""Start ``ow-invoker standalone`` for one policy and wait until its REST API answers.

Each policy gets a fresh process on a free loopback port with its own state dir, so no warm
container, statistic or record leaks from one policy's run into the next.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from sebs_wrappers.procs import ChildProcess, free_port
from whisk.client import OpenWhisk


class Platform:
    """One ``ow-invoker standalone --policy P`` child process."""

    def __init__(
        self,
        policy: str,
        *,
        cores: int,
        user_memory_mb: int,
        state_dir: Path,
        log: Path | None = None,
        extra_args: tuple[str, ...] = (),
        host_ports: tuple[int, ...] = (),
    ) -> None:
        self.policy = policy
        self.port = free_port()
        self.state_dir = state_dir
        self.ready_file = state_dir / "ready"
        argv = [
            sys.executable,
            "-m",
            "ow_invoker",
            "standalone",
            "--port",
            str(self.port),
            "--policy",
            policy,
            "--action-cores",
            str(cores),
            "--user-memory",
            str(user_memory_mb),
            "--state-dir",
            str(state_dir),
            "--ready-file",
            str(self.ready_file),
            *extra_args,
            *(("--sandbox-host-ports", ",".join(map(str, host_ports))) if host_ports else ()),
        ]
        self.proc = ChildProcess(argv, log)

    @property
    def apihost(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, auth: str, timeout_s: float = 120.0) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.ready_file.unlink(missing_ok=True)
        self.proc.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with OpenWhisk(self.apihost, auth, timeout_s=5) as ow:
            while loop.time() < deadline:
                if not self.proc.alive():
                    raise RuntimeError(
                        f"standalone ({self.policy}) exited early; see {self.proc.log or 'its log'}"
                    )
                # the ready file appears once an invoker is healthy behind the API
                if self.ready_file.exists() and await ow.ready():
                    return
                await asyncio.sleep(0.25)
        self.stop()
        raise TimeoutError(f"standalone ({self.policy}) did not answer within {timeout_s} s")

    def stop(self) -> None:
        self.proc.stop(grace_s=10)
