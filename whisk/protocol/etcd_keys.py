"""The etcd keys and values of the scheduler ("FPC") mode, as pure functions: what an
invoker writes, and what a controller reads (the invokers' records, the schedulers' states,
each action queue's leader).

They must be exactly the stock components' (/work/shared/docs/openwhisk-protocol.md §1.8;
upstream's ``ContainerKeys``, ``InvokerKeys``, ``InstanceKeys``, ``SchedulerKeys``,
``QueueKeys``): the controller and the scheduler find invokers, schedulers and queues and
count containers by these prefixes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

STATUSES = ("up", "unhealthy", "unresponsive", "down")


@dataclass(frozen=True)
class InvokerId:
    """``invoker<N>``, with its optional unique and displayed names (stock InvokerInstanceId)."""

    instance: int
    unique_name: str | None = None
    displayed_name: str | None = None

    def __str__(self) -> str:
        names = [n for n in (self.unique_name, self.displayed_name) if n]
        return "/".join([f"invoker{self.instance}", *names])


@dataclass(frozen=True)
class ContainerRef:
    """One container of an action revision, for an invocation namespace. ``path`` is the
    action's namespace (``ns`` or ``ns/pkg``), ``action`` its name: ``path/action`` is the
    fully qualified name without its version."""

    invocation_namespace: str
    path: str
    action: str
    revision: str
    container_id: str

    @property
    def fqn(self) -> str:
        return f"{self.path}/{self.action}"


@dataclass(frozen=True)
class ResourceRecord:
    """What the invoker reports of itself every second (memory in MB)."""

    status: str = "up"
    free_memory_mb: int = 0
    busy_memory_mb: int = 0
    in_progress_memory_mb: int = 0
    tags: tuple[str, ...] = field(default_factory=tuple)
    dedicated_namespaces: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")

    @classmethod
    def from_json(cls, text: str) -> ResourceRecord:
        """A record as an invoker wrote it; ValueError if it is not one."""
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError(f"an invoker record is a JSON object, not {text[:80]!r}")
        try:
            return cls(
                status=doc["status"],
                free_memory_mb=int(doc["freeMemory"]),
                busy_memory_mb=int(doc["busyMemory"]),
                in_progress_memory_mb=int(doc["inProgressMemory"]),
                tags=tuple(doc.get("tags", ())),
                dedicated_namespaces=tuple(doc.get("dedicatedNamespaces", ())),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not an invoker record ({e!r}): {text[:80]!r}") from e

    def to_json(self) -> str:
        """The stock invoker's JSON, its fields in its order."""
        return json.dumps(
            {
                "status": self.status,
                "freeMemory": self.free_memory_mb,
                "busyMemory": self.busy_memory_mb,
                "inProgressMemory": self.in_progress_memory_mb,
                "tags": list(self.tags),
                "dedicatedNamespaces": list(self.dedicated_namespaces),
            },
            separators=(",", ":"),
        )


def lease_key(cluster: str, invoker: InvokerId) -> str:
    """``<cluster>/instance/invoker<N>[/<unique>[/<displayed>]]/lease``: holds the lease id."""
    return f"{cluster}/instance/{invoker}/lease"


def record_key(cluster: str, invoker: InvokerId) -> str:
    """``<cluster>/invokers/<N>[/<unique>[/<displayed>]]``: holds the resource record (a
    displayed name only with a unique name, as upstream's ``InvokerKeys.health``)."""
    key = f"{cluster}/invokers/{invoker.instance}"
    if invoker.unique_name:
        key += f"/{invoker.unique_name}"
        if invoker.displayed_name:
            key += f"/{invoker.displayed_name}"
    return key


def container_key(cluster: str, invoker: InvokerId, ref: ContainerRef) -> str:
    """A container that holds an activation client:
    ``<cluster>/namespace/<invocationNs>/<fqn>/<rev>/invoker<N>/container/<id>``."""
    return (
        f"{cluster}/namespace/{ref.invocation_namespace}/{ref.fqn}/{ref.revision}"
        f"/invoker{invoker.instance}/container/{ref.container_id}"
    )


def warmed_key(cluster: str, invoker: InvokerId, ref: ContainerRef) -> str:
    """A container paused warm:
    ``<cluster>/warmed/<invocationNs>/<fqn>/<rev>/invoker/<N>/container/<id>``."""
    return (
        f"{cluster}/warmed/{ref.invocation_namespace}/{ref.fqn}/{ref.revision}"
        f"/invoker/{invoker.instance}/container/{ref.container_id}"
    )


def invokers_prefix(cluster: str) -> str:
    """The prefix of every invoker's record (what a controller's ``GET /invokers`` reads)."""
    return f"{cluster}/invokers/"


def invoker_of_record_key(cluster: str, key: str) -> InvokerId:
    """The invoker a record key names (:func:`record_key`'s inverse); ValueError if none."""
    prefix = invokers_prefix(cluster)
    parts = key.removeprefix(prefix).split("/") if key.startswith(prefix) else []
    if not parts or not parts[0].isdigit() or len(parts) > 3:
        raise ValueError(f"{key!r} is not an invoker record key under {prefix!r}")
    return InvokerId(int(parts[0]), *parts[1:])


@dataclass(frozen=True)
class SchedulerState:
    """``<cluster>/scheduler/<S>``'s value (upstream's SchedulerStates): a scheduler's id,
    how many queues it leads, and its endpoints (gRPC and Pekko ports; at least one not 0).
    A queue's leader key holds the endpoints alone."""

    sid: str
    queue_size: int
    host: str
    rpc_port: int
    pekko_port: int = 0

    def endpoints_json(self) -> str:
        return json.dumps(
            {"host": self.host, "rpcPort": self.rpc_port, "pekkoPort": self.pekko_port},
            separators=(",", ":"),
        )

    def to_json(self) -> str:
        return (
            f'{{"sid":{{"asString":{json.dumps(self.sid)}}},"queueSize":{self.queue_size},'
            f'"endpoints":{self.endpoints_json()}}}'
        )

    @classmethod
    def from_json(cls, text: str) -> SchedulerState:
        """A state as a scheduler wrote it; ValueError if it is not one."""
        try:
            doc = json.loads(text)
            ends = doc["endpoints"]
            return cls(
                sid=str(doc["sid"]["asString"]),
                queue_size=int(doc["queueSize"]),
                host=str(ends["host"]),
                rpc_port=int(ends["rpcPort"]),
                pekko_port=int(ends["pekkoPort"]),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a scheduler state ({e!r}): {text[:80]!r}") from e

    def serves(self, endpoints: str) -> bool:
        """Whether a leader key's value (its endpoints JSON) names this scheduler."""
        try:
            ends = json.loads(endpoints)
            return (ends["host"], int(ends["rpcPort"]), int(ends["pekkoPort"])) == (
                self.host,
                self.rpc_port,
                self.pekko_port,
            )
        except (ValueError, KeyError, TypeError):
            return False


def schedulers_prefix(cluster: str) -> str:
    return f"{cluster}/scheduler/"


def scheduler_key(cluster: str, sid: str) -> str:
    """``<cluster>/scheduler/<S>``: the scheduler's :class:`SchedulerState`."""
    return f"{schedulers_prefix(cluster)}{sid}"


def queue_leader_key(cluster: str, invocation_namespace: str, fqn: str) -> str:
    """``<cluster>/queue/<invocationNs>/<fqn without version>/leader``: the endpoints of the
    scheduler whose memory queue holds this action's calls."""
    return f"{cluster}/queue/{invocation_namespace}/{fqn}/leader"
