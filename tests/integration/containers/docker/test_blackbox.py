"""Blackbox actions (the user's own image) end to end on ``ow-invoker standalone``.

- Docker backend: a pure blackbox image that serves ``/init`` and ``/run`` itself, "blackbox
  plus code" (a runtime image under a user's name, the code sent with ``/init``), a web
  blackbox action, a bad image name (400) and an image that cannot be pulled (developer
  error), all through the REST API as ``wsk`` sends it.
- SeBS's own OpenWhisk path (``sebs/openwhisk/openwhisk.py``): an image holding the benchmark
  code (as SeBS's ``Dockerfile.function`` builds it), a zip holding only SeBS's wrapper
  ``__main__.py``, created with SeBS's flags ``action create NAME --web true --docker IMAGE
  --memory M --timeout T -p MINIO_STORAGE_... CODE.zip``, invoked as its ``LibraryTrigger``
  (``action invoke --result NAME --param ...``) and its ``HTTPTrigger`` (``action get NAME
  --url``, POST to the URL + ``.json``), and measured as its ``download_metrics`` does
  (``activation get <request_id>``: ``duration`` and the ``initTime`` annotation). The ``wsk``
  Go binary cannot be built here (the module proxy refuses openwhisk-cli), so the same
  command lines go through the Adobe I/O Runtime CLI, another OpenWhisk CLI; then the
  project's own deployer (``sebs_wrappers.deploy`` with ``DeployOptions(image=...)``).
- Process backend: a blackbox action is answered with a developer error naming the backend.

Images are built locally through the engine's API (no registry is reachable) and removed
afterwards; every container the platform made is removed by its name prefix.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import tarfile
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from containers.docker.backend import PREFIX_LABEL
from containers.docker.engine import Engine
from containers.docker.local import BINDS, PYTHON_IMAGE, local_images
from harness.processes import ROOT, Platform, running_platform
from tests.integration.containers.backends import (  # noqa: F401 (engine_host: a fixture)
    ENGINES,
    engine_host,
)

pytestmark = pytest.mark.services


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The Docker backend's tests run on the Docker Engine and on Podman."""
    if "engine_host" in metafunc.fixturenames:
        metafunc.parametrize("engine_host", list(ENGINES), indirect=True, scope="module")


AIO = ROOT / ".cache" / "aio" / "node_modules"
BOX_IMAGE = "localhost/ow-test-userbox:v1"  # the user's own action server
SEBS_IMAGE = "localhost/sebs-python:test"  # runtime image + SeBS benchmark code
PLUS_IMAGE = "localhost/ow-test-python-as-user:v1"  # a runtime image under a user's name
NS = "/api/v1/namespaces/_"

# A user's image implementing the action interface itself (stdlib only). It listens on
# :8080, or where the backend's host-network mode asks (__OW_RUNTIME_LISTEN).
BOX_SERVER = r"""
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

INIT = {}


class Handler(BaseHTTPRequestHandler):
    def _answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.path == "/init":
            value = body.get("value", {})
            INIT.update(
                calls=INIT.get("calls", 0) + 1,
                had_code="code" in value,
                name=value.get("name"),
                main=value.get("main"),
                env_keys=sorted(value.get("env", {})),
            )
            return self._answer(200, {"ok": True})
        print("userbox run", body.get("activation_id"), flush=True)
        print("userbox stderr", file=sys.stderr, flush=True)
        self._answer(200, {"box": True, "args": body.get("value"), "init": INIT,
                           "activation_id": body.get("activation_id")})

    def log_message(self, *args):
        pass


listen = os.environ.pop("__OW_RUNTIME_LISTEN", "")
host, _, port = listen.rpartition(":") if listen else ("0.0.0.0", "", "8080")
HTTPServer((host, int(port)), Handler).serve_forever()
"""

PY_ACTION = "def main(args):\n    print('plus log')\n    return {'plus': args.get('x')}\n"


def _tar(files: dict[str, bytes]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


async def build_image(engine: Engine, tag: str, files: dict[str, bytes]) -> None:
    """``docker build`` through the engine's API: offline, FROM a local image."""
    await engine.docker.images.build(
        fileobj=_tar(files), tag=tag, rm=True, pull=False, encoding="identity"
    )


def sebs_function_files() -> dict[str, bytes]:
    """SeBS's 010.sleep benchmark code and its wrapper's ``__main__.py``."""
    from sebs_wrappers import catalog

    try:
        bench = catalog.BENCHMARKS["010.sleep"]
        code = (bench.code_dir / "function.py").read_bytes()
        wrapper = (catalog.wrapper_dir() / "__main__.py").read_bytes()
    except (catalog.SebsNotInstalled, OSError) as e:
        pytest.fail(f"SeBS's benchmark code is missing ({e}): scripts/install.sh python")
    return {"function.py": code, "__main__.py": wrapper}


async def build_images(host: str) -> None:
    engine = Engine(host)
    await engine.start()
    base = f"FROM {PYTHON_IMAGE}\n"
    try:
        await build_image(
            engine,
            BOX_IMAGE,
            {
                "Dockerfile": (
                    base + "COPY server.py /box/server.py\n"
                    'ENTRYPOINT ["/usr/bin/python3", "-I", "-u", "/box/server.py"]\n'
                ).encode(),
                "server.py": BOX_SERVER.encode(),
            },
        )
        # As SeBS's dockerfiles/openwhisk/python/Dockerfile.function: the runtime image plus
        # the benchmark as the importable package ``function``. SeBS pip-installs it into
        # the interpreter's path; ours is the host's (read-only /usr), so it goes into the
        # working directory, where the zip is unpacked and which is on sys.path.
        files = sebs_function_files()
        await build_image(
            engine,
            SEBS_IMAGE,
            {
                "Dockerfile": (base + "COPY function/ /action/function/\n").encode(),
                "function/__init__.py": b"",
                "function/function.py": files["function.py"],
            },
        )
        await engine.docker.images.tag(PYTHON_IMAGE, PLUS_IMAGE.split(":")[0], tag="v1")
    finally:
        await engine.close()


async def remove_images(host: str) -> None:
    engine = Engine(host)
    await engine.start()
    try:
        for image in (BOX_IMAGE, SEBS_IMAGE, PLUS_IMAGE):
            try:
                await engine.docker.images.delete(image, force=True)
            except Exception as e:  # already gone, or still used: say so, do not fail
                print(f"removing {image}: {e}")
    finally:
        await engine.close()


@pytest.fixture(scope="module")
def images(engine_host: str) -> Iterator[str]:  # noqa: F811
    """The user's images, built from the local runtime image; removed afterwards."""
    try:
        asyncio.run(build_images(engine_host))
        yield engine_host
    finally:
        asyncio.run(remove_images(engine_host))


def docker_args(host: str, unique: str) -> tuple[str, ...]:
    return (
        "--backend",
        "docker",
        "--docker-host",
        host,
        "--docker-binds",
        ",".join(BINDS),
        "--runtime-images",  # the health action and prewarms need the managed kinds too
        ",".join(f"{k}={v}" for k, v in local_images().items()),
        "--docker-reach",  # each engine's containers reached in their own netns, as in production
        "netns",
        "--docker-network",
        "none",
        "--unique-name",
        unique,
    )


async def remove_containers(host: str, prefix: str) -> int:
    """Remove what a platform with container prefix ``prefix`` left (nothing, normally)."""
    engine = Engine(host)
    await engine.start()
    try:
        left = await engine.list(f"{PREFIX_LABEL}={prefix}")
        for c in left:
            await engine.remove(c["Id"])
        return len(left)
    finally:
        await engine.close()


@pytest.fixture(scope="module")
def docker_platform(images: str, tmp_path_factory) -> Iterator[Platform]:
    unique = f"bb{uuid.uuid4().hex[:6]}"
    tmp = tmp_path_factory.mktemp("blackbox")
    try:
        with running_platform("embedded", tmp, extra=docker_args(images, unique)) as p:
            yield p
    finally:
        left = asyncio.run(remove_containers(images, f"wsk{unique}0"))
        assert left == 0, f"the platform left {left} containers"


def put(p: Platform, name: str, exec_: dict[str, Any], **extra: Any) -> dict[str, Any]:
    status, body = p.rest("PUT", f"{NS}/actions/{name}?overwrite=true", {"exec": exec_, **extra})
    assert status == 200, body
    assert isinstance(body, dict)
    return body


def invoke(p: Platform, name: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    status, body = p.rest("POST", f"{NS}/actions/{name}?blocking=true", params)
    assert isinstance(body, dict), body
    return status, body


def zip_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- Docker backend -----------------------------------------------------------------------------


def test_pure_blackbox_runs_the_users_image(docker_platform: Platform) -> None:
    p = docker_platform
    view = put(
        p,
        "box",
        {"kind": "blackbox", "image": BOX_IMAGE},
        annotations=[{"key": "web-export", "value": True}],
    )
    assert view["exec"] == {"kind": "blackbox", "image": BOX_IMAGE, "binary": False}
    status, record = invoke(p, "box", {"n": 1})
    assert status == 200, record
    result = record["response"]["result"]
    assert result["box"] is True and result["args"] == {"n": 1}
    assert result["activation_id"] == record["activationId"]
    # As the stock invoker: /init is sent once, without code, with the action's env.
    init = result["init"]
    assert init["calls"] == 1 and init["had_code"] is False
    assert init["name"] == "box" and init["main"] == "main"
    assert {"__OW_ACTIVATION_ID", "__OW_NAMESPACE", "__OW_DEADLINE"} <= set(init["env_keys"])
    assert any(a["key"] == "initTime" for a in record["annotations"])
    # Warm: the same container, no second /init.
    status, again = invoke(p, "box", {"n": 2})
    assert status == 200 and again["response"]["result"]["init"]["calls"] == 1
    assert not any(a["key"] == "initTime" for a in again["annotations"])
    # A web action too (no assertion on logs: a user's image writes no sentinels, so as
    # stock the record holds what the engine had when the answer came).
    status, web = p.rest("GET", "/api/v1/web/guest/default/box.json?who=web")
    assert status == 200 and isinstance(web, dict), web
    assert web["box"] is True and web["args"]["who"] == "web"


def test_blackbox_plus_code_sends_the_code_with_init(docker_platform: Platform) -> None:
    p = docker_platform
    put(p, "plus", {"kind": "blackbox", "image": PLUS_IMAGE, "code": PY_ACTION})
    status, record = invoke(p, "plus", {"x": "text"})
    assert status == 200 and record["response"]["result"] == {"plus": "text"}, record
    code = b64(zip_of({"__main__.py": PY_ACTION.encode()}))
    put(p, "pluszip", {"kind": "blackbox", "image": PLUS_IMAGE, "code": code})
    status, body = p.rest("GET", f"{NS}/actions/pluszip")
    assert status == 200 and isinstance(body, dict)
    assert body["exec"]["binary"] is True and body["exec"]["code"] == code
    status, record = invoke(p, "pluszip", {"x": "zip"})
    assert status == 200 and record["response"]["result"] == {"plus": "zip"}, record


def test_bad_and_missing_images(docker_platform: Platform) -> None:
    p = docker_platform
    status, body = p.rest(
        "PUT", f"{NS}/actions/bad?overwrite=true", {"exec": {"kind": "blackbox", "image": "A B"}}
    )
    assert status == 400 and "image name" in str(body), body
    status, body = p.rest("PUT", f"{NS}/actions/bad?overwrite=true", {"exec": {"kind": "blackbox"}})
    assert status == 400 and "exec.image" in str(body), body
    # "latest" of an image nobody has: the pull fails (no registry), a developer error.
    missing = f"localhost/ow-missing-{uuid.uuid4().hex[:8]}"
    put(p, "gone", {"kind": "blackbox", "image": missing})
    status, record = invoke(p, "gone", {})
    assert status == 502, record
    assert record["response"]["status"] == "action developer error"
    assert record["response"]["result"] == {"error": f"Failed to pull container image '{missing}'."}
    # Another tag: tolerated while a local copy exists, else the same developer error. The
    # invoker stays healthy (a user's missing image is not the node's problem).
    put(p, "gonev1", {"kind": "blackbox", "image": f"{missing}:v1"})
    status, record = invoke(p, "gonev1", {})
    assert status == 502 and record["response"]["status"] == "action developer error"
    assert record["response"]["result"]["error"] == (
        f"Failed to pull container image '{missing}:v1'."
    )
    status, ping = p.rest("GET", "/ping")
    assert status == 200 and isinstance(ping, dict)
    assert list(ping["invokers"].values()) == ["up"], ping
    put(p, "box2", {"kind": "blackbox", "image": BOX_IMAGE})
    assert invoke(p, "box2", {})[0] == 200


# -- SeBS's own OpenWhisk path ------------------------------------------------------------------


class SebsCli:
    """SeBS's ``wsk`` command lines, run by the aio runtime CLI (``wsk`` cannot be built)."""

    def __init__(self, p: Platform, home: Path) -> None:
        if not (AIO / "@adobe" / "aio-cli-plugin-runtime").is_dir():
            pytest.fail("the aio runtime CLI is missing: run `scripts/install.sh aio`")
        self.argv = ["node", str(ROOT / "scripts" / "aio-runtime.js"), "runtime"]
        self.env = {
            **os.environ,
            "NODE_PATH": str(AIO),
            "AIO_RUNTIME_APIHOST": p.url,
            "AIO_RUNTIME_AUTH": p.auth,
            "AIO_CLI_TELEMETRY_OPTOUT": "true",
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
        }

    @staticmethod
    def params(tmp: Path, **values: Any) -> list[str]:
        """SeBS's ``--param K <json>``: wsk parses each value as JSON, aio only objects and
        booleans (a number stays a string), so the values go in a ``--param-file``."""
        path = tmp / f"params-{uuid.uuid4().hex[:6]}.json"
        path.write_text(json.dumps(values))
        return ["--param-file", str(path)]

    def __call__(self, *args: str) -> str:
        proc = subprocess.run(
            [*self.argv, *args], env=self.env, capture_output=True, text=True, timeout=180
        )
        assert proc.returncode == 0, f"{' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout


def last_json(text: str) -> Any:
    """The JSON document a CLI printed (after any leading status line)."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    return json.loads(text[min(starts) :])


def sebs_zip(tmp: Path) -> Path:
    """SeBS's ``package_code`` for python: a zip of ``__main__.py`` only."""
    path = tmp / "010.sleep.zip"
    path.write_bytes(zip_of({"__main__.py": sebs_function_files()["__main__.py"]}))
    return path


STORAGE = {  # SeBS passes its Minio settings; the wrapper reads all three on every call
    "MINIO_STORAGE_SECRET_KEY": "secret",
    "MINIO_STORAGE_ACCESS_KEY": "access",
    "MINIO_STORAGE_CONNECTION_URL": "127.0.0.1:9",
}


def test_sebs_openwhisk_deployment_path(docker_platform: Platform, tmp_path: Path) -> None:
    p = docker_platform
    cli = SebsCli(p, tmp_path)
    name = "sebs-local-010.sleep-python-3.11"  # SeBS's default_function_name pattern
    storage = [a for k, v in STORAGE.items() for a in ("-p", k, v)]
    # SeBS puts CODE.zip last; aio's `-p` takes every value up to the next flag, so the
    # zip goes right after the name here. The request the CLI sends is the same.
    # create_function: `wsk action list`, then create with SeBS's flags.
    assert name not in cli("action", "list")
    cli(
        "action", "create", name, str(sebs_zip(tmp_path)), "--web", "true",
        "--docker", SEBS_IMAGE, "--memory", "256", "--timeout", str(60 * 1000), *storage,
        "--use-runtime-auth",
    )  # fmt: skip
    got = last_json(cli("action", "get", name))
    assert got["exec"]["kind"] == "blackbox" and got["exec"]["image"] == SEBS_IMAGE
    assert got["limits"]["memory"] == 256
    # LibraryTrigger.sync_invoke: `wsk action invoke --result NAME --param K <json>`.
    out = last_json(cli("action", "invoke", "--result", name, *cli.params(tmp_path, sleep=0.1)))
    assert out.get("result") == {"result": 0.1}, out
    assert out["is_cold"] is True and out["request_id"]
    # download_metrics: `wsk activation get <request_id>` -> duration and initTime.
    activation = last_json(cli("activation", "get", out["request_id"]))
    assert activation["activationId"] == out["request_id"]
    assert activation["duration"] >= 100
    init = [a["value"] for a in activation["annotations"] if a["key"] == "initTime"]
    assert init and init[0] > 0
    # create_trigger(HTTP): `wsk action get NAME --url`, POST JSON to the URL + ".json".
    url = cli("action", "get", name, "--url").strip().split("\n")[-1] + ".json"
    assert url.endswith(f"/api/v1/web/guest/default/{name}.json"), url
    path = url[url.index("/api/v1/web/") :]
    status, body = p.rest("POST", path, {"sleep": 0})
    assert status == 200 and isinstance(body, dict), body
    assert body["result"] == {"result": 0} and body["is_cold"] is False
    # update_function: the same flags with `action update` (SeBS on a cached function).
    cli(
        "action", "update", name, str(sebs_zip(tmp_path)), "--web", "true",
        "--docker", SEBS_IMAGE, "--memory", "512", "--timeout", str(60 * 1000), *storage,
        "--use-runtime-auth",
    )  # fmt: skip
    out = last_json(cli("action", "invoke", "--result", name, *cli.params(tmp_path, sleep=0)))
    assert out["result"] == {"result": 0} and out["is_cold"] is True  # a new revision


async def test_project_deployer_with_an_image(docker_platform: Platform, tmp_path: Path) -> None:
    """``sebs_wrappers.deploy`` with ``--docker``: blackbox plus the project's full zip."""
    from sebs_wrappers import catalog, deploy
    from whisk.client import OpenWhisk

    async with OpenWhisk(docker_platform.url, docker_platform.auth) as ow:
        opts = deploy.DeployOptions(image=PLUS_IMAGE, sizes={"010": "test"})
        dep = await deploy.deploy(
            catalog.resolve(["010"]), ow, None, tmp_path, opts, log=lambda *a: None
        )
        action = await ow.get_action("sebs-010-sleep")
        assert action["exec"]["kind"] == "blackbox" and action["exec"]["image"] == PLUS_IMAGE
        checks = await deploy.verify(dep, ow)
    assert [c.ok for c in checks] == [True], [(c.action, c.detail) for c in checks]


# -- process backend ----------------------------------------------------------------------------


def test_blackbox_on_the_process_backend_is_a_developer_error(tmp_path: Path) -> None:
    with running_platform("embedded", tmp_path) as p:
        put(p, "box", {"kind": "blackbox", "image": BOX_IMAGE})
        status, record = invoke(p, "box", {})
        assert status == 502, record
        assert record["response"]["status"] == "action developer error"
        error = record["response"]["result"]["error"]
        assert "docker backend" in error and "process backend" in error, error
        # Nothing was run, nothing is broken: a python action still runs.
        put(p, "py", {"kind": "python:3.11", "code": PY_ACTION})
        status, record = invoke(p, "py", {"x": 1})
        assert status == 200 and record["response"]["result"] == {"plus": 1}
