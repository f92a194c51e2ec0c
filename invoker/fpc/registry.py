"""The invoker's presence in etcd in the scheduler ("FPC") mode, as the stock FPC invoker's
(observed: /work/shared/docs/openwhisk-protocol.md §1.8).

The invoker holds one lease of its own (TTL: the lease timeout), kept alive every TTL/3, and
puts every key on it: the lease key, its resource record (rewritten every second, as the
stock invoker does: the scheduler reads it as a heartbeat), and a key per container
(``namespace/...`` while it holds an activation client, ``warmed/...`` while paused warm).
If the invoker dies, the lease expires and etcd drops everything with it.

The registry keeps the keys it *should* hold in memory and applies them from its loops, so
the container code never waits on etcd. When etcd is out of reach or the lease is gone
(expired during a partition, revoked), :attr:`Registry.state` says "lost" (why, since when),
the loops retry with back-off, and once etcd answers the lease is kept or a new one granted
and every key is written again: nothing is lost across an outage. :meth:`close` revokes the
lease (deregistration). The loops run under a :class:`~whisk.supervisor.Supervisor`: an etcd
failure is a state, anything else is logged and the loop restarted.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from whisk.clock import Clock
from whisk.etcd import EtcdError
from whisk.protocol import etcd_keys as keys
from whisk.protocol.etcd_keys import ContainerRef, InvokerId, ResourceRecord
from whisk.supervisor import Supervisor

log = logging.getLogger(__name__)

Status = Literal["starting", "registered", "lost", "closed"]


class Etcd(Protocol):
    """What the registry needs of etcd (:class:`~whisk.etcd.EtcdClient`; a fake in the
    unit tests). Each call raises :class:`EtcdError` when etcd cannot be reached."""

    async def put(self, key: str, value: str, lease: int = 0) -> None: ...
    async def delete(self, key: str) -> int: ...
    async def lease_grant(self, ttl_s: int) -> int: ...
    async def lease_keepalive(self, lease: int) -> int: ...
    async def lease_revoke(self, lease: int) -> bool: ...


@dataclass(frozen=True)
class RegistryState:
    """For the health check: ``status``, ``reason`` (why, in words), ``since_ms`` (epoch ms
    of the last change of status) and the ``lease`` id held (None while none is)."""

    status: Status
    reason: str
    since_ms: int
    lease: int | None


class Registry:
    """One invoker's keys in etcd, on one lease, kept there across etcd outages."""

    def __init__(
        self,
        client: Etcd,
        invoker: InvokerId,
        record: Callable[[], ResourceRecord],
        *,
        clock: Clock,
        supervisor: Supervisor | None = None,
        cluster: str = "whisk",
        lease_ttl_s: int = 10,
        record_interval_s: float = 1.0,
        backoff_s: float = 0.5,
        max_backoff_s: float = 5.0,
    ) -> None:
        if lease_ttl_s < 2:
            raise ValueError("lease_ttl_s must be at least 2 s (etcd's minimum TTL)")
        self.client = client
        self.invoker = invoker
        self.cluster = cluster
        self.lease_ttl_s = lease_ttl_s
        self.keepalive_s = lease_ttl_s / 3
        self.record_interval_s = record_interval_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.lease_key = keys.lease_key(cluster, invoker)
        self.record_key = keys.record_key(cluster, invoker)
        self._record = record
        self._clock = clock
        self._supervisor = supervisor or Supervisor(clock)
        self._state = RegistryState("starting", "not registered yet", clock.epoch_ms(), None)
        self._lease: int | None = None
        self._keys: dict[str, str] = {}  # every key it should hold, with its value
        self._pending: set[str] = set()  # keys etcd may not have as they should be
        self._lock = asyncio.Lock()  # one writer at a time
        self._kick = asyncio.Event()  # the writer: pending keys
        self._wake = asyncio.Event()  # the lease keeper: the registration was lost
        self._settled = asyncio.Event()  # registered, nothing pending
        self._started = False
        self._loops = (f"etcd-lease-{invoker.instance}", f"etcd-write-{invoker.instance}")

    # -- what the invoker uses --

    @property
    def state(self) -> RegistryState:
        """The registration's state; "lost" too while one of its loops is down (failed with
        something other than etcd's errors: restarting, or given up by the supervisor)."""
        state = self._state
        if self._started and state.status != "closed":
            down = [n for n in self._loops if not self._supervisor.running(n)]
            if down:
                why = self._supervisor.failure or f"restarting {', '.join(down)}"
                return RegistryState("lost", f"its task is down: {why}", state.since_ms, None)
        return state

    @property
    def keys(self) -> dict[str, str]:
        """The keys it holds (or will hold again once etcd answers), with their values."""
        return dict(self._keys)

    async def start(self) -> RegistryState:
        """Register (one try: if etcd does not answer, the loops keep trying) and start the
        loops that keep the lease and write the record and container keys."""
        self._refresh_record()
        await self._try_register()
        self._started = True
        self._supervisor.start(self._loops[0], self._keep_lease)
        self._supervisor.start(self._loops[1], self._keep_writing)
        return self._state

    def add_container(self, ref: ContainerRef) -> None:
        """The container holds an activation client (its warmed key, if any, goes)."""
        self._set(keys.container_key(self.cluster, self.invoker, ref), "")
        self._drop(keys.warmed_key(self.cluster, self.invoker, ref))

    def warm(self, ref: ContainerRef) -> None:
        """The container is paused warm: its container key is replaced by a warmed key."""
        self._drop(keys.container_key(self.cluster, self.invoker, ref))
        self._set(keys.warmed_key(self.cluster, self.invoker, ref), "")

    def remove(self, ref: ContainerRef) -> None:
        """The container is gone: either key goes."""
        self._drop(keys.container_key(self.cluster, self.invoker, ref))
        self._drop(keys.warmed_key(self.cluster, self.invoker, ref))

    async def flushed(self, timeout_s: float = 10.0) -> None:
        """Wait until etcd holds every key as it should (registered, nothing pending)."""
        async with asyncio.timeout(timeout_s):
            await self._settled.wait()

    async def close(self) -> None:
        """Stop the loops and revoke the lease: every key goes with it (deregistration)."""
        await self._supervisor.stop(*self._loops)
        lease, self._lease = self._lease, None
        self._set_state("closed", "closed")
        if lease is None:
            return
        try:
            if await self.client.lease_revoke(lease):
                log.info("etcd: revoked lease %d of %s", lease, self.invoker)
        except EtcdError as e:  # it expires on its own within the TTL
            log.warning(
                "etcd: could not revoke lease %d (it expires in %d s): %s",
                lease,
                self.lease_ttl_s,
                e,
            )

    # -- the desired keys --

    def _set(self, key: str, value: str) -> None:
        self._keys[key] = value
        self._pending.add(key)
        self._settled.clear()
        self._kick.set()

    def _drop(self, key: str) -> None:
        if self._keys.pop(key, None) is not None:
            self._pending.add(key)
            self._settled.clear()
            self._kick.set()

    def _refresh_record(self) -> None:
        try:
            record = self._record()
        except Exception:  # the last record stays; the next second tries again
            log.exception("etcd: the resource record could not be read")
            return
        self._set(self.record_key, record.to_json())

    # -- state --

    def _set_state(self, status: Status, reason: str) -> None:
        old = self._state
        since = old.since_ms if old.status == status else self._clock.epoch_ms()
        self._state = RegistryState(status, reason, since, self._lease)
        if status == old.status:
            return
        if status == "lost":
            log.warning("etcd: %s lost its registration: %s", self.invoker, reason)
        elif status == "registered":
            log.info(
                "etcd: %s registered (%s) after %.1f s %s",
                self.invoker,
                reason,
                (self._state.since_ms - old.since_ms) / 1000,
                old.status,
            )

    def _lose(self, reason: str) -> None:
        if self._state.status != "closed":
            self._set_state("lost", reason)
            self._settled.clear()
            self._wake.set()

    # -- the loops --

    async def _try_register(self) -> bool:
        """Keep the lease if it lives, else grant one; then write every key on it."""
        try:
            async with self._lock:
                if self._lease is not None and await self.client.lease_keepalive(self._lease) <= 0:
                    log.warning("etcd: lease %d is gone; granting a new one", self._lease)
                    self._lease = None
                if self._lease is None:
                    self._lease = await self.client.lease_grant(self.lease_ttl_s)
                    self._keys[self.lease_key] = str(self._lease)
                self._pending.update(self._keys)  # rewritten, all of them
                await self._flush_locked()
        except EtcdError as e:
            self._lose(str(e))
            return False
        self._set_state("registered", f"lease {self._lease}")
        self._note_settled()
        return True

    async def _flush_locked(self) -> None:
        """Put or delete each pending key; one that fails stays pending. The lease is read
        once: should the keeper find it gone meanwhile, the puts fail on it (and the keys are
        written again on the next lease), never written without one."""
        lease = self._lease
        assert lease is not None
        while self._pending:
            # Deletions first: a container's key goes before its warmed key appears (and the
            # other way round), so etcd never shows it both held and warm.
            key = min(self._pending, key=lambda k: k in self._keys)
            self._pending.discard(key)
            value = self._keys.get(key)
            try:
                if value is None:
                    await self.client.delete(key)
                else:
                    await self.client.put(key, value, lease)
            except BaseException:
                if self._keys.get(key) == value:  # unless changed meanwhile (then pending)
                    self._pending.add(key)
                raise

    async def _keep_lease(self) -> None:
        backoff = self.backoff_s
        while True:
            if self._state.status != "registered":
                if await self._try_register():
                    backoff = self.backoff_s
                else:
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self.max_backoff_s)
                continue
            await _wait(self._wake, self.keepalive_s)
            lease = self._lease
            if self._state.status != "registered" or lease is None:
                continue
            try:
                ttl = await self.client.lease_keepalive(lease)
            except EtcdError as e:
                self._lose(f"keep-alive of lease {lease} failed: {e}")
                continue
            if ttl <= 0:
                self._lease = None
                self._lose(f"lease {lease} is gone (expired or revoked)")

    async def _keep_writing(self) -> None:
        next_record = self._clock.now() + self.record_interval_s
        while True:
            await _wait(self._kick, max(0.0, next_record - self._clock.now()))
            if self._clock.now() >= next_record:
                self._refresh_record()
                next_record += self.record_interval_s * max(
                    1, math.ceil((self._clock.now() - next_record) / self.record_interval_s)
                )
            if self._state.status != "registered" or not self._pending:
                continue
            try:
                async with self._lock:
                    if self._state.status == "registered":
                        await self._flush_locked()
            except EtcdError as e:
                self._lose(str(e))
            self._note_settled()

    def _note_settled(self) -> None:
        if self._state.status == "registered" and not self._pending:
            self._settled.set()


async def _wait(event: asyncio.Event, timeout_s: float) -> None:
    """Until the event is set or the time has passed; the event is cleared."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        pass
    event.clear()
