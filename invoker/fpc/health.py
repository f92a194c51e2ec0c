"""The scheduler mode's health: the node tests itself, as upstream's InvokerHealthManager.

No controller sends an FPC invoker health test actions, and no pings go out: the resource
record's ``status`` in etcd is all a scheduler reads. So, as the stock FPC invoker, the node
writes ``whisk.system/invokerHealthTestAction<N>`` (the default nodejs kind, ``function
main(params) { return params; }``, 128 MB, no logs) into the whisks database at start-up,
and runs it on a container of its own, one call after another, until the node is healthy;
then that container goes. Every call the node runs counts too (:class:`HealthRing`): with
:data:`TOLERANCE` whisk errors among the last :data:`BUFFER` calls the node is unhealthy, and
the test runs again until enough calls succeed.

A test call is an ordinary non-blocking activation of controller ``health``: its record is
stored (namespace ``whisk.system``) as the stock invoker stores it, but no ack is sent, since
no controller reads ``completedhealth`` (:data:`invoker.acks.HEALTH_CONTROLLER`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

from containers.placement import WarmKey
from containers.pool import Lease
from invoker.acks import HEALTH_CONTROLLER
from invoker.actions import FetchError
from invoker.activation import Binding, Ran
from whisk.protocol import QualifiedName, dumps
from whisk.protocol.actions import Action
from whisk.protocol.controller import action_document, activation_message
from whisk.protocol.messages import Identity
from whisk.store.base import StoreError

if TYPE_CHECKING:
    from invoker.service import Invoker

log = logging.getLogger(__name__)

BUFFER = 10  # the calls remembered
TOLERANCE = 3  # whisk errors among them that make the node unhealthy
NAMESPACE = "whisk.system"
NAME_PREFIX = "invokerHealthTestAction"
CODE = "function main(params) { return params; }"
MEMORY_MB = 128  # upstream's MemoryLimit.MIN_MEMORY
RETRY_S = 1.0  # between tests that failed, and between tries to write the action
CONDITION = "health-test"  # the node's health condition (invoker.health.NodeHealth)


class HealthRing:
    """Upstream's ring of the last :data:`BUFFER` call outcomes (True: no whisk error).
    Healthy once any outcome is in and fewer than :data:`TOLERANCE` are whisk errors: the
    first test's outcome, whatever it is, decides, as upstream's does."""

    def __init__(self) -> None:
        self._last: deque[bool] = deque(maxlen=BUFFER)

    def add(self, ok: bool) -> None:
        self._last.append(ok)

    @property
    def errors(self) -> int:
        return sum(not ok for ok in self._last)

    @property
    def healthy(self) -> bool:
        return bool(self._last) and self.errors < TOLERANCE

    @property
    def problem(self) -> str | None:
        """What the node's health shows (None: healthy)."""
        if not self._last:
            return "the health test action has not run yet"
        if self.errors >= TOLERANCE:
            return f"{self.errors} of the last {len(self._last)} calls ended in a whisk error"
        return None


def health_action_document(instance: int, kind: str, updated_ms: int) -> dict[str, Any]:
    """The test action as the stock FPC invoker writes it."""
    return action_document(
        NAMESPACE,
        f"{NAME_PREFIX}{instance}",
        kind=kind,
        code=CODE.encode(),
        memory_mb=MEMORY_MB,
        logs_mb=0,
        updated_ms=updated_ms,
    )


def health_identity() -> Identity:
    """A ``whisk.system`` identity with a fresh key and no rights, as upstream's: the test
    action is handed a key that opens nothing."""
    ns_uuid = str(uuid.uuid4())
    return Identity(
        subject=NAMESPACE,
        namespace=NAMESPACE,
        namespace_uuid=ns_uuid,
        authkey={"api_key": f"{ns_uuid}:{secrets.token_urlsafe(48)[:64]}"},
    )


class HealthTest:
    """Keeps :attr:`ring` and the node's ``health-test`` condition; runs the test action
    while the node is unhealthy."""

    def __init__(self, invoker: Invoker) -> None:
        self.invoker = invoker
        self.ring = HealthRing()
        self.tests = 0  # test calls run
        self.last_activation_id: str | None = None
        self._needed = asyncio.Event()
        self._needed.set()
        self._identity = health_identity()
        self.docid = f"{NAMESPACE}/{NAME_PREFIX}{invoker.instance.instance}"
        invoker.health.report(CONDITION, self.ring.problem)

    def add(self, ran: Ran) -> None:
        """A call the node ran (its puller's outcome)."""
        self._record(not ran.whisk_error)

    def _record(self, ok: bool) -> None:
        was = self.ring.healthy
        self.ring.add(ok)
        self.invoker.health.report(CONDITION, self.ring.problem)
        if self.ring.healthy != was:
            log.info("health: %s", "healthy" if self.ring.healthy else self.ring.problem)
        if self.ring.healthy:
            self._needed.clear()
        else:
            self._needed.set()

    @property
    def state(self) -> str:
        return self.ring.problem or "passed"

    async def run(self) -> None:
        """Write the action, then test whenever the ring is unhealthy (a supervised loop).
        A test whose container cannot be made counts as failed, as upstream's."""
        revision = await self._write_action()
        lease: Lease | None = None
        try:
            while True:
                if lease is not None and self.ring.healthy:  # upstream stops its container
                    self.invoker.pool.release(lease, healthy=False)
                    lease = None
                await self._needed.wait()
                try:
                    action = await self.invoker.fetcher.fetch(self.docid, revision)
                except FetchError as e:  # the database is away: not the node's fault
                    log.warning("health test: %s", e.message)
                    await asyncio.sleep(RETRY_S)
                    continue
                lease = lease or await self._container(action)
                ok = lease is not None and await self._test(action, lease)
                if ok is None:  # handed back: the node is stopping, no more tests
                    self._needed.clear()
                    continue
                self.tests += 1
                if not ok and lease is not None:
                    self.invoker.pool.release(lease, healthy=False)
                    lease = None
                self._record(ok)
                if not ok:
                    await asyncio.sleep(RETRY_S)
        finally:
            if lease is not None:
                self.invoker.pool.release(lease, healthy=False)

    async def _write_action(self) -> str:
        """Create or update the test action (retried while the database is away)."""
        inv = self.invoker
        kind = inv.manifest.defaults.get("nodejs", "nodejs:20")
        while True:
            try:
                doc = health_action_document(inv.instance.instance, kind, inv.clock.epoch_ms())
                old = await inv.store.get(inv.config.whisks_db, self.docid)
                if old is not None:
                    doc["_rev"] = old["_rev"]
                return await inv.store.put(inv.config.whisks_db, doc)
            except StoreError as e:
                log.warning("the health test action cannot be written yet: %s", e)
                await asyncio.sleep(RETRY_S)

    async def _container(self, action: Action) -> Lease | None:
        """A lease on a ready container for the test action, or None (logged)."""
        pool = self.invoker.pool
        key = WarmKey(NAMESPACE, action.docid, action.revision)
        lease = pool.reserve(key, action.kind, action.limits.memory_mb, action.image)
        if lease is None:
            log.warning("health test: no memory for its container")
            return None
        try:
            await pool.prepare(lease, NAMESPACE, action.name)
        except Exception as e:
            pool.release(lease, healthy=False)
            log.warning("health test: its container could not be made: %s", e)
            return None
        return lease

    async def _test(self, action: Action, lease: Lease) -> bool | None:
        """One test call through the node's queue: True unless it ended in a whisk error
        or broke its container; None if the node handed it back unrun (stopping)."""
        inv = self.invoker
        now_ms = inv.clock.epoch_ms()
        msg = activation_message(
            QualifiedName(NAMESPACE, action.name, action.version),
            action.revision,
            start_ms=now_ms,
            user=self._identity,
            blocking=False,
            controller=HEALTH_CONTROLLER,
            transid=["sid_invokerHealthActivation", now_ms],
        )
        self.last_activation_id = msg.activation_id
        binding = Binding(lease, asyncio.get_running_loop().create_future())
        answer = await inv.admit_pulled(dumps(msg.to_json()), msg, binding)
        if answer is not None:  # answered without running (over a limit, say)
            await answer
            return False
        ran = await binding.ended
        if ran is None:
            return None
        if ran.whisk_error or not ran.healthy:
            log.warning("health test call %s failed", msg.activation_id)
        return not ran.whisk_error and ran.healthy
