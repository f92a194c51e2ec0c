"""The stock invoker's configuration surface (invoker/stock.py): every variable the ansible
role and the Helm chart pass is honoured with the stock value format, refused with one line
that names it, or ignored; the documented table lists every one of them."""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from pathlib import Path

import pytest

from containers.backend import ContainerSpec
from containers.docker.backend import DockerBackend
from invoker import config as invoker_config
from invoker import stock
from invoker.admin_tls import admin_ssl_context
from ow_invoker import cli
from ow_invoker.cli import build_parser
from tests import stock_env
from tests.testca import PASSWORD, make_ca
from whisk.bus.kafka import KafkaBus
from whisk.manifest import Manifest

ROOT = Path(__file__).resolve().parents[3]
OW = "org.apache.openwhisk.core."
DOCKER_FACTORY = OW + "containerpool.docker.DockerContainerFactoryProvider"
K8S_FACTORY = OW + "containerpool.kubernetes.KubernetesContainerFactoryProvider"
ES = "ElasticSearch"
KIND_JSON = stock_env.test_manifest()


def _load(env: dict[str, str], *argv: str) -> invoker_config.InvokerConfig:
    return invoker_config.load(build_parser().parse_args(["run", *argv]), env)


def _refused(env: dict[str, str], name: str) -> str:
    with pytest.raises(ValueError) as e:
        _load(env)
    message = str(e.value)
    assert message.startswith(name) and "\n" not in message, message
    return message


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory):
    return make_ca(tmp_path_factory.mktemp("ca"))


def _ansible(**kw) -> dict[str, str]:
    base = dict(
        kafka_hosts="kafka1:9093,kafka2:9093",
        couch_protocol="http",
        couch_host="couch.example",
        couch_port=5984,
        couch_user="whisk_admin",
        couch_password="pw",
        db_prefix="whisk_test_",
        invoker_protocol="http",
    )
    return stock_env.ansible_env(**{**base, **kw})


# -- the whole environments -------------------------------------------------------------


def test_the_ansible_environment_maps_onto_ours():
    cfg = _load(_ansible(), *stock_env.ansible_argv(3))
    assert (cfg.instance, cfg.unique_name) == (3, "3")
    assert (cfg.kafka, cfg.topic_prefix, cfg.kafka_replication_factor) == (
        "kafka1:9093,kafka2:9093",
        "",
        1,
    )
    assert cfg.kafka_security.protocol == "PLAINTEXT"  # its JKS paths are then unused
    assert cfg.kafka_security.cafile is None
    assert cfg.couchdb_url == "http://couch.example:5984"
    assert (cfg.couchdb_user, cfg.couchdb_password) == ("whisk_admin", "pw")
    assert (cfg.whisks_db, cfg.activations_db) == ("whisk_test_whisks", "whisk_test_activations")
    assert cfg.api_host == "https://openwhisk.example.com"  # :443 left out, as Uri.normalize
    assert sorted(Manifest.from_setting(cfg.runtimes_manifest or "").runtimes) == [
        "nodejs:20",
        "python:3.11",
    ]
    assert (cfg.user_memory_mb, cfg.admin_port, cfg.admin_user) == (2048, 8080, "invoker.user")
    assert cfg.admin_password == "invoker.pass"
    assert (cfg.idle_timeout_s, cfg.pause_grace_s) == (600.0, 10.0)
    assert cfg.container_env == ("__OW_ALLOW_CONCURRENT=false",)
    assert (cfg.docker.network, cfg.docker.dns_servers, cfg.log_level) == ("bridge", (), "INFO")
    assert cfg.admin_tls_keystore is None


def test_the_helm_environment_needs_an_id_as_the_only_change():
    env = stock_env.helm_env(
        kafka_hosts="owdev-kafka:9092",
        couch_protocol="http",
        couch_host="owdev-couchdb",
        couch_port=5984,
        couch_user="whisk_admin",
        couch_password="pw",
        db_prefix="test_",
    )
    cfg = _load(env, *stock_env.helm_argv(), "--id", "0")
    assert (cfg.unique_name, cfg.couchdb_url, cfg.admin_port) == (
        "worker-node-1",
        "http://owdev-couchdb:5984",
        8080,
    )
    assert cfg.api_host == "https://owdev-nginx.openwhisk.svc.cluster.local"


def test_unique_name_without_id_is_refused_by_run(monkeypatch, capsys):
    monkeypatch.delenv("INVOKER_ID", raising=False)
    monkeypatch.delenv("OW_INVOKER_INSTANCE", raising=False)
    assert cli.main(["run", "--uniqueName", "node-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ow-invoker run: --uniqueName node-1 without --id") and "\n" not in err
    assert invoker_config.instance_given(build_parser().parse_args(["run", "--id", "0"]), {})
    assert invoker_config.instance_given(None, {"INVOKER_ID": "2"})
    assert not invoker_config.instance_given(build_parser().parse_args(["run"]), {})


def test_the_stock_arguments_parse_as_the_stock_invoker_takes_them():
    cfg = _load({}, "--id", "4", "--uniqueName", "u4", "--displayedName", "node four")
    assert (cfg.instance, cfg.unique_name, cfg.displayed_name) == (4, "u4", "node four")
    assert _load({}, "--id", "1", "--uniqueName", "  ").unique_name is None  # nonEmptyString


# -- one variable at a time ---------------------------------------------------------------


def test_the_manifest_is_json_content_or_a_path(tmp_path):
    path = tmp_path / "runtimes.json"
    path.write_text(json.dumps(KIND_JSON))
    for value in (json.dumps(KIND_JSON, indent=4), str(path)):
        cfg = _load({"RUNTIMES_MANIFEST": value})
        assert "python:3.11" in Manifest.from_setting(cfg.runtimes_manifest or "").runtimes
    _refused({"RUNTIMES_MANIFEST": '{\n    "description": [...'}, "RUNTIMES_MANIFEST")
    _refused({"RUNTIMES_MANIFEST": str(tmp_path / "missing.json")}, "RUNTIMES_MANIFEST")


def test_the_runtimes_registry_prefixes_runtime_images():
    manifest = Manifest.from_setting(json.dumps(KIND_JSON)).with_registry("registry.local:5000/")
    assert (
        manifest.image("python:3.11") == "registry.local:5000/openwhisk/action-python-v3.11:nightly"
    )
    cfg = _load({"CONFIG_whisk_containerFactory_runtimesRegistry_url": "reg.example"})
    assert cfg.runtimes_registry == "reg.example"


@pytest.mark.parametrize(
    ("protocol", "port", "url"),
    [
        ("http", "5984", "http://db:5984"),
        ("https", "", "https://db:443"),
        ("", "", "http://db:5984"),
    ],
)
def test_couchdb_url_from_protocol_host_and_port(protocol, port, url):
    env = {"CONFIG_whisk_couchdb_host": "db", "CONFIG_whisk_couchdb_protocol": protocol}
    assert _load({**env, "CONFIG_whisk_couchdb_port": port}).couchdb_url == url


def test_couchdb_refusals():
    _refused({"CONFIG_whisk_couchdb_port": "5984"}, "CONFIG_whisk_couchdb_port")
    _refused(
        {"CONFIG_whisk_couchdb_host": "db", "CONFIG_whisk_couchdb_protocol": "ftp"},
        "CONFIG_whisk_couchdb_protocol",
    )
    _refused({"CONFIG_whisk_couchdb_provider": "MongoDB"}, "CONFIG_whisk_couchdb_provider")
    assert _load({"CONFIG_whisk_couchdb_provider": "Cloudant"})  # the CouchDB API
    message = _refused(
        {"CONFIG_whisk_couchdb_databases_WhiskEntity": "a", "DB_WHISK_ACTIONS": "b"},
        "CONFIG_whisk_couchdb_databases_WhiskEntity",
    )
    assert "DB_WHISK_ACTIONS" in message


def test_our_own_variables_win_over_the_stock_ones():
    env = {"CONFIG_whisk_couchdb_host": "db", "OW_INVOKER_COUCHDB_URL": "http://other:1"}
    assert _load(env).couchdb_url == "http://other:1"
    assert _load({"KAFKA_HOSTS": "a:1"}, "--kafka", "b:2").kafka == "b:2"


@pytest.mark.parametrize(
    ("proto", "port", "expected"),
    [
        ("https", "443", "https://api.example"),
        ("http", "80", "http://api.example"),
        ("http", "3233", "http://api.example:3233"),
        ("https", "8443", "https://api.example:8443"),
    ],
)
def test_api_host_from_proto_name_and_port(proto, port, expected):
    env = {"WHISK_API_HOST_PROTO": proto, "WHISK_API_HOST_PORT": port}
    assert _load({**env, "WHISK_API_HOST_NAME": "api.example"}).api_host == expected


def test_api_host_without_a_name_is_refused():
    _refused({"WHISK_API_HOST_PORT": "443"}, "WHISK_API_HOST_PORT")


def test_container_args_network_dns_and_extra_env(monkeypatch):
    args = "CONFIG_whisk_containerFactory_containerArgs_"
    env = {
        f"{args}network": "openwhisk_net",
        f"{args}dnsServers_1": "10.0.0.3",
        f"{args}dnsServers_0": "10.0.0.2",
        f"{args}dnsSearch_0": "svc.local",
        f"{args}dnsOptions_0": "ndots:2",
        f"{args}extraEnvVars_0": "A=1",
        f"{args}extraEnvVars_1": "HOST_ONLY",
        f"{args}extraEnvVars_2": "MISSING",
        "HOST_ONLY": "from-invoker",
    }
    cfg = _load(env, "--backend", "docker")
    assert cfg.docker.network == "openwhisk_net"
    assert cfg.docker.dns_servers == ("10.0.0.2", "10.0.0.3")
    assert cfg.container_env == ("A=1", "HOST_ONLY=from-invoker")  # MISSING: as docker -e
    backend = DockerBackend(
        network=cfg.docker.network,
        reach="address",
        dns=cfg.docker.dns,
    )
    host = backend.container_config(
        "img", ContainerSpec(name="c1", kind="python:3.11", memory_mb=256)
    )["HostConfig"]
    assert (host["Dns"], host["DnsSearch"], host["DnsOptions"]) == (
        ["10.0.0.2", "10.0.0.3"],
        ["svc.local"],
        ["ndots:2"],
    )
    with pytest.raises(ValueError, match="docker backend"):
        _load(env, "--backend", "process")
    _refused({f"{args}extraArgs_memory-swap_0": "1g"}, f"{args}extraArgs_memory-swap_0")
    _refused({f"{args}extraEnvVars_0": "not an env"}, f"{args}extraEnvVars_0")


@pytest.mark.parametrize(
    ("text", "mb"), [("2048m", 2048), ("1024 m", 1024), ("2 g", 2048), ("4096 MB", 4096)]
)
def test_user_memory_in_openwhisk_size_syntax(text, mb):
    assert _load({"CONFIG_whisk_containerPool_userMemory": text}).user_memory_mb == mb


def test_bad_user_memory_names_the_variable():
    _refused(
        {"CONFIG_whisk_containerPool_userMemory": "lots"}, "CONFIG_whisk_containerPool_userMemory"
    )


def test_user_cpus_become_a_count_of_action_cores():
    cfg = _load({"CONFIG_whisk_containerPool_userCpus": "1"})
    assert len(cfg.action_cores) == 1
    _refused({"CONFIG_whisk_containerPool_userCpus": "1.5"}, "CONFIG_whisk_containerPool_userCpus")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10 minutes", 600), ("10 seconds", 10), ("500 ms", 0.5), ("1 minute", 60), ("250", 0.25)],
)
def test_hocon_durations(text, seconds):
    assert stock.parse_duration_s(text) == pytest.approx(seconds)


def test_container_proxy_timeouts():
    env = {
        "CONFIG_whisk_containerProxy_timeouts_idleContainer": "2 minutes",
        "CONFIG_whisk_containerProxy_timeouts_pauseGrace": "50 ms",
    }
    cfg = _load(env)
    assert (cfg.idle_timeout_s, cfg.pause_grace_s) == (120.0, 0.05)
    _refused(
        {"CONFIG_whisk_containerProxy_timeouts_pauseGrace": "soon"}, "CONFIG_whisk_containerProxy"
    )


def test_kafka_topic_settings_reach_the_invoker_topic():
    env = {
        "CONFIG_whisk_kafka_replicationFactor": "3",
        "CONFIG_whisk_kafka_topics_prefix": "ow_",
        "CONFIG_whisk_kafka_topics_invoker_retentionBytes": "2147483648",
        "CONFIG_whisk_kafka_topics_invoker_retentionMs": "3600000",
        "CONFIG_whisk_kafka_topics_invoker_segmentBytes": "104857600",
    }
    cfg = _load(env)
    assert (cfg.kafka_replication_factor, cfg.invoker_topic) == (3, "ow_invoker0")
    assert cfg.invoker_topic_config["retention.bytes"] == "2147483648"
    assert cfg.invoker_topic_config["retention.ms"] == "3600000"
    assert cfg.invoker_topic_config["segment.bytes"] == "104857600"
    assert _load({}).invoker_topic_config["retention.ms"] == "172800000"  # stock 48 h
    assert KafkaBus("k:1", cfg.kafka_replication_factor).replication_factor == 3


# -- Kafka TLS and SASL -------------------------------------------------------------------

_K = "CONFIG_whisk_kafka_common_"


def test_kafka_ssl_with_pem_stores_becomes_an_ssl_context(ca):
    env = {
        f"{_K}securityProtocol": "SSL",
        f"{_K}sslTruststoreLocation": str(ca.ca),
        f"{_K}sslTruststorePassword": PASSWORD,
        f"{_K}sslKeystoreLocation": str(ca.bundle("client")),
        f"{_K}sslKeystorePassword": PASSWORD,
        f"{_K}sslTruststoreType": "PEM",
        f"{_K}sslKeystoreType": "PEM",
        f"{_K}sslEndpointIdentificationAlgorithm": "https",
    }
    security = _load(env).kafka_security
    assert (security.protocol, security.cafile, security.certfile) == (
        "SSL",
        str(ca.ca),
        str(ca.bundle("client")),
    )
    options = security.client_options()
    context = options["ssl_context"]
    assert options["security_protocol"] == "SSL" and isinstance(context, ssl.SSLContext)
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert any("ow-invoker test CA" in str(c["subject"]) for c in context.get_ca_certs())
    # the stock default: no host name check (ssl.endpoint.identification.algorithm = "")
    del env[f"{_K}sslEndpointIdentificationAlgorithm"]
    assert not _load(env).kafka_security.ssl_context().check_hostname


def test_kafka_ssl_with_a_jks_store_is_refused(ca):
    jks = ca.dir / "kafka-keystore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")  # the JKS magic
    env = {f"{_K}securityProtocol": "SSL", f"{_K}sslTruststoreLocation": str(jks)}
    with pytest.raises(ValueError, match="not a PEM file"):
        _load(env)
    _refused({**env, f"{_K}sslTruststoreType": "JKS"}, f"{_K}sslTruststoreType")


def test_kafka_sasl_from_the_jaas_config(ca):
    jaas = (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="ow" '
        'password="p w;";'
    )
    env = {
        f"{_K}securityProtocol": "SASL_SSL",
        f"{_K}saslMechanism": "SCRAM-SHA-512",
        f"{_K}saslJaasConfig": jaas,
        f"{_K}sslTruststoreLocation": str(ca.ca),
    }
    options = _load(env).kafka_security.client_options()
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("ow", "p w;")
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    plain = {f"{_K}securityProtocol": "SASL_PLAINTEXT", f"{_K}saslMechanism": "PLAIN"}
    jaas_plain = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
    jaas_plain += 'password="b";'
    options = _load({**plain, f"{_K}saslJaasConfig": jaas_plain}).kafka_security.client_options()
    assert "ssl_context" not in options and options["sasl_plain_username"] == "a"


def test_kafka_security_refusals():
    with pytest.raises(ValueError, match="SASL mechanism"):
        _load({f"{_K}securityProtocol": "SASL_PLAINTEXT", f"{_K}saslMechanism": "GSSAPI"})
    with pytest.raises(ValueError, match="security protocol"):
        _load({f"{_K}securityProtocol": "TLS"})
    _refused(
        {
            f"{_K}securityProtocol": "SASL_PLAINTEXT",
            f"{_K}saslJaasConfig": "com.x.Krb5LoginModule required;",
        },
        f"{_K}saslJaasConfig",
    )
    _refused({f"{_K}fetchMaxBytes": "1"}, f"{_K}fetchMaxBytes")
    _refused({"CONFIG_whisk_kafka_producer_acks": "all"}, "CONFIG_whisk_kafka_producer_acks")


def test_the_kafka_clients_get_the_security_options(ca):
    env = {f"{_K}securityProtocol": "SSL", f"{_K}sslTruststoreLocation": str(ca.ca)}
    bus = KafkaBus("127.0.0.1:1", security=_load(env).kafka_security)

    async def made() -> tuple[object, object, object]:
        consumer, producer = bus.consumer("t", "g")._consumer, bus.producer()._producer
        admin = bus._admin()
        return consumer._client, producer.client, admin._client

    for client in asyncio.run(made()):
        assert client._security_protocol == "SSL"
        assert isinstance(client._ssl_context, ssl.SSLContext)


# -- what ow-invoker does not do ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CONFIG_whisk_spi_InvokerProvider", OW + "invoker.SomeOtherReactive"),
        ("CONFIG_whisk_spi_InvokerServerProvider", "x.FPCInvokerServer"),
        ("CONFIG_whisk_spi_LogStoreProvider", OW + f"containerpool.logging.{ES}LogStoreProvider"),
        (
            "CONFIG_whisk_spi_ActivationStoreProvider",
            OW + f"database.elasticsearch.{ES}ActivationStoreProvider",
        ),
        ("CONFIG_whisk_spi_ContainerFactoryProvider", K8S_FACTORY),
        ("CONFIG_whisk_spi_SomethingNew", "x.Y"),
        ("CONFIG_whisk_activationStore_elasticsearch_hosts", "es:9200"),
        ("CONFIG_whisk_mongodb_uri", "mongodb://m"),
        ("CONFIG_whisk_userEvents_enabled", "true"),
        ("CONFIG_whisk_containerFactory_userImagesRegistry_url", "reg"),
        ("CONFIG_whisk_activation_payload_max", "5 m"),
        ("CONFIG_whisk_something_new", "1"),
        (
            "INVOKER_OPTS",
            f"-Dkubernetes.master=https://k -Dwhisk.spi.ContainerFactoryProvider={K8S_FACTORY}",
        ),
        ("INVOKER_OPTS", "-Dwhisk.loadbalancer.x=1"),
        ("CONFIG_logback_log_level", "LOUD"),
    ],
)
def test_refused_with_one_line_naming_the_variable(name, value):
    _refused({name: value}, name)


def test_a_refused_secret_keeps_its_value_out_of_the_line():
    name = "CONFIG_whisk_activationStore_elasticsearch_password"
    message = _refused({name: "hunter2"}, name)
    assert "hunter2" not in message and "<hidden>" in message
    jaas = f"{_K}saslJaasConfig"
    assert "s3cret" not in _refused({jaas: 'x.KerberosModule required password="s3cret";'}, jaas)


@pytest.mark.parametrize(
    ("invoker", "server", "mode"),
    [
        ("FPCInvokerReactive", "FPCInvokerServer", "fpc"),
        ("FPCInvokerReactive", None, "fpc"),
        (None, "FPCInvokerServer", "fpc"),
        ("InvokerReactive", "DefaultInvokerServer", "sharding"),
        (None, None, "sharding"),
    ],
)
def test_the_stock_spis_choose_the_mode(invoker, server, mode):
    env = {}
    if invoker is not None:
        env["CONFIG_whisk_spi_InvokerProvider"] = OW + "invoker." + invoker
    if server is not None:
        env["CONFIG_whisk_spi_InvokerServerProvider"] = OW + "invoker." + server
    assert _load(env).mode == mode


def test_a_sharding_invoker_with_the_fpc_server_is_refused():
    env = {
        "CONFIG_whisk_spi_InvokerProvider": OW + "invoker.InvokerReactive",
        "CONFIG_whisk_spi_InvokerServerProvider": OW + "invoker.FPCInvokerServer",
    }
    assert "both or neither FPC" in _refused(env, "CONFIG_whisk_spi_InvokerProvider")


def test_the_scheduler_mode_settings_are_read():
    config = _load(
        {
            "CONFIG_whisk_spi_InvokerProvider": OW + "invoker.FPCInvokerReactive",
            "CONFIG_whisk_etcd_hosts": "etcd0:2379,etcd1:2379",
            "CONFIG_whisk_etcd_lease_timeout": "7",
            "CONFIG_whisk_etcd_pool_threads": "10",
            "CONFIG_whisk_cluster_name": "prod",
            "CONFIG_whisk_invoker_resource_tags": '["gpu", "fast"]',
            "CONFIG_whisk_invoker_dedicated_namespaces": "ns1,ns2",
            "CONFIG_whisk_invoker_containerCreation_maxPeek": "16",
            "CONFIG_whisk_scheduler_dataManagementService_retryInterval": "1 second",
        }
    )
    assert (config.etcd_hosts, config.etcd_lease_timeout_s, config.cluster_name) == (
        "etcd0:2379,etcd1:2379",
        7,
        "prod",
    )
    assert config.resource_tags == ("gpu", "fast")
    assert config.dedicated_namespaces == ("ns1", "ns2")
    assert config.max_peek == 16


def test_accepted_values_of_the_stock_spis():
    env = {
        "CONFIG_whisk_spi_InvokerProvider": OW + "invoker.InvokerReactive",
        "CONFIG_whisk_spi_InvokerServerProvider": OW + "invoker.DefaultInvokerServer",
        "CONFIG_whisk_spi_ContainerFactoryProvider": DOCKER_FACTORY,
        "INVOKER_OPTS": f"-Dwhisk.spi.ContainerFactoryProvider={DOCKER_FACTORY} -Xss1m",
    }
    assert _load(env)


def test_ignored_and_empty_variables_change_nothing():
    env = {
        "JAVA_OPTS": "-Xmx2g",
        "JMX_REMOTE": "true",
        "ZOOKEEPER_HOSTS": "zk:2181",
        "CONFIG_whisk_transactions_header": "X-Request-ID",
        "CONFIG_whisk_kakfa_topics_invoker_segmentBytes": "1",
        "METRICS_KAMON": "true",
        "CONFIG_akka_coordinatedShutdown_phases_actorSystemTerminate_timeout": "30 s",
        "CONFIG_whisk_couchdb_host": "",  # empty: unset, as transformEnvironment.sh reads it
        "CONFIG_whisk_something_unknown": "",
    }
    assert _load(env) == _load({})


def test_a_config_variable_outside_whisk_is_logged_not_refused(caplog):
    assert _load({"CONFIG_some_library_option": "1"}) == _load({})
    assert "CONFIG_some_library_option: not read by ow-invoker" in caplog.text


def test_a_config_variable_may_name_another():
    cfg = _load({"CONFIG_whisk_couchdb_password": "$DB_PW", "DB_PW": "from-db-pw"})
    assert cfg.couchdb_password == "from-db-pw"


def test_hocon_config_is_accepted_only_when_it_sets_nothing():
    import base64

    ansible = base64.b64encode(stock_env.ANSIBLE_HOCON.encode()).decode()
    assert _load({"OPENWHISK_ENCODED_CONFIG": ansible})
    setting = base64.b64encode(b"whisk { metrics { prometheus-enabled = true } }").decode()
    _refused({"OPENWHISK_ENCODED_CONFIG": setting}, "OPENWHISK_ENCODED_CONFIG")
    _refused({"OPENWHISK_CONFIG": "whisk.x = 1"}, "OPENWHISK_CONFIG")


def test_limits_are_checked_for_their_format():
    assert _load({"CONFIG_whisk_timeLimit_max": "5m", "CONFIG_whisk_memory_max": "512m"})
    _refused({"CONFIG_whisk_timeLimit_max": "forever"}, "CONFIG_whisk_timeLimit_max")
    _refused({"CONFIG_whisk_concurrencyLimit_max": "many"}, "CONFIG_whisk_concurrencyLimit_max")
    both = {"CONFIG_whisk_memory_max": "512m", "CONFIG_whisk_memory_min": "tiny"}
    _refused(both, "CONFIG_whisk_memory_min")  # each variable checked, not one per group


# -- the admin API over https ----------------------------------------------------------------


@pytest.mark.parametrize("flavor", ["PKCS12", "PEM"])
def test_invoker_https_from_the_stock_keystore(ca, tmp_path, flavor):
    store = ca.p12("server") if flavor == "PKCS12" else ca.bundle("server")
    env = {
        "CONFIG_whisk_invoker_protocol": "https",
        "CONFIG_whisk_invoker_https_keystorePath": str(store),
        "CONFIG_whisk_invoker_https_keystorePassword": PASSWORD,
        "CONFIG_whisk_invoker_https_keystoreFlavor": flavor,
        "CONFIG_whisk_invoker_https_clientAuth": "true",
    }
    cfg = _load({**env, "OW_INVOKER_STATE_DIR": str(tmp_path)})
    context = admin_ssl_context(cfg)
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED
    if flavor == "PKCS12":
        converted = tmp_path / "admin-keystore.pem"
        assert converted.stat().st_mode & 0o777 == 0o600
    no_auth = _load(
        {
            **env,
            "CONFIG_whisk_invoker_https_clientAuth": "false",
            "OW_INVOKER_STATE_DIR": str(tmp_path),
        }
    )
    assert admin_ssl_context(no_auth).verify_mode == ssl.CERT_NONE  # type: ignore[union-attr]


def test_invoker_https_refusals(ca, tmp_path):
    _refused({"CONFIG_whisk_invoker_protocol": "https"}, "CONFIG_whisk_invoker_protocol=https")
    env = {
        "CONFIG_whisk_invoker_protocol": "https",
        "CONFIG_whisk_invoker_https_keystorePath": str(ca.p12("server")),
        "CONFIG_whisk_invoker_https_keystorePassword": "wrong",
        "OW_INVOKER_STATE_DIR": str(tmp_path),
    }
    with pytest.raises(ValueError, match="openssl cannot read it"):
        admin_ssl_context(_load(env))


# -- the documentation ---------------------------------------------------------------------


def test_every_stock_variable_is_in_the_operations_table():
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("## The stock invoker's configuration") :]
    section = section[: section.index("\n## ", 4)]
    missing = [v.name for v in stock.CATALOGUE if f"`{v.name}`" not in section]
    assert not missing, f"not in docs/operations.md's table: {missing}"
    for row in re.findall(r"^\| `([A-Za-z_<>]+)`", section, re.M):
        assert any(v.name == row for v in stock.CATALOGUE), f"documented, not read: {row}"
