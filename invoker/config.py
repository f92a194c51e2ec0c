"""Invoker configuration: defaults for a local deployment, overridden in order by a TOML
config file, the stock invoker's environment (``KAFKA_HOSTS``, ``CONFIG_whisk_…``: read,
refused or ignored by :mod:`invoker.stock`, the one place that knows those names), our own
variables (``OW_INVOKER_<FIELD>``), and command-line flags (:mod:`whisk.settings` reads them).
The GPU pool's settings are :class:`gpu.config.GpuConfig`'s, as ``--gpu-<field>``; each
container backend's are its own type's (:mod:`containers.registry`), in a field named after it.
Validated once, then frozen."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from containers.docker.settings import DockerSettings
from containers.pool import KEEP_ALIVE
from containers.process.settings import ProcessSettings
from containers.registry import BACKENDS, backend_type
from gpu.config import GpuConfig
from invoker import stock
from whisk.bus.kafka_security import KafkaSecurity
from whisk.settings import Settings, parse_memory_mb, setting


def parse_cores(text: str | int | list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """A count (``3``: that many cores, see :func:`default_cores`) or core ids as a list or
    range (``1,2``, ``0-3``; a single id is ``1,`` or ``1-1``) -> core ids."""
    if isinstance(text, list | tuple):
        return tuple(int(c) for c in text)
    s = str(text).strip()
    if re.fullmatch(r"\d+", s):
        return default_cores(int(s))
    cores: list[int] = []
    for part in filter(None, (p.strip() for p in s.split(","))):
        lo, _, hi = part.partition("-")
        cores.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(cores)


def available_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def default_cores(count: int | None = None) -> tuple[int, ...]:
    """Action cores: all usable cores but the first (left to the invoker itself), or the
    last ``count`` cores when a count is given."""
    cores = available_cores()
    if count is None:
        count = max(1, len(cores) - 1)
    if count < 1:
        raise ValueError("at least one action core is needed")
    if count > len(cores):
        # More action slots than cores: allowed (e.g. experiments), slots wrap around cores.
        return tuple(range(count))
    return tuple(cores[-count:])


MODES = ("sharding", "fpc")


def _non_empty(text: str | None) -> str | None:
    """The stock invoker's reading of ``--uniqueName ""``: not given."""
    return (text or "").strip() or None


@dataclass(frozen=True)
class InvokerConfig:
    instance: int = setting(
        0, env=("INVOKER_ID",), aliases=("--id",), help="invoker instance id N (topic invoker<N>)"
    )
    unique_name: str | None = setting(
        None,
        aliases=("--uniqueName",),
        convert=_non_empty,
        help="uniqueName shown in pings and container names",
    )
    displayed_name: str | None = setting(
        None, aliases=("--displayedName",), convert=_non_empty, help="displayedName shown in pings"
    )
    mode: str = setting(
        "sharding",
        choices=MODES,
        help="sharding: activations arrive on invoker<N> (ShardingContainerPoolBalancer); "
        "fpc: the scheduler's container creations arrive there and each container pulls its "
        "calls over gRPC (stock: CONFIG_whisk_spi_InvokerProvider=...FPCInvokerReactive)",
    )
    etcd_hosts: str | None = setting(
        None, help="fpc mode: etcd endpoints host:port,... for presence (stock whisk.etcd.hosts)"
    )
    etcd_lease_timeout_s: int = setting(
        10,
        help="fpc mode: TTL in seconds of the node's etcd lease (stock whisk.etcd.lease.timeout)",
    )
    cluster_name: str = setting(
        "whisk", help="fpc mode: the etcd key prefix (stock whisk.cluster.name)"
    )
    resource_tags: tuple[str, ...] = setting(
        factory=tuple, help="fpc mode: the node's resource tags, in its resource record"
    )
    dedicated_namespaces: tuple[str, ...] = setting(
        factory=tuple, help="fpc mode: namespaces this node is dedicated to, in its record"
    )
    max_peek: int = setting(
        128, help="fpc mode: container creations handled at once (stock containerCreation.maxPeek)"
    )
    kafka: str = setting("127.0.0.1:9092", help="Kafka bootstrap servers")
    topic_prefix: str = setting("", help="Kafka topic prefix")
    kafka_replication_factor: int = setting(1, help="replication factor of the invoker<N> topic")
    kafka_security: KafkaSecurity = setting(  # noqa: RUF009 (a field(), as every setting() is)
        factory=KafkaSecurity, help="Kafka TLS and SASL (stock: CONFIG_whisk_kafka_common_*)"
    )
    invoker_topic_retention_bytes: int | None = setting(
        None, help="retention.bytes of invoker<N> when this invoker creates it (stock: 1 GiB)"
    )
    invoker_topic_retention_ms: int | None = setting(
        None, help="retention.ms of invoker<N> when this invoker creates it (stock: 48 h)"
    )
    invoker_topic_segment_bytes: int | None = setting(
        None, help="segment.bytes of invoker<N> when this invoker creates it (stock: 512 MiB)"
    )
    couchdb_url: str = setting("http://127.0.0.1:5984", help="CouchDB-API server URL")
    couchdb_user: str = setting("whisk_admin", help="CouchDB user")
    couchdb_password: str = setting("some_passw0rd", help="CouchDB password", secret=True)
    db_prefix: str = setting("whisk_local_", help="CouchDB database name prefix")
    db_whisks: str | None = setting(None, help="actions database name")
    db_activations: str | None = setting(None, help="activations database name")
    user_memory_mb: int = setting(
        2048, convert=parse_memory_mb, help="memory for action containers (2048, 2048m, 2g)"
    )
    action_cores: tuple[int, ...] = setting(
        factory=default_cores,
        convert=parse_cores,
        help="cores for actions: a count (2), or core ids: 1,2 or 1-3 (one id: 1,)",
    )
    policy: str = setting(
        "fc",
        help="call-scheduling policy: fifo, sept, eect, rect, fc, openwhisk "
        "(experimental: sept-share, fc-share)",
    )
    fc_window_s: float = setting(60.0, help="FC's window T in seconds")
    cpu_sample_s: float = setting(
        0.5, help="seconds between samples of running calls' CPU use (misprediction guard; 0: off)"
    )
    backend: str = setting(
        "process",
        choices=tuple(BACKENDS),
        help="container backend (its settings: the group named after it)",
    )
    process: ProcessSettings = setting(  # noqa: RUF009 (a field(), as every setting() is)
        factory=ProcessSettings, prefix="", help="the process backend (--backend process)"
    )
    docker: DockerSettings = setting(  # noqa: RUF009 (a field(), as every setting() is)
        factory=DockerSettings, help="the Docker backend (--backend docker)"
    )
    pids_limit: int = setting(
        1024, help="processes per action container (a sandboxed process backend's, Docker's)"
    )
    container_env: tuple[str, ...] = setting(
        factory=tuple, help="KEY=VALUE,... added to every action container's environment"
    )
    runtimes_manifest: str | None = setting(
        None, help="the stock runtimes manifest: its JSON, or the path of a file holding it"
    )
    runtimes_registry: str = setting(
        "", help="registry prefixed to the manifest's runtime images (stock runtimesRegistry)"
    )
    runtime_images: tuple[str, ...] = setting(
        factory=tuple, help="image overrides KIND=IMAGE,... for the docker backend"
    )
    state_dir: str = setting(".state/invoker", help="where containers, spools and pid files live")
    admin_host: str = setting("127.0.0.1", help="admin HTTP listen address")
    admin_port: int = setting(8085, help="admin HTTP port (/ping, /metrics, ...)")
    admin_user: str = setting("invoker.user", help="admin user")
    admin_password: str | None = setting(
        None,
        help="admin password (default: a random one, kept in <state-dir>/admin.password, 0600)",
        secret=True,
    )
    admin_tls_keystore: str | None = setting(
        None, help="serve the admin API over https with this key and certificate (PEM or PKCS12)"
    )
    admin_tls_keystore_password: str | None = setting(
        None, help="password of the admin keystore", secret=True
    )
    admin_tls_client_auth: bool = setting(
        False, help="https: clients must show a certificate that the keystore holds"
    )
    api_host: str = setting("http://127.0.0.1:3233", help="__OW_API_HOST given to actions")
    pause_grace_s: float = setting(10.0, help="idle seconds before a warm container is paused")
    idle_timeout_s: float = setting(600.0, help="idle seconds before a warm container is removed")
    keep_alive: str = setting(
        "footprint",
        choices=KEEP_ALIVE,
        help="how idle containers count against user memory: footprint (what each is "
        "measured to use; evicted only for a call that needs the memory) or limit (the stock "
        "invoker's: their whole limit)",
    )
    create_ahead: int | None = setting(
        None,
        help="containers created ahead, at most, for the calls next in line whose action has "
        "none, so that a cold start's engine work holds no action core (default: 8 on the "
        "docker backend, 0 on the process backend, whose cold start is a fork)",
    )
    no_warm_wait: bool = setting(
        False,
        help="attained-service policies (gittins, gittins-aged, las): every call whose action "
        "has no idle container starts one as soon as memory allows, as the stock invoker's "
        "do (default: where a creation costs, a call that would get no CPU yet waits in the "
        "queue, and one whose action has a busy container expected to free sooner than a "
        "creation takes waits for it, at most that long)",
    )
    task_failures: int = setting(
        3, help="failures of one background task within --task-failure-window-s that fail the node"
    )
    task_failure_window_s: float = setting(
        30.0, help="window in seconds for --task-failures (then no pings, and run exits)"
    )
    prewarm: tuple[str, ...] = setting(
        factory=tuple, help="extra stem cells KIND:COUNT:MEMORY_MB, e.g. python:3.11:2:256"
    )
    max_pending: int = setting(100_000, help="activations held before consumption pauses")
    preempt: bool = setting(
        False,
        help="pause a running call for a much shorter waiting one; paused time does not "
        "count against its time limit (docs/policies.md)",
    )
    record_spool_mb: int = setting(512, help="disk kept for records while CouchDB is down")
    gpu: GpuConfig | None = setting(  # noqa: RUF009 (a field(), as every setting() is)
        None,
        switch="devices",
        help="GPU pool for actions annotated gpu=true (on with --gpu-devices)",
    )
    log_level: str = setting("INFO", help="logging level")

    def __post_init__(self) -> None:
        if self.instance < 0:
            raise ValueError("instance must be >= 0")
        if self.create_ahead is not None and self.create_ahead < 0:
            raise ValueError("create_ahead must be >= 0")
        if self.user_memory_mb < 128:
            raise ValueError("user memory must be at least 128 MB")
        if not self.action_cores:
            raise ValueError("at least one action core is needed")
        backend_type(self.backend)  # raises with the list of valid names
        if (self.process.action_network_deny or self.process.action_network_allow) and (
            self.backend != "process" or not self.process.sandboxed
        ):
            raise ValueError(
                "--action-network-deny/--action-network-allow are the sandboxed process "
                "backend's (on Docker: the DOCKER-USER iptables chain)"
            )
        if self.backend != "docker" and any(self.docker.dns):
            raise ValueError(
                "DNS settings of action containers (CONFIG_whisk_containerFactory_containerArgs"
                "_dns*) are the docker backend's: the process backend's actions use the "
                "host's resolver (--backend docker, or unset them)"
            )
        for item in self.container_env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", item, re.DOTALL):
                raise ValueError(f"container_env: KEY=VALUE, not {item!r}")
        if self.kafka_replication_factor < 1:
            raise ValueError("kafka_replication_factor must be at least 1")
        if self.pids_limit < 1:
            raise ValueError("pids_limit must be positive")
        if self.fc_window_s <= 0:
            raise ValueError("fc_window_s must be positive")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        if self.etcd_lease_timeout_s < 1 or self.max_peek < 1:
            raise ValueError("etcd_lease_timeout_s and max_peek must be positive")
        if self.max_pending < 1:
            raise ValueError("max_pending must be positive")
        if self.cpu_sample_s < 0:
            raise ValueError("cpu_sample_s must be >= 0 (0 turns sampling off)")
        if self.task_failures < 1 or not self.task_failure_window_s > 0:
            raise ValueError("task_failures and task_failure_window_s must be positive")
        from policies import get_policy

        get_policy(self.policy)  # raises with the list of valid names

    @property
    def backend_settings(self) -> Any:
        """The chosen backend's settings: the field named after it (``process``, ``docker``)."""
        return getattr(self, self.backend)

    @property
    def whisks_db(self) -> str:
        return self.db_whisks or f"{self.db_prefix}whisks"

    @property
    def activations_db(self) -> str:
        return self.db_activations or f"{self.db_prefix}activations"

    @property
    def invoker_topic_config(self) -> dict[str, str]:
        """The stock topic settings of invoker<N>, with any the operator gave."""
        from whisk.bus.kafka import INVOKER_TOPIC_CONFIG

        given = {
            "retention.bytes": self.invoker_topic_retention_bytes,
            "retention.ms": self.invoker_topic_retention_ms,
            "segment.bytes": self.invoker_topic_segment_bytes,
        }
        return {**INVOKER_TOPIC_CONFIG, **{k: str(v) for k, v in given.items() if v is not None}}

    @property
    def invoker_topic(self) -> str:
        return f"{self.topic_prefix}invoker{self.instance}"

    @property
    def health_topic(self) -> str:
        return f"{self.topic_prefix}health"

    def completed_topic(self, controller: str) -> str:
        return f"{self.topic_prefix}completed{controller}"

    @property
    def container_prefix(self) -> str:
        """Stock naming: ``wsk<uniqueName><N>``; only ``[A-Za-z0-9_.-]`` kept."""
        return re.sub(r"[^A-Za-z0-9_.-]", "", f"wsk{self.unique_name or ''}{self.instance}")


SETTINGS: Settings[InvokerConfig] = Settings(
    InvokerConfig, env_prefix="OW_INVOKER_", section="invoker", stock=stock.read
)


def add_arguments(parser: argparse.ArgumentParser, skip: Collection[str] = ()) -> None:
    """One ``--flag`` per setting, the GPU pool's as ``--gpu-<field>`` (see :class:`Settings`)."""
    SETTINGS.add_arguments(parser, skip)


def instance_given(
    args: argparse.Namespace | None, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether any source names the instance id (the default 0 is no choice of the operator's)."""
    environ = os.environ if environ is None else environ
    if getattr(args, "instance", None) is not None:
        return True
    if any(name in environ for name in SETTINGS.env_names(SETTINGS.leaf("instance"))):
        return True
    config_file = getattr(args, "config", None)
    return config_file is not None and "instance" in SETTINGS.read_file(config_file)


def load(
    args: argparse.Namespace | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
    tolerate: Collection[str] = (),
    **overrides: Any,
) -> InvokerConfig:
    """The invoker's configuration from every source (see :meth:`Settings.load`)."""
    return SETTINGS.load(args, environ, defaults=defaults, tolerate=tolerate, **overrides)
