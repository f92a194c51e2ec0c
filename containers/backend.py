"""The contract every container backend fulfils (process, Docker API, simulated).

A backend creates *containers*: isolated action runtimes that speak OpenWhisk's ``/init`` +
``/run`` protocol on a loopback HTTP port (the simulated backend only pretends). Each
backend must:

- name and label what it creates with the invoker's ``name_prefix`` so that leftovers of a
  crashed invoker are found and removed by :meth:`ContainerBackend.remove_leftovers` at
  start-up and shutdown;
- enforce the spec's memory limit, and run a call on exactly the cores it is given by
  :meth:`Container.assign_cores` (one core under the scheduling policies, all action cores
  under the ``openwhisk`` baseline);
- take a CPU weight (:meth:`Container.set_cpu_weight`) that the kernel enforces among the
  containers sharing a core (and say whether it ranks them against the invoker's own
  process too: :attr:`ContainerBackend.weights_among_calls`);
- give each container its own working directory and ``/tmp``;
- keep the runtime's stdout/stderr as timestamped lines, so :meth:`Container.read_logs` can
  return one activation's lines up to the sentinels;
- never pass the invoker's own environment or credentials to action code.

A backend's containers never touch its private state: each is given, at creation, what it needs
(its engine, its log watcher, ...) and an ``on_removed`` callback, which its
:meth:`Container.destroy` calls once, last, so that the backend drops it from its own
bookkeeping (and frees what it held: a port, a cgroup still exiting).

The invoker picks a backend by name from :mod:`containers.registry`, which makes it from its
own settings type and a :class:`BackendContext`.
``tests/integration/containers/test_backend_contract.py`` runs this contract against every
backend (docs/architecture.md: adding one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from containers.cpu import CpuTimes


@dataclass(frozen=True, slots=True)
class BackendContext:
    """What every backend is given besides its own settings: where it may keep state
    (``state_dir``, the invoker's; a backend uses a directory of its own under it), the
    invoker's container-name prefix, and the process limit of each container."""

    state_dir: Path
    name_prefix: str
    pids_limit: int = 1024


class ContainerError(Exception):
    """A container could not be created or operated (maps to a whisk error, status 3)."""


class ImagePullError(ContainerError):
    """A blackbox image could not be pulled and no usable copy exists: the action's problem
    (a developer error, status 2, with this message), not the node's."""


class ContainerGone(ContainerError):
    """The runtime died or dropped the connection (maps to a developer error, status 2)."""


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """What to create. ``kind`` is the resolved runtime kind (``python:3.11``, ``nodejs:20``,
    ``blackbox``); ``image`` names the image for the Docker backend (and blackbox actions)."""

    name: str
    kind: str
    memory_mb: int
    image: str | None = None
    cpu_shares: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HttpResult:
    """An HTTP answer from a runtime's ``/init`` or ``/run``."""

    status: int
    body: bytes
    elapsed_s: float
    length: int | None = None  # the body's true length when more than ``body`` was sent


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of runtime output: ``time`` as ``2024-05-29T16:26:40.590123456Z``."""

    time: str
    stream: str
    text: str
    raw_size: int


class Container(Protocol):
    name: str

    async def init(self, body: bytes, timeout_s: float) -> HttpResult:
        """POST /init, retrying connection refusals until ``timeout_s`` is used up.

        Raises ``TimeoutError`` past the timeout and :class:`ContainerGone` if the runtime
        dies or drops the connection."""
        ...

    async def run(self, body: bytes, timeout_s: float) -> HttpResult:
        """POST /run once (no retries). Same errors as :meth:`init`."""
        ...

    async def assign_cores(self, cores: frozenset[int]) -> None:
        """Restrict the container to these CPU cores for the coming call."""
        ...

    async def cpu_times(self) -> CpuTimes | None:
        """CPU time the container has used so far, and how long it waited for a CPU (see
        :mod:`containers.cpu`), or None if it cannot be read; the runner measures a call's
        as the difference around ``/run``."""
        ...

    async def read_logs(
        self, limit_bytes: int, wait_for_sentinels: bool
    ) -> tuple[list[LogLine], bool]:
        """Lines printed since the previous call, up to (excluding) the two sentinel lines.

        Returns ``(lines, complete)``; ``complete`` is False if the sentinels did not appear
        within the collection timeout. Stops reading once ``limit_bytes`` of raw lines is
        exceeded (the rest of that activation's output is skipped)."""
        ...

    async def set_cpu_weight(self, weight: int) -> None:
        """Give the container this CPU weight against the node's other containers, meant
        as cgroup v2's ``cpu.weight`` (1..10000, default 100: :mod:`containers.cgroups`):
        the kernel shares a contended core in proportion, so a low weight is a cheap,
        reversible demotion (no pause, nothing frozen). Kept until set again, across calls."""
        ...

    async def memory_usage(self) -> int | None:
        """Bytes of memory the container uses now (its cgroup's usage, else its processes'
        resident memory), or None if it cannot be read: the footprint an idle container
        is kept at (:mod:`containers.placement`)."""
        ...

    async def pause(self) -> None: ...

    async def resume(self) -> None: ...

    async def was_oom_killed(self) -> bool:
        """Whether the runtime was killed for exceeding its memory limit."""
        ...

    async def destroy(self) -> None:
        """Remove the container; idempotent, never raises. Ends by telling the backend
        (the ``on_removed`` callback it gave the container)."""
        ...


class ContainerBackend(Protocol):
    name: str

    @property
    def weights_among_calls(self) -> bool:
        """Whether the containers' CPU weights rank them among themselves only, the
        containers as a whole weighing against the invoker's process as one (a cgroup of
        their own, as Docker's ``/docker``); if not, a top-weight call outweighs the
        invoker's threads on a core they share (known after :meth:`start`)."""
        ...

    def supports(self, kind: str) -> bool:
        """Whether this backend can run actions of this resolved kind."""
        ...

    async def start(self) -> None:
        """Prepare the backend (connect to the engine, start helper processes)."""
        ...

    async def create(self, spec: ContainerSpec) -> Container:
        """Create and start a container; the runtime may still be booting (``init`` retries).

        Raises :class:`ContainerError` when resources cannot be provisioned and ``ValueError``
        for a kind this backend cannot run."""
        ...

    async def remove_leftovers(self) -> int:
        """Remove every container carrying this invoker's prefix; returns how many."""
        ...

    def share_socket(self, path: str) -> None:
        """Make a host Unix socket (the GPU pool's) reachable at the same path inside the
        containers created after :meth:`start`; called before it."""
        ...

    async def close(self) -> None:
        """Destroy what is left and release the backend; idempotent."""
        ...
