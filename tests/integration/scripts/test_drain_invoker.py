"""scripts/drain-invoker.sh (docs/operations.md, "Swapping a node"): its ``--stock`` mode,
which watches an invoker's action containers through the docker CLI because the Scala
invoker cannot list its calls, returns only once the node's busy container has finished and
been paused. The Scala invoker cannot run here; our invoker on the Docker backend (Podman)
stands in for it: the same container names (``wsk<uniqueName><N>_``), the same
``/disable``, and a warm container paused ``pause-grace`` after its call, as stock does.
The guide test (test_operations.py) runs the script's mode for our invoker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

import aiohttp
import pytest

from containers.docker.backend import DockerBackend
from containers.docker.local import BINDS, local_images
from front.identities import basic_auth
from harness.controller import running_invoker
from harness.processes import free_port
from invoker.admin_http import serve_admin
from tests.services import TEST_CONTAINER_LABEL

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[3]
SLEEPY = b"import time\ndef main(a):\n    time.sleep(a.get('s', 1))\n    return {'i': a.get('i')}\n"


@pytest.fixture(scope="module")
def podman_host(podman) -> str:
    """Podman's address, once the local runtime images are built in it."""
    proc = subprocess.run(
        [str(ROOT / "scripts" / "runtime-images.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/runtime-images.sh failed:\n{proc.stdout}{proc.stderr}")
    return podman.docker_host


def _running_containers(docker_host: str, prefix: str) -> list[str]:
    ps = subprocess.run(
        ["docker", "ps", "--filter", "status=running", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "DOCKER_HOST": docker_host},
    )
    return [n for n in ps.stdout.split() if n.startswith(prefix) and "_prewarm_" not in n]


async def _drain(args: list[str], docker_host: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        str(ROOT / "scripts" / "drain-invoker.sh"),
        *args,
        env={**os.environ, "DOCKER_HOST": docker_host},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace")


async def test_stock_mode_waits_until_the_busy_container_is_paused(
    kafka, couchdb, podman_host, tmp_path
):
    unique = f"d{uuid.uuid4().hex[:6]}"
    prefix = f"wsk{unique}0"
    backend = DockerBackend(
        podman_host,
        prefix,
        binds=BINDS,
        labels={TEST_CONTAINER_LABEL: "1"},
        images=local_images(),
        network="none",  # reached in its own netns: no CNI port forwarding (podman_cni_gc.py)
    )
    async with running_invoker(
        kafka, couchdb, tmp_path, backend=backend, unique_name=unique, pause_grace_s=1.0
    ) as (invoker, stub):
        port = free_port()
        runner = await serve_admin(invoker, "127.0.0.1", port)
        url = f"http://127.0.0.1:{port}"
        try:
            action, rev = await stub.create_action("sleepy", SLEEPY)
            aid = await stub.invoke(action, rev, blocking=False, content={"i": 1, "s": 4})
            # Once its container shows in the engine (creating one can take longer than the
            # script's --quiet here, a gap the script documents).
            async with asyncio.timeout(60):
                while not _running_containers(podman_host, prefix):
                    await asyncio.sleep(0.2)
            code, out = await _drain(["--stock", f"{prefix}_", "--quiet", "1", url], podman_host)
            assert code == 0 and out.rstrip().endswith("drained"), out
            assert "is now disabled" in out and "1 calls held" in out, out
            # It returned only after the call had finished (and its container was paused).
            assert any("instance" in a for a in stub.acks.get(aid, [])), out
            assert invoker.enabled is False

            # A node that stays busy: exit 1 after --timeout, still disabled.
            aid = await stub.invoke(action, rev, blocking=False, content={"i": 2, "s": 8})
            async with asyncio.timeout(60):  # its container runs (unpaused) the call
                while not _running_containers(podman_host, prefix):
                    await asyncio.sleep(0.2)
            code, out = await _drain(["--stock", f"{prefix}_", "--timeout", "3", url], podman_host)
            assert code == 1 and "still 1 calls held" in out, out
            await stub.wait_completion(aid, timeout_s=60)

            # Wrong credentials: exit 2 with the answer, nothing changed.
            async with aiohttp.ClientSession() as http:
                auth = {"Authorization": basic_auth("invoker.user:invoker.pass")}
                async with http.post(f"{url}/enable", headers=auth) as r:
                    assert r.status == 200
            env_bad = {"CONFIG_whisk_invoker_password": "wrong"}
            proc = await asyncio.create_subprocess_exec(
                str(ROOT / "scripts" / "drain-invoker.sh"),
                url,
                env={**os.environ, **env_bad},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out_b, _ = await proc.communicate()
            assert proc.returncode == 2 and b"401" in out_b, out_b
            assert invoker.enabled is True
        finally:
            await runner.cleanup()
