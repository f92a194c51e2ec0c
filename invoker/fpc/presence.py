"""What the scheduler and the controllers read about a node in the scheduler mode: its
resource record and the containers it holds (upstream: keys in etcd, on a lease of the
node's own; :mod:`invoker.fpc.registry`).

:class:`EtcdPresence` is the stock FPC invoker's (with ``--etcd-hosts``, the stock
``CONFIG_whisk_etcd_hosts``); :class:`NoPresence` publishes nothing, for a scheduler told of
the node otherwise (tests, the stand-in scheduler).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from invoker.fpc.registry import Registry
from whisk.clock import Clock
from whisk.etcd import EtcdClient
from whisk.protocol.etcd_keys import ContainerRef, InvokerId, ResourceRecord
from whisk.supervisor import Supervisor


class Presence(Protocol):
    async def start(self, record: Callable[[], ResourceRecord]) -> None:
        """Register; ``record`` is read each time the record is published."""
        ...

    def add_container(self, ref: ContainerRef) -> None: ...

    def warm(self, ref: ContainerRef) -> None: ...

    def remove(self, ref: ContainerRef) -> None: ...

    async def close(self) -> None: ...

    @property
    def healthy(self) -> bool: ...

    @property
    def state(self) -> str: ...


class NoPresence:
    """Publishes nothing: the mode without etcd."""

    def __init__(self) -> None:
        self.started = False

    async def start(self, record: Callable[[], ResourceRecord]) -> None:
        self.started = True

    def add_container(self, ref: ContainerRef) -> None:
        pass

    def warm(self, ref: ContainerRef) -> None:
        pass

    def remove(self, ref: ContainerRef) -> None:
        pass

    async def close(self) -> None:
        self.started = False

    @property
    def healthy(self) -> bool:
        return True

    @property
    def state(self) -> str:
        return "none"


class EtcdPresence:
    """The node's keys in etcd: a :class:`Registry` made at start (when the node's record is
    known), its loops under the invoker's supervisor, so a failing one counts in health."""

    def __init__(
        self,
        hosts: str,
        invoker: InvokerId,
        *,
        clock: Clock,
        supervisor: Supervisor,
        cluster: str,
        lease_ttl_s: int,
    ) -> None:
        self.client = EtcdClient(hosts)
        self._registry: Callable[[Callable[[], ResourceRecord]], Registry] = lambda record: (
            Registry(
                self.client,
                invoker,
                record,
                clock=clock,
                supervisor=supervisor,
                cluster=cluster,
                lease_ttl_s=max(2, lease_ttl_s),
            )
        )
        self.registry: Registry | None = None

    async def start(self, record: Callable[[], ResourceRecord]) -> None:
        self.registry = self._registry(record)
        await self.registry.start()  # one try: if etcd does not answer, its loops keep trying

    def add_container(self, ref: ContainerRef) -> None:
        if self.registry is not None:
            self.registry.add_container(ref)

    def warm(self, ref: ContainerRef) -> None:
        if self.registry is not None:
            self.registry.warm(ref)

    def remove(self, ref: ContainerRef) -> None:
        if self.registry is not None:
            self.registry.remove(ref)

    async def close(self) -> None:
        """Revoke the lease (every key goes with it), then close the connections."""
        try:
            if self.registry is not None:
                await self.registry.close()
        finally:
            await self.client.close()

    @property
    def healthy(self) -> bool:
        return self.registry is not None and self.registry.state.status == "registered"

    @property
    def state(self) -> str:
        if self.registry is None:
            return "not started"
        s = self.registry.state
        return s.status if s.status == "registered" else f"{s.status}: {s.reason}"
