"""``ow-invoker run`` started as the ansible role starts the stock invoker: exactly the
role's environment (tests/stock_env.py, with local values) and its command line
(``--id N --uniqueName N``), nothing of ours but a state directory. CouchDB is reached over
https through a TLS terminator with a CA the test makes (trusted through ``SSL_CERT_FILE``);
the admin API is https with the PKCS12 keystore and client authentication, as ansible's
defaults have it; the manifest is inline. A controller stand-in then runs activations end to
end: result, ``__OW_API_HOST`` from ``WHISK_API_HOST_*``, the extra env var, an exception's
text, the record in the activations database. The Helm chart's set runs the same way with
the one change ow-invoker needs, an ``--id``.

The same over Kafka SASL_SSL: a broker of the module's own with a TLS listener (PEM keystore
from the test's CA, SASL PLAIN for one user; scripts/services.sh ``KAFKA_TLS_*``), the role's
store variables pointed at one PEM file, the SASL user added as ``invoker.extraEnv`` would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from harness.controller import controller, make_config
from harness.processes import free_port
from tests import stock_env
from tests.services import KafkaService
from tests.testca import PASSWORD, CertAuthority, make_ca
from whisk.bus.base import BusUnavailable
from whisk.bus.kafka import KafkaBus
from whisk.bus.kafka_security import KafkaSecurity

pytestmark = pytest.mark.services
ROOT = Path(__file__).resolve().parents[3]

ACTION = b"""import os
def main(args):
    if args.get("fail"):
        raise ValueError("boom!")
    return {"api": os.environ.get("__OW_API_HOST"),
            "concurrent": os.environ.get("__OW_ALLOW_CONCURRENT"),
            "hello": args.get("name")}
"""


@contextlib.asynccontextmanager
async def tls_terminator(target_port: int, ca: CertAuthority) -> AsyncIterator[int]:
    """https on a port of its own, forwarded as plain TCP to ``target_port`` on 127.0.0.1
    (as a TLS-terminating proxy in front of CouchDB)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(ca.cert("server"), ca.key("server"))

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def _admin_ping(port: int, ca: CertAuthority | None, client_cert: bool = True) -> int:
    """The admin API's /ping status: https with ``ca`` (and a client certificate), else http."""
    if ca is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=5) as r:
                return r.status
        except OSError:
            return -1
    context = ssl.create_default_context(cafile=str(ca.ca))
    if client_cert:
        context.load_cert_chain(ca.cert("server"), ca.key("server"))  # one the keystore holds
    try:
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/ping", context=context, timeout=5
        ) as r:
            return r.status
    except (urllib.error.URLError, ssl.SSLError, ConnectionError) as e:
        if isinstance(e, urllib.error.HTTPError):
            return e.code
        return -1


async def _until_up(
    port: int, ca: CertAuthority | None, proc: subprocess.Popen[bytes], log: Path
) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError(
                f"ow-invoker run exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            )
        if await asyncio.to_thread(_admin_ping, port, ca, True) == 200:
            return
        await asyncio.sleep(0.3)
    raise AssertionError(f"the admin API never answered:\n{log.read_text()[-3000:]}")


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "ow_invoker", *args], cwd=ROOT, env=env, stdout=out, stderr=out
        )


def _clean_environ() -> dict[str, str]:
    """The test process's environment without any invoker setting of its own."""
    ours = ("OW_INVOKER_", "CONFIG_", "KAFKA_HOSTS", "DB_", "WHISK_", "RUNTIMES_MANIFEST", "PORT")
    return {k: v for k, v in os.environ.items() if not k.startswith(ours)}


async def _ansible_run(
    kafka,
    couchdb,
    tmp_path: Path,
    ca: CertAuthority,
    kafka_hosts: str,
    kafka_env: dict[str, str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> str:
    """Start ``run`` with the role's environment (Kafka at ``kafka_hosts``; ``kafka_env``:
    the role's Kafka parameters, ``extra_env``: ``invoker.extraEnv``), run two activations
    through the controller stand-in (on ``kafka``'s plain listener), stop it; its log."""
    index = random.randrange(1000, 9000)  # invoker<N>: ansible's uniqueName is N too
    config = make_config(tmp_path, instance=index, unique_name=str(index))
    admin_port = free_port()
    async with tls_terminator(couchdb.port, ca) as couch_tls_port:
        env = stock_env.ansible_env(
            kafka_hosts=kafka_hosts,
            **stock_env.couch_settings(
                couchdb, config.db_prefix, protocol="https", port=couch_tls_port
            ),
            topics_prefix=config.topic_prefix,
            api_host=("https", "openwhisk.test", 443),
            invoker_keystore=str(ca.p12("server")),
            invoker_keystore_password=PASSWORD,
            invoker_password="invoker.pass",
            **(kafka_env or {}),
        )
        env["PORT"] = str(admin_port)  # ansible's 8080, published as 12001 + N: free here
        env.update(extra_env or {})  # the role's last step: env | combine(invoker.extraEnv)
        log = tmp_path / "invoker.log"
        child_env = {
            **_clean_environ(),
            **env,
            "SSL_CERT_FILE": str(ca.ca),  # the CouchDB terminator's CA, as a system CA
            "OW_INVOKER_STATE_DIR": config.state_dir,  # ours: where the containers live
            "PYTHONUNBUFFERED": "1",
        }
        async with controller(kafka, couchdb, config) as stub:
            proc = _start(["run", *stock_env.ansible_argv(index)], child_env, log)
            try:
                await _until_up(admin_port, ca, proc, log)
                # clientAuth=true (ansible's default): no certificate, no admin API
                assert await asyncio.to_thread(_admin_ping, admin_port, ca, False) != 200

                action, rev = await stub.create_action("hello", ACTION)
                aid = await stub.invoke(action, rev, content={"name": "stock"})
                acks = await stub.wait_completion(aid, timeout_s=90)
                record = await stub.record(aid)
                assert record["response"]["result"] == {
                    "api": "https://openwhisk.test",
                    "concurrent": "false",
                    "hello": "stock",
                }
                assert record["response"]["statusCode"] == 0
                assert any("instance" in a for a in acks)

                aid = await stub.invoke(action, rev, content={"fail": True})
                await stub.wait_completion(aid, timeout_s=60)
                failed = await stub.record(aid)
                assert failed["response"]["result"] == {"error": "boom!"}
                assert failed["response"]["statusCode"] == 1  # an application error
                pings = [p for p in stub.pings if p.get("name", {}).get("instance") == index]
                assert pings and pings[-1]["name"].get("uniqueName") == str(index)
            finally:
                proc.terminate()
                await asyncio.to_thread(proc.wait, 40)
    text = log.read_text()
    assert "admin API on https://" in text, text[-2000:]
    assert proc.returncode == 0, text[-2000:]
    return text


async def test_run_with_the_ansible_environment(kafka, couchdb, tmp_path):
    ca = make_ca(tmp_path / "ca")
    text = await _ansible_run(kafka, couchdb, tmp_path, ca, kafka.bootstrap)
    assert "CouchDB at https://127.0.0.1:" in text


SASL_USER, SASL_PASSWORD = "ow-invoker", "kafka-secret"


@pytest.fixture(scope="module")
def tls_kafka(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[KafkaService, int, CertAuthority]]:
    """A broker of this module's own with a SASL_SSL listener (PLAIN, one user) beside its
    plain one, its certificate from a CA made here."""
    root = Path(tempfile.mkdtemp(prefix="owtlskafka-", dir="/var/tmp"))
    ca = make_ca(root / "ca")
    tls_port = free_port()
    service = KafkaService(root, free_port(), free_port())
    service._env.update(
        KAFKA_TLS_PORT=str(tls_port),
        KAFKA_TLS_KEYSTORE=str(ca.bundle("server")),
        KAFKA_SASL_USER=SASL_USER,
        KAFKA_SASL_PASSWORD=SASL_PASSWORD,
    )
    service.setup()
    try:
        yield service, tls_port, ca
    finally:
        service.teardown()
        shutil.rmtree(root, ignore_errors=True)


async def test_run_with_the_ansible_environment_over_kafka_sasl_ssl(tls_kafka, couchdb, tmp_path):
    """``kafka_protocol: SASL_SSL``: the role's store variables pointed at PEM files (the CA,
    a client chain), the SASL user through ``invoker.extraEnv``."""
    broker, tls_port, ca = tls_kafka
    # One PEM file as the role's one store for both: the client's key and chain, and the CA.
    store = tmp_path / "kafka-store.pem"
    store.write_bytes(ca.bundle("client").read_bytes() + ca.ca.read_bytes())
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required"
    text = await _ansible_run(
        broker,
        couchdb,
        tmp_path,
        ca,
        f"127.0.0.1:{tls_port}",
        kafka_env={"kafka_protocol": "SASL_SSL", "kafka_store": str(store)},
        extra_env={
            "CONFIG_whisk_kafka_common_saslMechanism": "PLAIN",
            "CONFIG_whisk_kafka_common_saslJaasConfig": (
                f'{jaas} username="{SASL_USER}" password="{SASL_PASSWORD}";'
            ),
            "CONFIG_whisk_kafka_common_sslEndpointIdentificationAlgorithm": "https",
        },
    )
    assert f"waiting for Kafka at 127.0.0.1:{tls_port}" in text


async def test_the_tls_listener_refuses_a_wrong_password_and_a_foreign_ca(tls_kafka, tmp_path):
    """What the test above relies on: the broker's listener checks both (else it proves
    nothing about the settings)."""
    _, tls_port, ca = tls_kafka
    other = make_ca(tmp_path / "other", names=())

    def bus(cafile: Path, password: str) -> KafkaBus:
        security = KafkaSecurity(
            protocol="SASL_SSL",
            cafile=str(cafile),
            sasl_mechanism="PLAIN",
            sasl_username=SASL_USER,
            sasl_password=password,
        )
        return KafkaBus(f"127.0.0.1:{tls_port}", security=security)

    await bus(ca.ca, SASL_PASSWORD).wait_ready(timeout_s=20)
    for wrong in (bus(ca.ca, "wrong"), bus(other.ca, SASL_PASSWORD)):
        with pytest.raises(BusUnavailable):
            await wrong.wait_ready(timeout_s=3)


async def test_run_with_the_helm_environment_and_an_id(kafka, couchdb, tmp_path):
    """The chart's set (values.yaml's defaults: CouchDB over http, admin over http) with the
    one change ow-invoker needs, an ``--id`` beside ``--uniqueName``."""
    index = random.randrange(1000, 9000)
    node = f"node{index}"
    config = make_config(tmp_path, instance=index, unique_name=node)
    env = stock_env.helm_env(
        kafka_hosts=kafka.bootstrap, **stock_env.couch_settings(couchdb, config.db_prefix)
    )
    admin_port = free_port()
    env.update(PORT=str(admin_port), CONFIG_whisk_kafka_topics_prefix=config.topic_prefix)
    child_env = {**_clean_environ(), **env, "OW_INVOKER_STATE_DIR": config.state_dir}
    log = tmp_path / "invoker.log"
    async with controller(kafka, couchdb, config) as stub:
        proc = _start(["run", *stock_env.helm_argv(node), "--id", str(index)], child_env, log)
        try:
            await _until_up(admin_port, None, proc, log)
            action, rev = await stub.create_action("hello", ACTION)
            aid = await stub.invoke(action, rev, content={"name": "helm"})
            await stub.wait_completion(aid, timeout_s=90)
            record = await stub.record(aid)
            assert record["response"]["result"] == {
                "api": "https://owdev-nginx.openwhisk.svc.cluster.local",
                "concurrent": "false",
                "hello": "helm",
            }
        finally:
            proc.terminate()
            await asyncio.to_thread(proc.wait, 40)
    assert proc.returncode == 0, log.read_text()[-2000:]


def test_run_refuses_a_scheduler_invoker_with_a_sharding_server(tmp_path):
    """The FPC invoker SPI chooses the scheduler mode (tests/integration/invoker/fpc); with
    the sharding mode's server SPI beside it the pair disagrees: one line naming the
    variable, exit 2, before any service is waited for."""
    env = stock_env.ansible_env(
        kafka_hosts="127.0.0.1:1",
        couch_protocol="http",
        couch_host="127.0.0.1",
        couch_port=1,
        couch_user="u",
        couch_password="p",
        db_prefix="x_",
        invoker_protocol="http",
    )
    env["CONFIG_whisk_spi_InvokerProvider"] = "org.apache.openwhisk.core.invoker.FPCInvokerReactive"
    env["CONFIG_whisk_spi_InvokerServerProvider"] = (
        "org.apache.openwhisk.core.invoker.DefaultInvokerServer"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ow_invoker", "run", *stock_env.ansible_argv(0)],
        cwd=ROOT,
        env={**_clean_environ(), **env, "OW_INVOKER_STATE_DIR": str(tmp_path / "s")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("ow-invoker run: CONFIG_whisk_spi_InvokerProvider=")
    assert "both or neither FPC" in lines[0]


def test_run_with_the_helm_environment_asks_for_an_id(tmp_path):
    env = stock_env.helm_env(
        kafka_hosts="127.0.0.1:1",
        couch_protocol="http",
        couch_host="127.0.0.1",
        couch_port=1,
        couch_user="u",
        couch_password="p",
        db_prefix="x_",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ow_invoker", "run", *stock_env.helm_argv()],
        cwd=ROOT,
        env={**_clean_environ(), **env, "OW_INVOKER_STATE_DIR": str(tmp_path / "s")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--uniqueName worker-node-1 without --id" in proc.stderr  # else: accepted (unit)
