"""What the container backends' tests share: actions and their bodies (:class:`Maker`,
:func:`init_body`, :func:`run`, :func:`result`, the actions themselves), and how each backend
is made for a test.

- The process backend: :func:`started` in a state directory of its own (the ``state_dir``
  fixture, outside ``/tmp`` so that each container's private ``/tmp`` can be used), with a
  fresh name prefix (:func:`new_prefix`).
- The Docker backend, on each of the suite's engines (``ENGINES``: dockerd and Podman's
  Docker-compatible API): :func:`new_backend` as production runs it (containers with no
  network, reached from inside their own network namespace), its images the local stand-ins
  for the official runtime images (``scripts/runtime-images.sh``, :mod:`containers.docker.local`)
  built in the engine first (:func:`prepare_engine`). Every container carries the engine
  fixture's label, so the fixture removes whatever a failed test leaves. A module that uses
  ``engine_host`` imports it with :func:`pytest_generate_tests`, which runs each of its tests
  on both engines, those marked ``docker_only`` on dockerd alone.

``tests/integration/containers/test_backend_contract.py`` runs the contract against every backend;
``test_backend.py`` and ``test_backend.py`` hold what only one backend does.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import os
import random
import shutil
import subprocess
import tempfile
import textwrap
import time
import uuid
import zipfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from containers.backend import ContainerBackend, ContainerSpec, HttpResult
from containers.docker.backend import DockerBackend
from containers.docker.engine import Engine
from containers.docker.local import BINDS, local_images
from containers.process.backend import ProcessBackend

ROOT = Path(__file__).resolve().parents[3]
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")
ENGINES = ("docker", "podman")
_counter = itertools.count(1)


# -- actions ---------------------------------------------------------------------------------


class Maker:
    """Creates containers with fresh names and initialises them; ``made`` lists them."""

    def __init__(self, backend: ContainerBackend) -> None:
        self.backend = backend
        self.made: list[Any] = []

    async def __call__(
        self,
        code: str | bytes,
        kind: str = "python:3.11",
        memory_mb: int = 256,
        main: str = "main",
        env: dict[str, str] | None = None,
        expect: int = 200,
    ) -> Any:  # the backend's own container type: its tests look at its attributes
        prefix = self.backend.name_prefix  # type: ignore[attr-defined]
        name = f"{prefix}_{next(_counter)}_guest_action"
        c = await self.backend.create(ContainerSpec(name, kind, memory_mb))
        self.made.append(c)
        r = await c.init(init_body(code, main, env), 30)
        assert r.status == expect, r
        return c


def init_body(code: str | bytes, main: str = "main", env: dict[str, str] | None = None) -> bytes:
    binary = isinstance(code, bytes)
    value = {
        "name": "action",
        "main": main,
        "binary": binary,
        "code": base64.b64encode(code).decode() if binary else code,
        "env": env or {},
    }
    return json.dumps({"value": value}).encode()


def run_body(params: Any = None, **context: str) -> bytes:
    ctx = {"activation_id": "a" * 32, "namespace": "guest", "deadline": "0", **context}
    return json.dumps({"value": {} if params is None else params, **ctx}).encode()


async def run(c: Any, params: Any = None, timeout_s: float = 30, **ctx: str) -> HttpResult:
    return await c.run(run_body(params, **ctx), timeout_s)


def result(r: HttpResult) -> Any:
    return json.loads(r.body)


def zipped(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return buf.getvalue()


def py(source: str) -> str:
    return textwrap.dedent(source).lstrip()


async def wait_until(cond: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.05)
    return cond()


ECHO_PY = "def main(args):\n    return {'greeting': 'Hello ' + args.get('name', 'stranger')}\n"
HEALTH_JS = "function main(params) { return params; }"
GREEDY = "def main(a):\n    data = b'x' * (300 * 1024 * 1024)\n    return {'n': len(data)}\n"
SPIN_PY = py("""
    import subprocess, sys, time
    BURN = "import time\\nend = time.process_time() + %s\\nwhile time.process_time() < end: pass"
    def main(a):
        if a.get("child"):
            subprocess.run([sys.executable, "-c", BURN % a["cpu"]], check=True)
        else:
            exec(BURN % a["cpu"])
        time.sleep(a.get("sleep", 0))
        return {}
    """)


# -- the process backend ---------------------------------------------------------------------


def new_prefix() -> str:
    return f"wskt{os.getpid()}x{next(_counter)}"


@pytest.fixture
def state_dir() -> Iterator[Path]:
    # Outside /tmp, so that the private /tmp per container can be used.
    d = Path(tempfile.mkdtemp(prefix="owproc-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


async def started(state_dir: Path, **kwargs: Any) -> ProcessBackend:
    b = ProcessBackend(state_dir / "state", new_prefix(), **kwargs)
    await b.start()
    return b


@pytest.fixture
async def backend(state_dir: Path) -> AsyncIterator[ProcessBackend]:
    """A started process backend (sandboxed, as by default), closed and swept after."""
    b = await started(state_dir)
    yield b
    await b.close()
    await b.remove_leftovers()


@pytest.fixture
def make(backend: ContainerBackend) -> Maker:
    return Maker(backend)


# -- the Docker backend ----------------------------------------------------------------------

_services: dict[str, Any] = {}  # engine address -> its service fixture (dockerd or podman)


def new_docker_prefix() -> str:
    return f"wskd{os.getpid()}x{next(_counter)}"


def prepare_engine(request: pytest.FixtureRequest, name: str) -> Any:
    """The engine's service fixture (``docker``: dockerd, ``podman``), once the local runtime
    images are built in it (or up to date)."""
    svc = request.getfixturevalue("dockerd" if name == "docker" else "podman")
    env = {**os.environ, "OW_ENGINE": name, "DOCKER_HOST": svc.docker_host}
    proc = subprocess.run(
        [str(ROOT / "scripts" / "runtime-images.sh")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env if name == "docker" else None,
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/runtime-images.sh failed:\n{proc.stdout}{proc.stderr}")
    _services[svc.docker_host] = svc
    return svc


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test that uses an engine runs on dockerd and on Podman, except those marked
    ``docker_only`` (what Podman lacks, or what only repeats there what another test shows)."""
    if "engine_host" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("docker_only")
        engines = ["docker"] if only else list(ENGINES)
        metafunc.parametrize("engine_host", engines, indirect=True, scope="module")


@pytest.fixture(scope="module")
def engine_host(request: pytest.FixtureRequest) -> str:
    """The engine's address, its runtime images built. Not parametrized (a module importing
    this fixture without :func:`pytest_generate_tests`): Podman."""
    return str(prepare_engine(request, getattr(request, "param", "podman")).docker_host)


@pytest.fixture
def svc(engine_host: str) -> Any:
    """The engine's service fixture: ``.engine``, ``.container_label``, ``.busybox_image``."""
    return _services[engine_host]


def new_backend(host: str, label: str, prefix: str | None = None, **kw: Any) -> DockerBackend:
    kw.setdefault("reach", "netns")
    kw.setdefault("network", "none")
    kw.setdefault("images", local_images())
    return DockerBackend(
        host,
        prefix or new_docker_prefix(),
        binds=BINDS,
        labels={label: "1"},
        **kw,
    )


@pytest.fixture
async def engine(engine_host: str) -> AsyncIterator[Engine]:
    e = Engine(engine_host)
    await e.start()
    yield e
    await e.close()


@pytest.fixture
async def bridge_network(engine: Engine) -> AsyncIterator[str]:
    """A bridge network of its own on the test dockerd (started with --bridge=none), on a
    random private /24 (other dockerds on this machine have theirs); removed afterwards."""
    name = f"ow-test-{uuid.uuid4().hex[:8]}"
    for _ in range(5):
        subnet = f"10.{random.randint(160, 250)}.{random.randint(0, 255)}.0/24"
        config = {"Name": name, "Driver": "bridge", "IPAM": {"Config": [{"Subnet": subnet}]}}
        try:
            network = await engine.docker.networks.create(config)
            break
        except Exception as e:  # an overlapping subnet: try another
            error = e
    else:
        pytest.fail(f"cannot create a bridge network: {error}")
    yield name
    await network.delete()
