"""Invoker configuration: defaults for a local deployment, overridden in order by a TOML
config file, environment variables (ours, ``OW_INVOKER_<FIELD>``, and the stock invoker's
names such as ``KAFKA_HOSTS``), and command-line flags. Validated once, then frozen."""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any


def parse_memory_mb(text: str | int) -> int:
    """``2048``, ``2048m``, ``2048 MB``, ``2g``, ``2147483648 B`` -> megabytes."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+)\s*([kmgKMG]?[bB]?)\s*", str(text))
    if not m:
        raise ValueError(f"bad memory size {text!r}")
    value, unit = int(m.group(1)), m.group(2).lower()
    factor = {
        "": 1,
        "m": 1,
        "mb": 1,
        "g": 1024,
        "gb": 1024,
        "k": 1 / 1024,
        "kb": 1 / 1024,
        "b": 1 / 1024 / 1024,
    }[unit]
    return int(value * factor)


def parse_cores(text: str | int | list[int]) -> tuple[int, ...]:
    """A count (``3``: that many cores, see :func:`default_cores`) or core ids as a list or
    range (``1,2``, ``0-3``; a single id is ``1,`` or ``1-1``) -> core ids."""
    if isinstance(text, list):
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


def _opt(
    default: Any = MISSING, *, env: tuple[str, ...] = (), help: str = "", factory: Any = MISSING
):
    meta = {"env": env, "help": help}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class InvokerConfig:
    instance: int = _opt(0, env=("INVOKER_ID",), help="invoker instance id N (topic invoker<N>)")
    unique_name: str | None = _opt(None, help="uniqueName shown in pings and container names")
    displayed_name: str | None = _opt(None, help="displayedName shown in pings")
    kafka: str = _opt("127.0.0.1:9092", env=("KAFKA_HOSTS",), help="Kafka bootstrap servers")
    topic_prefix: str = _opt(
        "", env=("CONFIG_whisk_kafka_topics_prefix",), help="Kafka topic prefix"
    )
    couchdb_url: str = _opt("http://127.0.0.1:5984", help="CouchDB-API server URL")
    couchdb_user: str = _opt(
        "whisk_admin", env=("CONFIG_whisk_couchdb_username",), help="CouchDB user"
    )
    couchdb_password: str = _opt(
        "some_passw0rd", env=("CONFIG_whisk_couchdb_password",), help="CouchDB password"
    )
    db_prefix: str = _opt("whisk_local_", env=("DB_PREFIX",), help="CouchDB database name prefix")
    db_whisks: str | None = _opt(None, env=("DB_WHISK_ACTIONS",), help="actions database name")
    db_activations: str | None = _opt(
        None, env=("DB_WHISK_ACTIVATIONS",), help="activations database name"
    )
    user_memory_mb: int = _opt(
        2048, env=("CONFIG_whisk_containerPool_userMemory",), help="memory for action containers"
    )
    action_cores: tuple[int, ...] = _opt(
        factory=default_cores,
        help="cores for actions: a count (2), or core ids: 1,2 or 1-3 (one id: 1,)",
    )
    policy: str = _opt("fc", help="call-scheduling policy: fifo, sept, eect, rect, fc, openwhisk")
    fc_window_s: float = _opt(60.0, help="FC's window T in seconds")
    cpu_sample_s: float = _opt(
        0.5, help="seconds between samples of running calls' CPU use (misprediction guard; 0: off)"
    )
    backend: str = _opt("process", help="container backend: process or docker")
    docker_host: str | None = _opt(None, env=("DOCKER_HOST",), help="Docker Engine API address")
    docker_binds: tuple[str, ...] = _opt(
        factory=tuple, help="extra binds for action containers, e.g. /usr:/usr:ro (docker)"
    )
    docker_reach: str = _opt(
        "publish",
        help="how the invoker reaches runtimes (docker): publish (8080 on 127.0.0.1), host "
        "(host network, a loopback port each), address (the container's IP on the network)",
    )
    docker_network: str = _opt("bridge", help="Docker network of action containers (docker)")
    runtimes_manifest: str | None = _opt(
        None, env=("RUNTIMES_MANIFEST",), help="path of a stock runtimes.json"
    )
    runtime_images: tuple[str, ...] = _opt(
        factory=tuple, help="image overrides KIND=IMAGE,... for the docker backend"
    )
    state_dir: str = _opt(".state/invoker", help="where containers, spools and pid files live")
    action_user: str | None = _opt(
        None, help="run actions as this user, e.g. nobody (process backend; the invoker as root)"
    )
    admin_host: str = _opt("127.0.0.1", help="admin HTTP listen address")
    admin_port: int = _opt(8085, env=("PORT",), help="admin HTTP port (/ping, /metrics, ...)")
    admin_user: str = _opt(
        "invoker.user", env=("CONFIG_whisk_invoker_username",), help="admin user"
    )
    admin_password: str = _opt(
        "invoker.pass", env=("CONFIG_whisk_invoker_password",), help="admin password"
    )
    api_host: str = _opt("http://127.0.0.1:3233", help="__OW_API_HOST given to actions")
    pause_grace_s: float = _opt(10.0, help="idle seconds before a warm container is paused")
    idle_timeout_s: float = _opt(600.0, help="idle seconds before a warm container is removed")
    task_failures: int = _opt(
        3, help="failures of one background task within --task-failure-window-s that fail the node"
    )
    task_failure_window_s: float = _opt(
        30.0, help="window in seconds for --task-failures (then no pings, and run exits)"
    )
    prewarm: tuple[str, ...] = _opt(
        factory=tuple, help="extra stem cells KIND:COUNT:MEMORY_MB, e.g. python:3.11:2:256"
    )
    max_pending: int = _opt(100_000, help="activations held before consumption pauses")
    record_spool_mb: int = _opt(512, help="disk kept for records while CouchDB is down")
    gpu_devices: str | None = _opt(
        None, help="GPU pool for actions annotated gpu=true: auto, nvml, virtual:N (off if unset)"
    )
    gpu_memory_mb: int = _opt(1024, help="memory of each virtual GPU device")
    gpu_policy: str = _opt(
        "lalbo3", help="GPU scheduler: lb, lalb, lalbo3, cfs-affinity, exclusive"
    )
    gpu_o3_limit: int = _opt(25, help="LALB+O3 skip limit")
    log_level: str = _opt("INFO", help="logging level")

    def __post_init__(self) -> None:
        if self.instance < 0:
            raise ValueError("instance must be >= 0")
        if self.user_memory_mb < 128:
            raise ValueError("user memory must be at least 128 MB")
        if not self.action_cores:
            raise ValueError("at least one action core is needed")
        if self.backend not in ("process", "docker"):
            raise ValueError(f"unknown backend {self.backend!r}: choose process or docker")
        if self.docker_reach not in ("publish", "host", "address"):
            raise ValueError(f"docker_reach: publish, host or address, not {self.docker_reach!r}")
        if self.fc_window_s <= 0:
            raise ValueError("fc_window_s must be positive")
        if self.max_pending < 1:
            raise ValueError("max_pending must be positive")
        if self.cpu_sample_s < 0:
            raise ValueError("cpu_sample_s must be >= 0 (0 turns sampling off)")
        if self.task_failures < 1 or not self.task_failure_window_s > 0:
            raise ValueError("task_failures and task_failure_window_s must be positive")
        if self.action_user is not None:
            import pwd

            try:
                pwd.getpwnam(self.action_user)
            except KeyError:
                raise ValueError(f"action user {self.action_user!r} does not exist") from None
        from policies import get_policy

        get_policy(self.policy)  # raises with the list of valid names

    @property
    def whisks_db(self) -> str:
        return self.db_whisks or f"{self.db_prefix}whisks"

    @property
    def activations_db(self) -> str:
        return self.db_activations or f"{self.db_prefix}activations"

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


_CONVERTERS = {
    "int": int,
    "float": float,
    "str": str,
    "str | None": str,
    "tuple[int, ...]": parse_cores,
    "tuple[str, ...]": lambda v: (
        tuple(v) if isinstance(v, list) else tuple(s for s in str(v).split(",") if s)
    ),
}


def _convert(name: str, type_name: str, value: Any) -> Any:
    if name == "user_memory_mb":
        return parse_memory_mb(value)
    return _CONVERTERS[type_name](value)


def add_arguments(parser: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One ``--flag`` per configuration field (defaults resolved later, not by argparse)."""
    parser.add_argument("--config", help="TOML configuration file (keys as the flags, with _)")
    for f in fields(InvokerConfig):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        aliases = ["--id"] if f.name == "instance" else []
        env = ", ".join([f"OW_INVOKER_{f.name.upper()}", *f.metadata["env"]])
        parser.add_argument(
            flag, *aliases, dest=f.name, default=None, help=f"{f.metadata['help']} [env: {env}]"
        )


def load(
    args: argparse.Namespace | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> InvokerConfig:
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    config_file = getattr(args, "config", None) if args else None
    if config_file:
        data = tomllib.loads(Path(config_file).read_text())
        data = data.get("invoker", data)
        known = {f.name for f in fields(InvokerConfig)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown keys in {config_file}: {', '.join(sorted(unknown))}")
        values.update(data)
    for f in fields(InvokerConfig):
        for name in (*f.metadata["env"], f"OW_INVOKER_{f.name.upper()}"):
            if name in environ:
                values[f.name] = environ[name]
        if args is not None and getattr(args, f.name, None) is not None:
            values[f.name] = getattr(args, f.name)
    values.update(overrides)
    types = {f.name: str(f.type) for f in fields(InvokerConfig)}
    converted = {k: _convert(k, types[k], v) for k, v in values.items()}
    return InvokerConfig(**converted)
