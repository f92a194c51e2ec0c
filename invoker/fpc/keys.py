"""The etcd keys and values an invoker writes in the scheduler ("FPC") mode, as pure functions.

They must be exactly the stock invoker's (/work/shared/docs/openwhisk-protocol.md §1.8; upstream's
``ContainerKeys``, ``InvokerKeys``, ``InstanceKeys``): the controller and the scheduler find
invokers and count their containers by these prefixes.
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
