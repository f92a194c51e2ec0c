"""The stock invoker's configuration surface, in one place: every variable apache/openwhisk's
ansible role (``roles/invoker/tasks/deploy.yml``) and apache/openwhisk-deploy-kube's Helm
chart (``invoker-pod.yaml``) give the Scala invoker, read with the same value formats and
mapped onto :class:`invoker.config.InvokerConfig`'s keys, refused with one line naming it
when it asks for something ow-invoker does not do, or ignored for a reason the docs give
(``docs/operations.md``, "The stock invoker's configuration").

Read as the stock image's ``transformEnvironment.sh`` reads ``CONFIG_*``: an empty value is
unset (ansible passes many), ``$NAME`` stands for another variable's value. A ``CONFIG_*``
``CONFIG_whisk_*`` variable in none of these lists is refused (it would be a setting silently
dropped); another ``CONFIG_*`` (a library's, of the stock JVM) is logged as not read.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from whisk.manifest import Manifest
from whisk.protocol.messages import MAX_MESSAGE_BYTES
from whisk.settings import parse_memory_mb

__all__ = ["CATALOGUE", "StockError", "parse_duration_s", "read"]
log = logging.getLogger("invoker.stock")

Values = dict[str, Any]  # flat InvokerConfig keys -> values
Reader = Callable[[str, Mapping[str, str]], Values]


class StockError(ValueError):
    """A stock variable ow-invoker cannot honour: the message starts with its name."""


@dataclass(frozen=True)
class Var:
    """One stock variable (``<i>``: an index, ``<key>``: any name part)."""

    name: str
    use: str  # "honoured", "refused", "ignored" (what the docs table says)
    read: Reader | None = None  # honoured: name, environment -> values; may raise StockError
    why: str = ""  # refused or ignored: the reason

    @property
    def pattern(self) -> re.Pattern[str]:
        text = re.escape(self.name).replace("<i>", r"\d+").replace("<key>", r"\w+")
        return re.compile(text)


# -- value formats ------------------------------------------------------------------------

_DURATION_UNITS = {
    "ns": 1e-9, "nano": 1e-9, "nanos": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "us": 1e-6, "micro": 1e-6, "micros": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "": 1e-3, "ms": 1e-3, "milli": 1e-3, "millis": 1e-3, "millisecond": 1e-3,
    "milliseconds": 1e-3, "s": 1.0, "second": 1.0, "seconds": 1.0, "m": 60.0,
    "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}  # fmt: skip


def parse_duration_s(text: str) -> float:
    """A HOCON duration (``10 minutes``, ``500 ms``, ``30s``; a bare number is ms) -> s."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2) not in _DURATION_UNITS:
        raise ValueError(f"bad duration {text!r} (e.g. 10 minutes, 500 ms)")
    return float(m.group(1)) * _DURATION_UNITS[m.group(2)]


def _size_bytes(text: str) -> int:
    """OpenWhisk's ByteSize syntax (``1 m``, ``512 KB``), binary units; a bare number: B."""
    if re.fullmatch(r"\s*\d+\s*", text):
        return int(text)
    return int(parse_memory_mb(text) * 1024 * 1024)


def _bool(name: str, value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise StockError(f"{name}={value!r}: true or false")
    return value.strip().lower() == "true"


_SECRET = re.compile(r"(?i)pass|secret|jaas|token|credential|key$")


def _fail(name: str, value: str, why: str) -> StockError:
    """The refusal line; a password's value stays out of it (logs keep error lines)."""
    shown = "<hidden>" if _SECRET.search(name) else repr(value)
    return StockError(f"{name}={shown}: {why}")


# -- readers: one per variable or group of variables ---------------------------------------


def _to(key: str, convert: Callable[[str], Any] = str) -> Reader:
    def read(name: str, env: Mapping[str, str]) -> Values:
        try:
            return {key: convert(env[name])}
        except ValueError as e:
            raise _fail(name, env[name], str(e)) from None

    return read


def _one_of(*accepted: str, why: str) -> Reader:
    """A choice (an SPI class) of which ow-invoker does only ``accepted``."""

    def read(name: str, env: Mapping[str, str]) -> Values:
        if env[name].strip() not in accepted:
            raise _fail(name, env[name], why)
        return {}

    return read


def _couchdb(name: str, env: Mapping[str, str]) -> Values:
    """``protocol://host:port`` as the stock CouchDbRestClient builds it."""
    parts = {p: env.get(f"CONFIG_whisk_couchdb_{p}") for p in ("protocol", "host", "port")}
    if not parts["host"]:
        raise StockError(f"{name} without CONFIG_whisk_couchdb_host: no CouchDB to reach")
    protocol = (parts["protocol"] or "http").lower()
    if protocol not in ("http", "https"):
        raise _fail("CONFIG_whisk_couchdb_protocol", protocol, "http or https")
    port = parts["port"] or ("443" if protocol == "https" else "5984")
    if not port.isdigit():
        raise _fail("CONFIG_whisk_couchdb_port", port, "a port number")
    return {"couchdb_url": f"{protocol}://{parts['host']}:{port}"}


def _database(ours: str, config_name: str, legacy_name: str) -> Reader:
    """A database name given twice (``CONFIG_…_databases_X`` and the older ``DB_WHISK_…``):
    the same, or a refusal naming both."""

    def read(name: str, env: Mapping[str, str]) -> Values:
        names = {n: env[n] for n in (config_name, legacy_name) if n in env}
        if len(set(names.values())) > 1:
            raise StockError(
                f"{config_name}={names[config_name]!r} and {legacy_name}="
                f"{names[legacy_name]!r} name different databases: give one"
            )
        return {ours: next(iter(names.values()))}

    return read


def _api_host(name: str, env: Mapping[str, str]) -> Values:
    """``proto://name:port``, the scheme's default port left out (the stock
    ``Uri.normalize``); a proto or port alone is refused: the host is what matters."""
    host = env.get("WHISK_API_HOST_NAME")
    if not host:
        raise StockError(f"{name} without WHISK_API_HOST_NAME: no API host for actions")
    proto = env.get("WHISK_API_HOST_PROTO", "https").lower()
    port = env.get("WHISK_API_HOST_PORT", "443")
    if proto not in ("http", "https") or not port.isdigit():
        raise StockError(f"WHISK_API_HOST_PROTO/PORT={proto!r}/{port!r}: http or https, a port")
    default = {"http": "80", "https": "443"}[proto]
    return {"api_host": f"{proto}://{host}" + ("" if port == default else f":{port}")}


def _manifest(name: str, env: Mapping[str, str]) -> Values:
    """The manifest's JSON itself (ansible and Helm), or the path of a file holding it."""
    text = env[name]
    try:
        Manifest.from_setting(text)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StockError(f"{name}: not a runtimes manifest ({e.__class__.__name__}: {e})") from None
    return {"runtimes_manifest": text}


def _indexed(ours: str) -> Reader:
    """``<prefix>_0``, ``<prefix>_1``, … -> a tuple in index order (HOCON's list form)."""

    def read(name: str, env: Mapping[str, str]) -> Values:
        prefix = name.rpartition("_")[0] + "_"
        items = sorted((int(k[len(prefix) :]), v) for k, v in env.items() if _is_index(k, prefix))
        return {ours: tuple(v for _, v in items)}

    return read


def _is_index(name: str, prefix: str) -> bool:
    return name.startswith(prefix) and name[len(prefix) :].isdigit()


def _extra_env(name: str, env: Mapping[str, str]) -> Values:
    """``KEY=VALUE`` or ``KEY`` (the invoker's own value, as ``docker run -e KEY``)."""
    values = _indexed("container_env")(name, env)["container_env"]
    out = []
    for item in values:
        key, eq, _ = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise _fail(name, item, "KEY=VALUE or KEY")
        if eq:
            out.append(item)
        elif key in env:
            out.append(f"{key}={env[key]}")
    return {"container_env": tuple(out)}


def _user_cpus(name: str, env: Mapping[str, str]) -> Values:
    value = env[name].strip()
    try:
        cpus = float(value)
    except ValueError:
        raise _fail(name, value, "a number of CPUs") from None
    if cpus < 1 or cpus != int(cpus):
        raise _fail(
            name,
            value,
            "ow-invoker gives actions whole cores (a CPU-bound call holds one): give a "
            "whole number of cores",
        )
    return {"action_cores": str(int(cpus))}


_LOG_LEVELS = {"TRACE": "DEBUG", "DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARNING"}
_LOG_LEVELS.update(WARNING="WARNING", ERROR="ERROR", OFF="CRITICAL")


def _log_level(name: str, env: Mapping[str, str]) -> Values:
    level = _LOG_LEVELS.get(env[name].strip().upper())
    if level is None:
        raise _fail(name, env[name], "TRACE, DEBUG, INFO, WARN, ERROR or OFF")
    return {"log_level": level}


def _limits(name: str, env: Mapping[str, str]) -> Values:
    """Checked for their format only: the controller enforces them, and every activation
    message carries its action's own limits, which the invoker applies."""
    value = env[name]
    kind = name.split("_")[-2]  # CONFIG_whisk_[namespaceDefaultLimit_]<kind>_<min|max|std>
    try:
        if kind in ("memory", "logLimit"):
            parse_memory_mb(value)
        elif kind == "timeLimit":
            parse_duration_s(value)
        else:
            int(value)
    except ValueError as e:
        raise _fail(name, value, str(e)) from None
    return {}


def _payload_max(name: str, env: Mapping[str, str]) -> Values:
    try:
        size = _size_bytes(env[name])
    except ValueError as e:
        raise _fail(name, env[name], str(e)) from None
    if size > 1024 * 1024:
        raise _fail(
            name,
            env[name],
            f"ow-invoker takes messages of up to {MAX_MESSAGE_BYTES} bytes (the stock 1 m "
            "payload and its overhead): a larger limit is not supported",
        )
    return {}


def _user_events(name: str, env: Mapping[str, str]) -> Values:
    if _bool(name, env[name]):
        raise _fail(name, env[name], "ow-invoker publishes no user events (the events topic)")
    return {}


def _invoker_https(name: str, env: Mapping[str, str]) -> Values:
    """The admin server over TLS with the stock keystore (PEM, or PKCS12 read with
    ``openssl``); ``clientAuth``: clients must show a certificate the keystore holds."""
    protocol = env.get("CONFIG_whisk_invoker_protocol", "http").lower()
    if protocol not in ("http", "https"):
        raise _fail("CONFIG_whisk_invoker_protocol", protocol, "http or https")
    if protocol == "http":
        return {"admin_tls_keystore": None}
    store = env.get("CONFIG_whisk_invoker_https_keystorePath")
    if not store:
        raise StockError(
            "CONFIG_whisk_invoker_protocol=https without CONFIG_whisk_invoker_https_keystorePath"
        )
    flavor = env.get("CONFIG_whisk_invoker_https_keystoreFlavor", "PKCS12").upper()
    if flavor not in ("PKCS12", "PEM"):
        raise _fail("CONFIG_whisk_invoker_https_keystoreFlavor", flavor, "PKCS12 or PEM")
    client_auth = env.get("CONFIG_whisk_invoker_https_clientAuth", "false")
    return {
        "admin_tls_keystore": store,
        "admin_tls_keystore_password": env.get("CONFIG_whisk_invoker_https_keystorePassword"),
        "admin_tls_client_auth": _bool("CONFIG_whisk_invoker_https_clientAuth", client_auth),
    }


_KAFKA = "CONFIG_whisk_kafka_common_"


def _kafka_security(name: str, env: Mapping[str, str]) -> Values:
    """``whisk.kafka.common`` -> the ``kafka_security`` group. With PLAINTEXT (ansible's
    default) the store settings it always passes are unused, as by the Kafka client."""
    common = {k[len(_KAFKA) :]: v for k, v in env.items() if k.startswith(_KAFKA)}
    protocol = common.pop("securityProtocol", "PLAINTEXT").upper()
    out: Values = {"kafka_security_protocol": protocol}
    identification = common.pop("sslEndpointIdentificationAlgorithm", "")
    if identification.lower() not in ("", "https"):
        raise _fail(_KAFKA + "sslEndpointIdentificationAlgorithm", identification, '"" or https')
    out["kafka_security_check_hostname"] = identification.lower() == "https"
    for key, flavor in (("sslTruststoreType", "PEM"), ("sslKeystoreType", "PEM")):
        if protocol.endswith("SSL") and common.get(key, flavor).upper() != "PEM":
            raise _fail(
                _KAFKA + key,
                common[key],
                "ow-invoker reads PEM stores only (ssl.*.type=PEM); convert the store once",
            )
        common.pop(key, None)
    if "sslTruststoreLocation" in common:
        out["kafka_security_cafile"] = common.pop("sslTruststoreLocation")
    if "sslKeystoreLocation" in common:
        out["kafka_security_certfile"] = common.pop("sslKeystoreLocation")
    key_password = common.pop("sslKeyPassword", None) or common.pop("sslKeystorePassword", None)
    common.pop("sslKeystorePassword", None)
    common.pop("sslTruststorePassword", None)  # a PEM truststore has none
    if key_password is not None:
        out["kafka_security_key_password"] = key_password
    if "saslMechanism" in common:
        out["kafka_security_sasl_mechanism"] = common.pop("saslMechanism").upper()
    if "saslJaasConfig" in common:
        out.update(_jaas(common.pop("saslJaasConfig")))
    common.pop("metricReporters", None)  # a JVM class: /metrics instead
    if not protocol.endswith("SSL"):  # no TLS: the stores are not used
        for key in ("cafile", "certfile", "key_password"):
            out.pop(f"kafka_security_{key}", None)
    if common:
        first = sorted(common)[0]
        raise _fail(_KAFKA + first, common[first], "a Kafka client setting ow-invoker does not set")
    return out


def _jaas(text: str) -> Values:
    """``org.apache.kafka.common.security.plain.PlainLoginModule required username="u"
    password="p";`` (or ScramLoginModule) -> the SASL user and password."""
    name = _KAFKA + "saslJaasConfig"
    try:
        words = shlex.split(text.strip().rstrip(";"))
    except ValueError as e:
        raise StockError(f"{name}: {e}") from None
    if len(words) < 2 or words[0].rpartition(".")[2] not in (
        "PlainLoginModule",
        "ScramLoginModule",
    ):
        raise StockError(f"{name}: ow-invoker reads the PlainLoginModule and ScramLoginModule only")
    options = dict(w.partition("=")[::2] for w in words[2:])
    return {
        "kafka_security_sasl_username": options.get("username"),
        "kafka_security_sasl_password": options.get("password"),
    }


def _invoker_opts(name: str, env: Mapping[str, str]) -> Values:
    """JVM options: ``-Dwhisk.spi.ContainerFactoryProvider`` must be Docker's (Helm's
    Kubernetes factory is refused); any other ``-Dwhisk.*`` is a setting ow-invoker cannot
    read there and is refused; the JVM's own options (``-X…``, JMX) are ignored."""
    for word in shlex.split(env[name]):
        key, _, value = word.removeprefix("-D").partition("=")
        if not word.startswith("-Dwhisk."):
            continue
        if key == "whisk.spi.ContainerFactoryProvider" and value.endswith(
            "DockerContainerFactoryProvider"
        ):
            continue
        if key == "whisk.spi.ContainerFactoryProvider":
            raise _fail(name, word, "ow-invoker runs actions with its own backends (--backend)")
        raise _fail(name, word, "give it as CONFIG_… (docs/operations.md lists what is read)")
    return {}


def _hocon(name: str, env: Mapping[str, str]) -> Values:
    """A HOCON file is accepted when it sets nothing (ansible's template: comments and
    ``include classpath("application.conf")``)."""
    import base64
    import binascii

    text = env[name]
    if name == "OPENWHISK_ENCODED_CONFIG":
        try:
            text = base64.b64decode(text, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as e:
            raise StockError(f"{name}: not base64 ({e})") from None
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "//", "include ")):
            raise StockError(
                f"{name}: sets {line[:60]!r}: ow-invoker reads no HOCON; give each setting as "
                "its CONFIG_… variable"
            )
    return {}


_REACTIVE = "org.apache.openwhisk.core.invoker."
_MODES = {  # (InvokerProvider, InvokerServerProvider) -> mode
    "InvokerReactive": "sharding",
    "DefaultInvokerServer": "sharding",
    "FPCInvokerReactive": "fpc",
    "FPCInvokerServer": "fpc",
}
_SPI_PAIR = ("CONFIG_whisk_spi_InvokerProvider", "CONFIG_whisk_spi_InvokerServerProvider")


def _invoker_spi(name: str, env: Mapping[str, str]) -> Values:
    """The invoker and its server choose the mode together: both sharding (``InvokerReactive``,
    ``DefaultInvokerServer``) or both the scheduler's (``FPCInvokerReactive``,
    ``FPCInvokerServer``); one given alone chooses for both."""
    modes = {}
    for var in _SPI_PAIR:
        if not (value := env.get(var, "").strip()):
            continue
        cls = value.removeprefix(_REACTIVE)
        if not value.startswith(_REACTIVE) or cls not in _MODES:
            raise _fail(
                var,
                value,
                "InvokerReactive/DefaultInvokerServer (the sharding mode) or "
                "FPCInvokerReactive/FPCInvokerServer (the scheduler mode)",
            )
        modes[var] = _MODES[cls]
    if len(set(modes.values())) > 1:
        raise _fail(name, env[name], f"does not go with {dict(modes)}: both or neither FPC")
    return {"mode": modes[name]}


def _names(text: str) -> tuple[str, ...]:
    """A HOCON list as the environment gives it: ``["a","b"]`` or ``a,b``."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:-1] if text.endswith("]") else text[1:]
    return tuple(n.strip().strip("\"'") for n in text.split(",") if n.strip().strip("\"'"))


def _seconds(text: str) -> int:
    """A Long of seconds (stock), or a duration."""
    text = text.strip()
    return int(text) if text.isdigit() else round(parse_duration_s(text))


# -- the catalogue ---------------------------------------------------------------------------

_WHISKS_DB = _database(
    "db_whisks", "CONFIG_whisk_couchdb_databases_WhiskEntity", "DB_WHISK_ACTIONS"
)
_ACTIVATIONS_DB = _database(
    "db_activations", "CONFIG_whisk_couchdb_databases_WhiskActivation", "DB_WHISK_ACTIVATIONS"
)
_SCHEDULER = "the scheduler's: the invoker reads its address from each creation message"
_JVM = "an option of the JVM, which ow-invoker does not run on"
_CONTROLLER = "a controller setting: the invoker gets what it needs in each message"

CATALOGUE: tuple[Var, ...] = (
    # Kafka
    Var("KAFKA_HOSTS", "honoured", _to("kafka")),
    Var("CONFIG_whisk_kafka_topics_prefix", "honoured", _to("topic_prefix")),
    Var("CONFIG_whisk_kafka_replicationFactor", "honoured", _to("kafka_replication_factor", int)),
    Var(
        "CONFIG_whisk_kafka_topics_invoker_retentionBytes",
        "honoured",
        _to("invoker_topic_retention_bytes", _size_bytes),
    ),
    Var(
        "CONFIG_whisk_kafka_topics_invoker_retentionMs",
        "honoured",
        _to("invoker_topic_retention_ms", int),
    ),
    Var(
        "CONFIG_whisk_kafka_topics_invoker_segmentBytes",
        "honoured",
        _to("invoker_topic_segment_bytes", _size_bytes),
    ),
    Var(
        "CONFIG_whisk_kakfa_topics_invoker_segmentBytes",
        "ignored",
        why="ansible's misspelling of …_kafka_…: the stock invoker does not read it either",
    ),
    Var(
        "CONFIG_whisk_kafka_topics_<key>",
        "ignored",
        why="another topic's settings: the invoker creates only invoker<N>",
    ),
    Var("CONFIG_whisk_kafka_common_<key>", "honoured", _kafka_security),
    Var(
        "CONFIG_whisk_kafka_producer_<key>",
        "refused",
        why="ow-invoker's Kafka producers are idempotent (acks=all, 30 s requests): "
        "a retried ack is never a duplicate",
    ),
    Var(
        "CONFIG_whisk_kafka_consumer_<key>",
        "refused",
        why="ow-invoker's Kafka consumers use the stock defaults (30 s session, 10 s heartbeat)",
    ),
    Var("CONFIG_whisk_kafka_topics_userEvent_prefix", "ignored", why="no user events (below)"),
    Var("CONFIG_whisk_userEvents_enabled", "honoured", _user_events),
    Var(
        "ZOOKEEPER_HOSTS",
        "ignored",
        why="the stock invoker asks ZooKeeper for an id when it gets --uniqueName without "
        "--id; ow-invoker needs --id",
    ),
    # CouchDB
    Var("CONFIG_whisk_couchdb_protocol", "honoured", _couchdb),
    Var("CONFIG_whisk_couchdb_host", "honoured", _couchdb),
    Var("CONFIG_whisk_couchdb_port", "honoured", _couchdb),
    Var("CONFIG_whisk_couchdb_username", "honoured", _to("couchdb_user")),
    Var("CONFIG_whisk_couchdb_password", "honoured", _to("couchdb_password")),
    Var(
        "CONFIG_whisk_couchdb_provider",
        "honoured",
        _one_of("CouchDB", "Cloudant", why="ow-invoker speaks the CouchDB API (CouchDB, Cloudant)"),
    ),
    Var(
        "CONFIG_whisk_couchdb_databases_WhiskEntity",
        "honoured",
        _WHISKS_DB,
    ),
    Var(
        "DB_WHISK_ACTIONS",
        "honoured",
        _WHISKS_DB,
    ),
    Var(
        "CONFIG_whisk_couchdb_databases_WhiskActivation",
        "honoured",
        _ACTIVATIONS_DB,
    ),
    Var(
        "DB_WHISK_ACTIVATIONS",
        "honoured",
        _ACTIVATIONS_DB,
    ),
    Var("DB_PREFIX", "honoured", _to("db_prefix")),
    Var(
        "CONFIG_whisk_couchdb_databases_WhiskAuth",
        "ignored",
        why="the subjects: read by `ow-invoker admin`, not by the invoker",
    ),
    Var("DB_WHISK_AUTHS", "ignored", why="the subjects: read by `ow-invoker admin`"),
    Var(
        "CONFIG_whisk_db_<key>",
        "ignored",
        why="design documents and attachment inlining: the invoker reads actions and writes "
        "records by id, through no view",
    ),
    Var(
        "CONFIG_whisk_spi_ArtifactStoreProvider",
        "honoured",
        _one_of(
            "org.apache.openwhisk.core.database.CouchDbStoreProvider",
            why="ow-invoker reads actions from CouchDB",
        ),
    ),
    Var(
        "CONFIG_whisk_spi_ActivationStoreProvider",
        "honoured",
        _one_of(
            "org.apache.openwhisk.core.database.ArtifactActivationStoreProvider",
            why="ow-invoker stores activation records in CouchDB",
        ),
    ),
    Var(
        "CONFIG_whisk_activationStore_<key>",
        "refused",
        why="ow-invoker stores activation records in CouchDB (no ElasticSearch store)",
    ),
    Var("CONFIG_whisk_mongodb_<key>", "refused", why="ow-invoker reads actions from CouchDB"),
    # The API host given to actions
    Var("WHISK_API_HOST_PROTO", "honoured", _api_host),
    Var("WHISK_API_HOST_PORT", "honoured", _api_host),
    Var("WHISK_API_HOST_NAME", "honoured", _api_host),
    # Runtimes and images
    Var("RUNTIMES_MANIFEST", "honoured", _manifest),
    Var("CONFIG_whisk_containerFactory_runtimesRegistry_url", "honoured", _to("runtimes_registry")),
    Var(
        "CONFIG_whisk_containerFactory_userImagesRegistry_url",
        "refused",
        why="blackbox images are pulled as named by the action",
    ),
    Var(
        "CONFIG_whisk_runtimes_bypassPullForLocalImages",
        "ignored",
        why="ow-invoker pulls an image only when the engine lacks it",
    ),
    Var(
        "CONFIG_whisk_runtimes_localImagePrefix",
        "ignored",
        why="ow-invoker pulls an image only when the engine lacks it",
    ),
    # Containers
    Var("CONFIG_whisk_containerFactory_containerArgs_network", "honoured", _to("docker_network")),
    Var(
        "CONFIG_whisk_containerFactory_containerArgs_dnsServers_<i>",
        "honoured",
        _indexed("docker_dns_servers"),
    ),
    Var(
        "CONFIG_whisk_containerFactory_containerArgs_dnsSearch_<i>",
        "honoured",
        _indexed("docker_dns_search"),
    ),
    Var(
        "CONFIG_whisk_containerFactory_containerArgs_dnsOptions_<i>",
        "honoured",
        _indexed("docker_dns_options"),
    ),
    Var("CONFIG_whisk_containerFactory_containerArgs_extraEnvVars_<i>", "honoured", _extra_env),
    Var(
        "CONFIG_whisk_containerFactory_containerArgs_extraArgs_<key>",
        "refused",
        why="raw `docker run` arguments: ow-invoker makes containers through the Engine API "
        "with its own isolation settings",
    ),
    Var(
        "CONFIG_whisk_containerPool_userMemory",
        "honoured",
        _to("user_memory_mb", parse_memory_mb),
    ),
    Var("CONFIG_whisk_containerPool_userCpus", "honoured", _user_cpus),
    Var(
        "CONFIG_whisk_containerProxy_timeouts_idleContainer",
        "honoured",
        _to("idle_timeout_s", parse_duration_s),
    ),
    Var(
        "CONFIG_whisk_containerProxy_timeouts_pauseGrace",
        "honoured",
        _to("pause_grace_s", parse_duration_s),
    ),
    Var(
        "CONFIG_whisk_containerProxy_timeouts_keepingDuration",
        "ignored",
        why="a kept container is removed after idleContainer (idle_timeout_s), in both modes",
    ),
    Var(
        "CONFIG_whisk_containerPool_<key>",
        "ignored",
        why="the stock pool's internals (prewarm expiry checks, its HTTP client, etcd sync): "
        "ow-invoker's pool has none of them",
    ),
    Var("INVOKER_CONTAINER_POLICY", "ignored", why="the stock invoker does not read it either"),
    Var(
        "CONFIG_whisk_docker_<key>",
        "ignored",
        why="docker CLI and runc options: ow-invoker uses the Engine API (pause included)",
    ),
    Var(
        "CONFIG_whisk_runtime_delete_timeout",
        "ignored",
        why="ow-invoker removes containers through the Engine API with its own deadline",
    ),
    # The invoker's admin server
    Var("PORT", "honoured", _to("admin_port", int)),
    Var("CONFIG_whisk_invoker_username", "honoured", _to("admin_user")),
    Var("CONFIG_whisk_invoker_password", "honoured", _to("admin_password")),
    Var("CONFIG_whisk_invoker_protocol", "honoured", _invoker_https),
    Var("CONFIG_whisk_invoker_https_<key>", "honoured", _invoker_https),
    # What the invoker is
    Var("CONFIG_whisk_spi_InvokerProvider", "honoured", _invoker_spi),
    Var("CONFIG_whisk_spi_InvokerServerProvider", "honoured", _invoker_spi),
    Var(
        "CONFIG_whisk_spi_LogStoreProvider",
        "honoured",
        _one_of(
            "org.apache.openwhisk.core.containerpool.logging.DockerToActivationLogStoreProvider",
            why="ow-invoker keeps an action's logs in its activation record, as "
            "DockerToActivationLogStoreProvider does",
        ),
    ),
    Var(
        "CONFIG_whisk_spi_ContainerFactoryProvider",
        "honoured",
        _one_of(
            "org.apache.openwhisk.core.containerpool.docker.DockerContainerFactoryProvider",
            why="ow-invoker runs actions with its own backends (--backend)",
        ),
    ),
    Var(
        "CONFIG_whisk_spi_<key>",
        "refused",
        why="an SPI ow-invoker has no counterpart for",
    ),
    # The scheduler ("FPC") mode
    Var("CONFIG_whisk_invoker_resource_tags", "honoured", _to("resource_tags", _names)),
    Var(
        "CONFIG_whisk_invoker_dedicated_namespaces",
        "honoured",
        _to("dedicated_namespaces", _names),
    ),
    Var("CONFIG_whisk_invoker_containerCreation_maxPeek", "honoured", _to("max_peek", int)),
    Var("CONFIG_whisk_etcd_hosts", "honoured", _to("etcd_hosts")),
    Var("CONFIG_whisk_etcd_lease_timeout", "honoured", _to("etcd_lease_timeout_s", _seconds)),
    Var(
        "CONFIG_whisk_etcd_<key>",
        "ignored",
        why="the stock etcd client's internals (its thread pool): ow-invoker's has none",
    ),
    Var("CONFIG_whisk_cluster_name", "honoured", _to("cluster_name")),
    Var("CONFIG_whisk_scheduler_<key>", "ignored", why=_SCHEDULER),
    # Limits: the controller's
    Var("CONFIG_whisk_memory_<key>", "honoured", _limits),
    Var("CONFIG_whisk_timeLimit_<key>", "honoured", _limits),
    Var("CONFIG_whisk_concurrencyLimit_<key>", "honoured", _limits),
    Var("CONFIG_whisk_logLimit_<key>", "honoured", _limits),
    Var("CONFIG_whisk_namespaceDefaultLimit_<key>", "honoured", _limits),
    Var("CONFIG_whisk_activation_payload_max", "honoured", _payload_max),
    Var("LIMITS_<key>", "ignored", why=_CONTROLLER),
    Var("CONFIG_whisk_transactions_header", "ignored", why=_CONTROLLER),
    # Logs and metrics
    Var("CONFIG_logback_log_level", "honoured", _log_level),
    Var(
        "WHISK_LOGS_DIR",
        "ignored",
        why="ow-invoker logs to stderr (ansible's command line sends it to /logs)",
    ),
    Var(
        "METRICS_<key>",
        "ignored",
        why="ow-invoker serves Prometheus metrics at /metrics on the admin port, always; no Kamon",
    ),
    Var("CONFIG_kamon_<key>", "ignored", why="no Kamon: Prometheus /metrics instead"),
    # The JVM and the stock image
    Var("JAVA_OPTS", "ignored", why=_JVM),
    Var("JMX_REMOTE", "ignored", why=_JVM),
    Var("INVOKER_OPTS", "honoured", _invoker_opts),
    Var("OPENWHISK_ENCODED_CONFIG", "honoured", _hocon),
    Var("OPENWHISK_CONFIG", "honoured", _hocon),
    Var("CONFIG_akka_<key>", "ignored", why=_JVM),
    Var("CONFIG_pekko_<key>", "ignored", why=_JVM),
    Var("TZ", "ignored", why="records carry epoch milliseconds; log lines their own time stamp"),
    Var("INVOKER_NAME", "ignored", why="Helm's: used on its command line (--uniqueName)"),
    Var("CONFIG_whisk_helm_release", "ignored", why="Helm's label, read by nothing"),
    Var("CONFIG_whisk_info_date", "ignored", why="the controller's build date"),
)


def _find(name: str) -> Var | None:
    for var in CATALOGUE:  # the first match: exact names come before their group's pattern
        if var.pattern.fullmatch(name):
            return var
    return None


def effective(environ: Mapping[str, str]) -> dict[str, str]:
    """The stock variables that are set: not empty, ``CONFIG_x=$Y`` resolved to Y's value
    (when Y is set, as ``transformEnvironment.sh`` does)."""
    out: dict[str, str] = {}
    for name, value in environ.items():
        if name.startswith("CONFIG_") and value.startswith("$"):
            value = environ.get(value[1:]) or value
        if value.strip() and (name.startswith("CONFIG_") or _find(name) is not None):
            out[name] = value
    return out


def read(environ: Mapping[str, str]) -> Values:
    """Flat InvokerConfig values from the stock variables in ``environ``; raises
    :class:`StockError` for the first one ow-invoker cannot honour."""
    env = effective(environ)
    # Readers see the set stock variables and every other one (``extraEnvVars``' ``KEY``).
    visible = {k: v for k, v in environ.items() if not k.startswith("CONFIG_") and not _find(k)}
    visible.update(env)
    out: Values = {}
    for name in sorted(env):  # a group's reader runs once per variable: same values
        var = _find(name)
        if var is None and not name.startswith("CONFIG_whisk_"):
            log.warning("%s: not read by ow-invoker (no whisk.* setting of the stock one)", name)
            continue
        if var is None:
            raise StockError(
                f"{name}: a stock setting ow-invoker does not know, so cannot honour; unset it "
                "(docs/operations.md lists the ones it reads)"
            )
        if var.use == "refused":
            raise _fail(name, env[name], var.why)
        if var.read is not None:
            out.update(var.read(name, visible))
    return out
