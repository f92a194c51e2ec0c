"""The front's configuration (``ow-invoker front``): the bus and store it shares with the
invokers, read under the same stock names (``KAFKA_HOSTS``, ``CONFIG_whisk_couchdb_username``,
``DB_WHISK_ACTIONS`` ...) so one environment serves both, and its own API options.

Sources, lowest first (see :mod:`whisk.settings`): these defaults, a TOML file (``--config``,
its ``[front]`` table when it has one), the environment (stock names, then
``OW_FRONT_<FIELD>``), flags. Nothing of the invoker's (policy, cores, backend) is accepted.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from whisk.settings import Settings, setting

# The API's own options: ``standalone`` takes these beside the invoker's settings.
HTTP_FIELDS = (
    "host",
    "port",
    "auth",
    "auth_file",
    "max_timeout_ms",
    "max_memory_mb",
    "max_concurrency",
    "blocking_wait_s",
    "sequence_max_length",
)


BALANCERS = ("ShardingContainerPoolBalancer", "FPCPoolBalancer")


def _shared(name: str, *stock: str) -> tuple[str, ...]:
    """Environment names of a setting the front shares with the invokers: the stock names,
    then the invoker's own (one environment serves both on a host); OW_FRONT_ wins."""
    return (*stock, f"OW_INVOKER_{name.upper()}")


@dataclass(frozen=True)
class FrontConfig:
    kafka: str = setting(
        "127.0.0.1:9092", env=_shared("kafka", "KAFKA_HOSTS"), help="Kafka bootstrap servers"
    )
    topic_prefix: str = setting(
        "",
        env=_shared("topic_prefix", "CONFIG_whisk_kafka_topics_prefix"),
        help="Kafka topic prefix",
    )
    couchdb_url: str = setting(
        "http://127.0.0.1:5984", env=_shared("couchdb_url"), help="CouchDB-API server URL"
    )
    couchdb_user: str = setting(
        "whisk_admin",
        env=_shared("couchdb_user", "CONFIG_whisk_couchdb_username"),
        help="CouchDB user",
    )
    couchdb_password: str = setting(
        "some_passw0rd",
        env=_shared("couchdb_password", "CONFIG_whisk_couchdb_password"),
        help="CouchDB password",
        secret=True,
    )
    db_prefix: str = setting(
        "whisk_local_", env=_shared("db_prefix", "DB_PREFIX"), help="CouchDB database name prefix"
    )
    db_whisks: str | None = setting(
        None, env=_shared("db_whisks", "DB_WHISK_ACTIONS"), help="actions database name"
    )
    db_activations: str | None = setting(
        None,
        env=_shared("db_activations", "DB_WHISK_ACTIVATIONS"),
        help="activations database name",
    )
    db_subjects: str | None = setting(
        None,
        env=_shared("db_subjects", "DB_WHISK_AUTHS", "CONFIG_whisk_couchdb_databases_WhiskAuth"),
        help="subjects database name, whose users (ow-invoker admin user create) are accepted "
        "too (default: <prefix>subjects)",
    )
    controller_id: str = setting("0", help="controller instance (completed<C>)")
    load_balancer: str = setting(
        "ShardingContainerPoolBalancer",
        env=_shared("load_balancer", "CONFIG_whisk_spi_LoadBalancerProvider"),
        help="how activations reach invokers, by the stock balancer's name (its package may "
        "be given): ShardingContainerPoolBalancer publishes to invoker<N> by their pings; "
        "FPCPoolBalancer, the scheduler mode, publishes to scheduler<S> and reads schedulers "
        "and invokers from etcd (--etcd-hosts)",
    )
    etcd_hosts: str | None = setting(
        None,
        env=_shared("etcd_hosts", "CONFIG_whisk_etcd_hosts"),
        help="FPCPoolBalancer: etcd endpoints host:port,...",
    )
    cluster_name: str = setting(
        "whisk",
        env=_shared("cluster_name", "CONFIG_whisk_cluster_name"),
        help="FPCPoolBalancer: the etcd key prefix",
    )
    host: str = setting("127.0.0.1", help="API listen address")
    port: int = setting(3233, help="API port (0: any free port)")
    auth: tuple[str, ...] = setting(
        factory=tuple,
        repeat=True,
        help="NAMESPACE=UUID:KEY identity (repeatable; default: the stock guest keys; a key on "
        "the command line is readable by every local user: prefer --auth-file, the "
        "environment, or `ow-invoker admin user create`)",
        secret=True,
    )
    auth_file: str | None = setting(
        None,
        help="file of NAMESPACE=UUID:KEY identities, one a line (# comments), added to --auth",
    )
    max_timeout_ms: int = setting(600_000, help="largest action timeout the API accepts")
    max_memory_mb: int = setting(2048, help="largest action memory the API accepts")
    max_concurrency: int = setting(
        1,
        help="largest action limits.concurrency the API accepts (stock default 1; e.g. 200 "
        "for wskdebug)",
    )
    blocking_wait_s: float = setting(
        60.0, help="how long a blocking invoke waits before answering 202"
    )
    sequence_max_length: int = setting(
        50, help="most atomic actions a sequence may run, nested sequences inlined (stock 50)"
    )
    state_dir: str = setting(
        ".state/front",
        env=_shared("state_dir"),
        help="where sequence and trigger activation records wait while the database is away",
    )
    log_level: str = setting("INFO", help="logging level")

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not in 0..65535")
        if min(self.max_timeout_ms, self.max_memory_mb, self.max_concurrency) < 1:
            raise ValueError("max_timeout_ms, max_memory_mb and max_concurrency must be positive")
        if self.sequence_max_length < 1:
            raise ValueError("sequence_max_length must be positive")
        if not self.blocking_wait_s >= 0:
            raise ValueError("blocking_wait_s must be >= 0")
        balancer = self.load_balancer.rsplit(".", 1)[-1]
        if balancer not in BALANCERS:
            raise ValueError(
                f"load_balancer {self.load_balancer!r} is not one of {', '.join(BALANCERS)}"
            )
        if balancer == "FPCPoolBalancer" and not self.etcd_hosts:
            raise ValueError("FPCPoolBalancer reads the schedulers from etcd: give etcd_hosts")

    @property
    def scheduler_mode(self) -> bool:
        """Whether activations go to schedulers (FPCPoolBalancer), not to invokers."""
        return self.load_balancer.rsplit(".", 1)[-1] == "FPCPoolBalancer"

    @property
    def whisks_db(self) -> str:
        return self.db_whisks or f"{self.db_prefix}whisks"

    @property
    def activations_db(self) -> str:
        return self.db_activations or f"{self.db_prefix}activations"

    @property
    def subjects_db(self) -> str:
        return self.db_subjects or f"{self.db_prefix}subjects"


SETTINGS: Settings[FrontConfig] = Settings(FrontConfig, env_prefix="OW_FRONT_", section="front")


def add_arguments(
    parser: argparse.ArgumentParser, skip: Collection[str] = (), config_file: bool = True
) -> None:
    """The front's flags; ``standalone`` skips those its invoker's settings already define."""
    SETTINGS.add_arguments(parser, skip, config_file)


def load(
    args: argparse.Namespace | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
    tolerate: Collection[str] = (),
    **overrides: Any,
) -> FrontConfig:
    """The front's configuration from every source (see :meth:`Settings.load`)."""
    return SETTINGS.load(args, environ, defaults=defaults, tolerate=tolerate, **overrides)
