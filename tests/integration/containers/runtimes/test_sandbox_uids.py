"""A destroyed container's uid, with the real process backend and sandbox: not handed to the
next containers while a process of the old container is still alive, and handed on once
nothing of it is.

The zygote reaps a container's shim right after the backend's SIGKILL, while the processes
of its pid namespace may still be dying. To hold one alive, the test freezes the container's
own detached ``sleep`` in a cgroup v1 freezer (a frozen process cannot act on its SIGKILL
until thawed; cgroup v2's freezer lets SIGKILL through, so it cannot hold one). The zygote
gets 4 of its backend's 4096 uids, so that reuse shows within a few containers."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from containers.backend import ContainerError
from containers.process import backend as process
from containers.process import claim
from containers.process.backend import ProcessBackend, ProcessContainer
from containers.runtimes import sandbox
from tests.integration.containers.backends import (
    Maker,
    new_prefix,
    py,
    result,
    run,
    state_dir,  # noqa: F401  (a fixture)
    wait_until,
)

FREEZER = Path("/sys/fs/cgroup/freezer")
POOL = 4
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root"),
    pytest.mark.skipif(
        not (FREEZER / "cgroup.procs").exists(),
        reason="needs the cgroup v1 freezer to hold a killed process alive",
    ),
]

DETACHED = py("""
    import os, subprocess
    def main(a):
        subprocess.Popen(["sleep", "300"], start_new_session=True)
        return {"uid": os.getuid()}
    """)
UID = "import os\ndef main(a):\n    return {'uid': os.getuid()}\n"


class FewUids(claim.UidBlockClaim):
    """The backend's own block, of which its zygote is given the first ``POOL`` uids."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count = POOL


@pytest.fixture
async def backend(
    state_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[ProcessBackend]:
    monkeypatch.setattr(process, "UidBlockClaim", FewUids)
    b = ProcessBackend(state_dir / "state", new_prefix(), pids_limit=64, spares=0)
    await b.start()
    yield b
    await b.close()
    await b.remove_leftovers()


def sleep_of(c: ProcessContainer, uid: int) -> list[int]:
    """Host pids of the container's ``sleep`` (from its cgroup; else any running as ``uid``)."""
    pids = (
        c.cgroup.pids()
        if c.cgroup is not None
        else map(int, filter(str.isdigit, os.listdir("/proc")))
    )
    found = []
    for pid in pids:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields["Name"].strip() == "sleep" and int(fields["Uid"].split()[0]) == uid:
                found.append(pid)
    return found


async def test_a_destroyed_containers_uid_waits_for_its_last_process(
    backend: ProcessBackend,
) -> None:
    make = Maker(backend)
    old = await make(DETACHED)
    uid = result(await run(old))["uid"]
    assert await wait_until(lambda: bool(sleep_of(old, uid)), 5)
    (straggler,) = sleep_of(old, uid)
    freezer = FREEZER / f"owtest-uids-{os.getpid()}"
    freezer.mkdir()
    destroying = None
    try:
        (freezer / "cgroup.procs").write_text(str(straggler))
        (freezer / "freezer.state").write_text("FROZEN")
        assert await wait_until(lambda: "FROZEN" in (freezer / "freezer.state").read_text(), 5)
        destroying = asyncio.ensure_future(old.destroy())  # SIGKILL; waits for its cgroup
        assert await wait_until(lambda: not os.path.exists(f"/proc/{old.pid}"), 5), "reaped"
        later, refused = [], ""
        for _ in range(POOL):
            try:
                later.append(result(await run(await make(UID)))["uid"])
            except ContainerError as e:
                refused = str(e)
                break
        assert os.path.exists(f"/proc/{straggler}"), "the old container's sleep still lives"
        assert uid not in later, f"uid {uid} handed on while its old process lives: {later}"
        assert len(set(later)) == POOL - 1
        assert "1 waiting for their container's last process" in refused
    finally:
        (freezer / "freezer.state").write_text("THAWED")  # its SIGKILL takes it now
        if destroying is not None:
            await destroying
        assert await wait_until(lambda: not os.path.exists(f"/proc/{straggler}"), 5)
        freezer.rmdir()
    assert await wait_until(lambda: uid not in sandbox._running_uids(), 5)
    assert result(await run(await make(UID)))["uid"] == uid, "free once nothing of it lives"
