"""The compatibility corpus (tests/compat/vectors) against both runtimes on both backends.

Every vector runs in a fresh container created, initialised and run through the backend as the
invoker does (``create``, ``/init``, ``/run``, ``read_logs`` up to the sentinels), on the
process backend and on the Docker backend with the local runtime images
(``scripts/runtime-images.sh``) on a Docker Engine and on Podman. One backend serves all the
vectors: ``-k process``, ``-k docker`` or ``-k podman`` picks one.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from containers.backend import ContainerSpec
from containers.docker.backend import DockerBackend
from containers.docker.local import BINDS, local_images
from containers.process.backend import ProcessBackend
from tests.compat.corpus import Vector, load, play

ROOT = Path(__file__).resolve().parents[4]
NODE = shutil.which("node")
VECTORS = [*load("python"), *load("nodejs")]
_counter = itertools.count(1)
# Vectors in flight per backend: container start-up overlaps well. Podman gets fewer: in CI
# (2 cores) one of eight podman vectors in flight once had no /init answer within 30 s.
PARALLEL = {"process": 8, "docker": 8, "podman": 4}
_engine_of: dict[int, str] = {}  # id(backend) -> its param, for `outcomes`

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _param(v: Vector) -> object:
    marks = [pytest.mark.skipif(NODE is None, reason="node is not installed")]
    return pytest.param(v, id=str(v), marks=marks if v.family == "nodejs" else [])


@pytest_asyncio.fixture(
    scope="module",
    loop_scope="module",
    params=[
        "process",
        pytest.param("docker", marks=pytest.mark.services),
        pytest.param("podman", marks=pytest.mark.services),
    ],
)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[ProcessBackend | DockerBackend]:
    """One backend per module run: the process backend, or the Docker backend as production
    runs it (``reach="netns"``: each runtime on its own container's loopback, no network) on a
    Docker Engine (the ``dockerd`` fixture) or on Podman. Podman's published ports are
    tested in test_docker_backend (a container behind them once stayed unreachable for
    minutes: a stale CNI rule of a removed container, see scripts/podman_cni_gc.py)."""
    prefix = f"wskc{os.getpid()}x{next(_counter)}"
    if request.param == "process":
        state = Path(tempfile.mkdtemp(prefix="owcorpus-", dir="/var/tmp"))  # not under /tmp
        b: ProcessBackend | DockerBackend = ProcessBackend(state / "state", prefix)
        _engine_of[id(b)] = "process"
        try:
            await b.start()
            yield b
        finally:
            await b.close()
            await b.remove_leftovers()
            shutil.rmtree(state, ignore_errors=True)
        return
    engine = request.param
    svc = request.getfixturevalue("dockerd" if engine == "docker" else "podman")
    built = await asyncio.to_thread(
        subprocess.run,
        [str(ROOT / "scripts" / "runtime-images.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "OW_ENGINE": "docker", "DOCKER_HOST": svc.docker_host}
        if engine == "docker"
        else None,
    )
    if built.returncode != 0:
        pytest.fail(f"scripts/runtime-images.sh failed:\n{built.stdout}{built.stderr}")
    b = DockerBackend(
        svc.docker_host,
        prefix,
        images=local_images(),
        binds=BINDS,
        labels={svc.container_label: "1"},
        network="none",
    )
    _engine_of[id(b)] = engine
    try:
        await b.start()
        yield b
    finally:
        await b.close()


async def _play_fresh(backend: ProcessBackend | DockerBackend, vector: Vector) -> list[str]:
    """One vector in a container of its own, created and removed as the invoker would."""
    name = f"{backend.name_prefix}_{next(_counter)}_guest_corpus"
    env = vector.data.get("container_env", {})
    container = None
    try:
        container = await backend.create(ContainerSpec(name, vector.kind, 256, env=env))
        return await play(vector, container)
    except Exception as e:  # reported as the vector's failure, not as the module's
        return [f"{type(e).__name__}: {e}"]
    finally:
        if container is not None:
            await container.destroy()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def outcomes(
    request: pytest.FixtureRequest, backend: ProcessBackend | DockerBackend
) -> dict[str, list[str]]:
    """The differences found for every vector selected on this backend, played
    :data:`PARALLEL` at a time (container start-up dominates and overlaps well)."""
    engine = _engine_of[id(backend)]
    wanted = {
        str(item.callspec.params["vector"])
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is request.module
        and item.callspec.params.get("backend") == engine
    }
    vectors = [v for v in VECTORS if str(v) in wanted and (v.family != "nodejs" or NODE)]
    gate = asyncio.Semaphore(PARALLEL[engine])

    async def one(v: Vector) -> list[str]:
        async with gate:
            return await _play_fresh(backend, v)

    found = await asyncio.gather(*(one(v) for v in vectors))
    return {str(v): problems for v, problems in zip(vectors, found, strict=True)}


@pytest.mark.parametrize("vector", [_param(v) for v in VECTORS])
async def test_vector(outcomes: dict[str, list[str]], vector: Vector) -> None:
    problems = outcomes[str(vector)]
    assert not problems, f"{vector} ({vector.data['from']}):\n  " + "\n  ".join(problems)
