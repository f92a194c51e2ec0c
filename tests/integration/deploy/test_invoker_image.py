"""The ow-invoker image (deploy/invoker/Dockerfile), built here from Debian packages and PyPI
(scripts/invoker-image.sh) into the tests' Docker Engine, and run where the stock
``openwhisk/invoker`` image runs: ansible's command (``/init.sh --id N --uniqueName N``) and
environment, its ``/conf`` volume (the PKCS12 keystore, here with the test CA), the Docker
socket mounted at ``/var/run/docker.sock``; actions become containers on the same engine.

Test-only departures, each because the test engine differs from a worker node: host
networking (the engine has no bridge; so the admin API is told to bind 127.0.0.1 and the
runtimes are reached on loopback ports, ``OW_INVOKER_DOCKER_REACH=host``), and the local
runtime images with the host's ``/usr`` (no registry). Skipped when deb.debian.org or PyPI
cannot be reached (the build needs both).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import urllib.request
from pathlib import Path

import pytest

from containers.docker.local import BINDS, NODE_IMAGE, PYTHON_IMAGE
from harness.controller import controller, make_config
from harness.fpc_scheduler import stand_in_scheduler
from harness.processes import free_port
from tests import stock_env
from tests.integration.invoker.test_stock import (
    ACTION,
    _admin_ping,
    _clean_environ,
    _start,
    tls_terminator,
)
from tests.services import TEST_CONTAINER_LABEL
from tests.testca import PASSWORD, make_ca
from whisk.clock import SystemClock
from whisk.etcd import EtcdClient
from whisk.protocol.controller import activation_message

pytestmark = pytest.mark.services
ROOT = Path(__file__).resolve().parents[3]
IMAGE = "localhost/ow-invoker:test"


def _reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10):
            return True
    except OSError:
        return False


def _docker(dockerd, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker", *args],
        env={**os.environ, "DOCKER_HOST": dockerd.docker_host},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _run_image(
    dockerd, image: str, name: str, env: dict[str, str], argv: list[str], tmp_path: Path,
    conf: Path | None = None, kinds: str = f"python:3.11={PYTHON_IMAGE}",
) -> None:  # fmt: skip
    """Start the image as the role starts the stock one: its command, ``env`` in an env file
    (secrets off the command line), the engine's socket, ``conf`` as ``/conf``; plus the
    test engine's departures (the module docstring), ``kinds`` the local runtime images."""
    env = {
        **env,
        "OW_INVOKER_ADMIN_HOST": "127.0.0.1",
        "OW_INVOKER_DOCKER_REACH": "host",
        "OW_INVOKER_DOCKER_BINDS": ",".join(BINDS),
        "OW_INVOKER_RUNTIME_IMAGES": kinds,
    }
    env_file = tmp_path / "invoker.env"
    env_file.touch(0o600)
    env_file.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    volumes = ["-v", f"{dockerd.socket_path}:/var/run/docker.sock"]
    if conf is not None:
        volumes += ["-v", f"{conf}:/conf:ro"]
    run = _docker(
        dockerd, "run", "-d", "--name", name, "--label", TEST_CONTAINER_LABEL,
        "--network", "host", "--env-file", str(env_file), *volumes,
        image, "/bin/sh", "-c", f"exec /init.sh {' '.join(argv)}",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr


def _http_ansible_env(kafka, couchdb, config) -> dict[str, str]:
    """The role's environment with CouchDB and the admin API over plain http (the drain
    script's curl and the stand-in's tests speak no TLS), on this test's services."""
    return stock_env.ansible_env(
        kafka_hosts=kafka.bootstrap,
        **stock_env.couch_settings(couchdb, config.db_prefix),
        topics_prefix=config.topic_prefix,
        invoker_protocol="http",
    )


@pytest.fixture(scope="module")
def image(dockerd) -> str:
    for url in ("http://deb.debian.org/debian/dists/bookworm/Release", "https://pypi.org/simple/"):
        if not _reachable(url):
            pytest.skip(f"{url} is not reachable: the image is built from Debian and PyPI")
    build = subprocess.run(
        [str(ROOT / "scripts" / "invoker-image.sh"), IMAGE],
        env={**os.environ, "DOCKER_HOST": dockerd.docker_host},
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return IMAGE


def test_the_image_stands_where_the_stock_one_stands(dockerd, image):
    info = json.loads(_docker(dockerd, "image", "inspect", image).stdout)[0]["Config"]
    assert info["Cmd"] == ["/init.sh"] and "8080/tcp" in info["ExposedPorts"]
    env = dict(e.split("=", 1) for e in info["Env"])
    assert env["PORT"] == "8080" and env["DOCKER_HOST"] == "unix:///var/run/docker.sock"
    assert (env["OW_INVOKER_BACKEND"], env["OW_INVOKER_ADMIN_HOST"]) == ("docker", "0.0.0.0")
    version = _docker(dockerd, "run", "--rm", "--label", TEST_CONTAINER_LABEL, image,
                      "/init.sh", "--help")  # fmt: skip
    assert version.returncode == 0 and "--uniqueName" in version.stdout


async def test_the_image_runs_an_activation_with_the_ansible_environment(
    dockerd, image, kafka, couchdb, tmp_path
):
    ca = make_ca(tmp_path / "conf")  # the role's /conf: its keystore and, here, the CA
    index = random.randrange(1000, 9000)
    config = make_config(tmp_path, instance=index, unique_name=str(index))
    admin_port = free_port()
    name = f"invoker{index}"
    async with tls_terminator(couchdb.port, ca) as couch_tls_port:
        env = stock_env.ansible_env(
            kafka_hosts=kafka.bootstrap,
            **stock_env.couch_settings(
                couchdb, config.db_prefix, protocol="https", port=couch_tls_port
            ),
            topics_prefix=config.topic_prefix,
            api_host=("https", "openwhisk.test", 443),
            invoker_keystore="/conf/server.p12",
            invoker_keystore_password=PASSWORD,
        )
        env.update(PORT=str(admin_port), SSL_CERT_FILE="/conf/ca.pem")
        argv = stock_env.ansible_argv(index)
        _run_image(dockerd, image, name, env, argv, tmp_path, conf=ca.dir)
        try:
            async with controller(kafka, couchdb, config) as stub:
                for _ in range(300):
                    if await asyncio.to_thread(_admin_ping, admin_port, ca, True) == 200:
                        break
                    state = _docker(dockerd, "inspect", "-f", "{{.State.Running}}", name)
                    assert state.stdout.strip() == "true", _docker(dockerd, "logs", name).stderr
                    await asyncio.sleep(0.3)
                action, rev = await stub.create_action("hello", ACTION)
                aid = await stub.invoke(action, rev, content={"name": "image"})
                await stub.wait_completion(aid, timeout_s=120)
                record = await stub.record(aid)
                assert record["response"]["result"] == {
                    "api": "https://openwhisk.test",
                    "concurrent": "false",
                    "hello": "image",
                }
                actions = _docker(dockerd, "ps", "-a", "--format", "{{.Names}}").stdout.split()
                assert any(n.startswith(f"wsk{index}{index}_") for n in actions), actions
            stop = _docker(dockerd, "stop", "-t", "40", name, timeout=60)
            assert stop.returncode == 0, stop.stderr
            code = _docker(dockerd, "inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
            logs = _docker(dockerd, "logs", name)
            assert code == "0", logs.stdout[-2000:] + logs.stderr[-2000:]
            assert "admin API on https://" in logs.stdout + logs.stderr
            left = _docker(dockerd, "ps", "-a", "--format", "{{.Names}}").stdout.split()
            assert not [n for n in left if n.startswith(f"wsk{index}{index}_")], left
        finally:
            _docker(dockerd, "rm", "-f", name)


SLEEPY = b"import time\ndef main(a):\n    time.sleep(a.get('s', 1))\n    return {'i': a.get('i')}\n"


async def test_migration_rehearsal_drain_stop_replace_the_image_start(
    dockerd, image, kafka, couchdb, tmp_path
):
    """docs/operations.md's swap, with the stock environment: the node runs `ow-invoker run`
    from a package (standing in for the image it replaces) with ansible's environment and
    id; it is drained with calls in flight, stopped; calls sent meanwhile wait in
    invoker<N>; the image starts with the same environment and id and runs them. Every
    call completes once, none is lost. (The admin API is http here: the drain script's curl
    speaks no client certificates; ``invoker_protocol: http`` in the role.)"""
    ca = make_ca(tmp_path / "conf")
    index = random.randrange(1000, 9000)
    config = make_config(tmp_path, instance=index, unique_name=str(index))
    admin_port = free_port()
    env = _http_ansible_env(kafka, couchdb, config)
    env["PORT"] = str(admin_port)
    argv = stock_env.ansible_argv(index)
    name = f"invoker{index}"
    async with controller(kafka, couchdb, config) as stub:
        action, rev = await stub.create_action("sleepy", SLEEPY)

        async def send(first: int, count: int) -> list[str]:
            return [
                await stub.invoke(action, rev, blocking=False, content={"i": i, "s": 1})
                for i in range(first, first + count)
            ]

        old_env = {**_clean_environ(), **env, "OW_INVOKER_STATE_DIR": str(tmp_path / "old")}
        log = tmp_path / "old.log"
        old = _start(["run", *argv], old_env, log)
        try:
            for _ in range(300):
                if await asyncio.to_thread(_admin_ping, admin_port, None) == 200:
                    break
                assert old.poll() is None, log.read_text()[-3000:]
                await asyncio.sleep(0.3)
            before = await send(0, 6)
            await stub.wait_acks(before[0], timeout_s=60)  # the node is at work
            drain = await asyncio.to_thread(
                subprocess.run,
                [str(ROOT / "scripts" / "drain-invoker.sh"), "--quiet", "2",
                 f"http://127.0.0.1:{admin_port}"],
                env={**os.environ, "CONFIG_whisk_invoker_password": "invoker.pass"},
                capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip
            assert drain.returncode == 0 and "drained" in drain.stdout, drain.stderr
            old.terminate()
            assert await asyncio.to_thread(old.wait, 40) == 0, log.read_text()[-3000:]
        finally:
            if old.poll() is None:
                old.kill()
        for aid in before:  # drained: the old node finished all it had taken
            await stub.wait_completion(aid, timeout_s=10)
        during = await send(6, 4)  # nobody consumes invoker<N> now

        _run_image(dockerd, image, name, env, argv, tmp_path, conf=ca.dir)
        try:
            after = await send(10, 2)
            for aid in before + during + after:
                acks = await stub.wait_completion(aid, timeout_s=120)
                assert sum("instance" in a for a in acks) == 1, acks
                record = await stub.record(aid)
                assert record["response"]["statusCode"] == 0, record
            results = sorted([(await stub.record(a))["response"]["result"]["i"]
                              for a in before + during + after])  # fmt: skip
            assert results == list(range(12))
        finally:
            logs = _docker(dockerd, "logs", name)
            _docker(dockerd, "stop", "-t", "30", name, timeout=60)
            _docker(dockerd, "rm", "-f", name)
        assert "Traceback" not in logs.stderr, logs.stderr[-3000:]


async def test_the_image_serves_the_scheduler_mode_with_the_role_s_scheduler_environment(
    dockerd, image, kafka, couchdb, etcd, tmp_path
):
    """The same image and command with the role's ``scheduler_env`` merged in (upstream's
    default deployment): it registers in etcd, is ``up`` once its own health test action
    has run (a nodejs container on the engine), answers a creation from the stand-in
    scheduler, pulls and runs a call in its Docker container, and leaves etcd when stopped."""
    index = random.randrange(1000, 9000)
    config = make_config(tmp_path, instance=index, unique_name=str(index))
    admin_port = free_port()
    name = f"invoker{index}"
    cluster = f"image{index}"
    env = _http_ansible_env(kafka, couchdb, config)
    env.update(stock_env.ansible_scheduler_env(etcd.hosts))
    env.update(CONFIG_whisk_cluster_name=cluster, PORT=str(admin_port))
    kinds = f"python:3.11={PYTHON_IMAGE},nodejs:20={NODE_IMAGE}"  # nodejs: its health test
    argv = stock_env.ansible_argv(index)
    _run_image(dockerd, image, name, env, argv, tmp_path, kinds=kinds)
    try:
        async with (
            EtcdClient(etcd.hosts) as look,
            controller(kafka, couchdb, config) as stub,
            stand_in_scheduler(kafka.bootstrap, topic_prefix=config.topic_prefix) as s,
        ):

            async def status() -> str | None:
                records = await look.get_prefix(f"{cluster}/invokers/{index}")
                return next((json.loads(v)["status"] for v in records.values()), None)

            async with asyncio.timeout(120):
                while await status() != "up":
                    state = _docker(dockerd, "inspect", "-f", "{{.State.Running}}", name)
                    assert state.stdout.strip() == "true", _docker(dockerd, "logs", name).stderr
                    await asyncio.sleep(0.5)
            action, rev = await stub.create_action("hello", ACTION)
            creation = await s.create_container(index, "guest", action, rev)
            ack = await s.wait_ack(creation.creation_id, timeout_s=60)
            assert ack.error is None, ack.reason
            msg = activation_message(action, rev, start_ms=SystemClock().epoch_ms())
            s.enqueue("guest", action, rev, msg.to_json())
            await stub.wait_completion(msg.activation_id, timeout_s=60)
            record = await stub.record(msg.activation_id)
            assert record["response"]["result"]["api"] == "https://openwhisk.example.com"
            stop = _docker(dockerd, "stop", "-t", "40", name, timeout=60)
            assert stop.returncode == 0, stop.stderr
            code = _docker(dockerd, "inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
            logs = _docker(dockerd, "logs", name)
            assert code == "0", logs.stdout[-2000:] + logs.stderr[-2000:]
            assert "(fpc mode)" in logs.stdout + logs.stderr
            assert await look.get_prefix(f"{cluster}/") == {}, "the lease revoked at stop"
            left = _docker(dockerd, "ps", "-a", "--format", "{{.Names}}").stdout.split()
            assert not [n for n in left if n.startswith(f"wsk{index}{index}_")], left
    finally:
        _docker(dockerd, "rm", "-f", name)
