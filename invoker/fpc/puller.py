"""One container's puller (the scheduler mode): fetches its calls from the scheduler, one at
a time, and hands each to the node's own scheduling.

Upstream's ``FunctionPullingContainerProxy`` runs a fetched call at once. Here a fetched call
is queued on the node's :class:`~invoker.scheduler.NodeScheduler` bound to this container
(:class:`~invoker.activation.Binding`), so it waits for an action core in the policy's order
(a short call is not stuck behind a long one pulled earlier); the container fetches its next
call only when one of its calls ends (up to the action's concurrency run at once, as
upstream's container asks for ``maxConcurrent`` calls), telling the scheduler how long it ran.

A ``kaas`` action's puller has no container and no lease: its calls are kTasks, run by the
GPU pool. Any other puller holds the container's lease while it lives (the container counts
at its limit)
and gives it back when it ends: healthy (idle, then paused by the pool's janitor) after
``unused_s`` without a call, when the scheduler has no queue for it or cannot be reached; to
be destroyed after an ``ActionMismatch``, a deletion, or a call that left it broken.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from containers.pool import Lease
from invoker.activation import Binding, Ran
from invoker.fpc.activation_client import (
    Activation,
    ActivationClient,
    GarbageResponse,
    NoActivation,
    NoActivationKind,
    SchedulerError,
)
from invoker.fpc.journal import Journal, Pulled
from whisk.clock import Clock
from whisk.protocol import ProtocolError, dumps
from whisk.supervisor import child

log = logging.getLogger(__name__)

RETRIES = 3  # failed fetches in a row before the scheduler counts as gone
BACKOFF_S = 0.5  # the first retry's wait, doubled for each next one

# Queue a pulled call bound to a container: None once queued, or the answer to await.
Admit = Callable[[bytes, Any, Binding], Awaitable[Coroutine[Any, Any, None] | None]]
# Answer a pulled activation that fails validation but names whom to answer.
AnswerBad = Callable[[ProtocolError], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Target:
    """What a container serves: the scheduler's key of its queue."""

    invocation_namespace: str
    docid: str  # "<namespace>[/<package>]/<name>"
    revision: str | None


class Puller:
    def __init__(
        self,
        client: ActivationClient,
        lease: Lease | None,
        target: Target,
        *,
        admit: Admit,
        answer_bad: AnswerBad | None = None,
        on_ran: Callable[[Ran], None] | None = None,
        journal: Journal | None = None,
        clock: Clock,
        unused_s: float,
        concurrency: int = 1,
        retries: int = RETRIES,
        backoff_s: float = BACKOFF_S,
    ) -> None:
        self.client = client
        self.lease = lease
        self.target = target
        self._admit = admit
        self._answer_bad = answer_bad
        self._on_ran = on_ran  # told of every call that ran (the node's health)
        self._journal = journal  # its pulled calls until answered (survives a kill -9)
        self._clock = clock
        self.unused_s = unused_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.concurrency = max(1, concurrency)
        self.calls = 0  # calls it ran
        self.destroy = False  # its container is to go when it ends
        self._stop = asyncio.Event()
        self._fetching: asyncio.Task[Any] | None = None
        self._calls: set[asyncio.Task[Ran | None]] = set()  # queued or running
        self._broken = False  # a call left the container unfit
        self._warmed = False  # it has run a call (the next fetch says so)
        self._last_ms: int | None = None  # the last call's run time, for the scheduler
        self._unused_since = clock.now()

    @property
    def running(self) -> int:
        """Its calls queued or running."""
        return len(self._calls)

    @property
    def container_id(self) -> str:
        return self.client.container_id

    def stop(self, destroy: bool = False) -> None:
        """Fetch no more (a fetch held open ends now); the call it has, if any, finishes
        first. ``destroy``: its container goes too (a deletion)."""
        self.destroy = self.destroy or destroy
        self._stop.set()
        if self._fetching is not None:
            self._fetching.cancel()

    async def pull(self) -> bool:
        """Fetch and run calls until there is no more reason to; True if the container
        may be kept (idle), False if it is to be destroyed. Its calls in flight end first;
        the client is closed (``alive`` false) by the caller."""
        try:
            keep = await self._pull()
        except asyncio.CancelledError:  # the shutdown deadline: the node ends the calls
            for t in self._calls:
                t.cancel()
            raise
        await asyncio.gather(*self._calls, return_exceptions=True)  # never released mid-call
        self._reap()
        return keep and not self._broken and not self.destroy

    async def _pull(self) -> bool:
        """The fetch loop; False when the scheduler said the revision is outdated."""
        failures = 0
        while not self._stop.is_set():
            self._reap()
            if self._broken or self._stop.is_set():
                break
            if len(self._calls) >= self.concurrency:  # full: fetch when one ends
                await asyncio.wait(self._calls, return_when=asyncio.FIRST_COMPLETED)
                continue
            fetching = child(self.client.fetch(warmed=self._warmed, last_duration_ms=self._last_ms))
            self._fetching = fetching
            try:
                await asyncio.wait({fetching})
            finally:
                self._fetching = None
                fetching.cancel()  # when this task itself is cancelled
            if fetching.cancelled():  # stop() ended the fetch held open
                break
            try:
                result = fetching.result()
            except GarbageResponse as e:
                bad = e.protocol_error
                if bad is not None and bad.partial.answerable and self._answer_bad is not None:
                    await self._answer_bad(bad)  # an activation nobody can run: answered
                    continue
                failures += 1
                if failures > self.retries:
                    log.error(
                        "container %s: garbage from the scheduler, giving it up", self.container_id
                    )
                    break
                await self._pause(self.backoff_s * 2 ** (failures - 1))
                continue
            except SchedulerError as e:
                failures += 1
                if failures > self.retries:
                    log.error(
                        "container %s of %s: no answer from the scheduler after %d tries, "
                        "giving it up: %s",
                        self.container_id,
                        self.target.docid,
                        failures,
                        e,
                    )
                    break
                log.warning(
                    "container %s: fetch failed (try %d of %d): %s",
                    self.container_id,
                    failures,
                    self.retries + 1,
                    e,
                )
                await self._pause(self.backoff_s * 2 ** (failures - 1))
                continue
            failures = 0
            if isinstance(result, NoActivation):
                if result.kind is NoActivationKind.ACTION_MISMATCH:
                    log.info(
                        "container %s: its revision is outdated: removing it", self.container_id
                    )
                    return False
                if result.kind is NoActivationKind.NO_MEMORY_QUEUE:
                    log.info("container %s: the scheduler has no queue for it", self.container_id)
                    break
                self._reap()
                unused = self._clock.now() - self._unused_since
                if not self._calls and unused >= self.unused_s:
                    log.info("container %s: unused for %.0f s", self.container_id, self.unused_s)
                    break
                continue
            if self._stop.is_set():
                await self.give_back(result)
                break
            self._calls.add(child(self._run(result)))
        return True

    def _reap(self) -> None:
        """Take in the calls that ended: what the next fetch tells the scheduler, whether
        the container is still fit, when it was last used."""
        for t in [t for t in self._calls if t.done()]:
            self._calls.discard(t)
            self._unused_since = self._clock.now()
            if t.cancelled():
                continue
            if (error := t.exception()) is not None:  # a bug here: the container goes
                log.error(
                    "container %s: a call failed in the invoker", self.container_id, exc_info=error
                )
                self._broken = True
                continue
            ran = t.result()
            if ran is None:  # handed back unrun: the node is stopping
                self._stop.set()
            elif not ran.healthy:
                self._broken = True
            else:
                self._warmed = True
                if ran.run_s is not None:
                    self._last_ms = round(ran.run_s * 1000)
        if self._calls:
            self._unused_since = self._clock.now()

    async def _run(self, activation: Activation) -> Ran | None:
        """Queue the call bound to this container and wait for its end; a call handed back
        unrun (the node is stopping) is rescheduled. Journaled until answered."""
        aid = activation.message.activation_id
        answered = None
        if self._journal is not None:
            c = self.client
            where = (c.host, c.port, c.invocation_namespace, c.action.to_json(), c.revision)
            self._journal.add(Pulled(*where, activation.raw))
            answered = partial(self._journal.remove, aid)
        future = asyncio.get_running_loop().create_future()
        binding = Binding(self.lease, future, answered)
        answer = await self._admit(dumps(activation.raw), activation.message, binding)
        if answer is not None:  # answered unrun (no such action, over a limit)
            await answer
            if answered is not None:
                answered()
            return Ran(True, None)
        ran = await binding.ended
        if ran is None:
            await self.give_back(activation)
        else:
            self.calls += 1
            if self._on_ran is not None:
                self._on_ran(ran)
        return ran

    async def give_back(self, activation: Activation) -> None:
        """Reschedule a call this container will not run; logged, never raises."""
        aid = activation.message.activation_id
        try:
            queued = await self.client.reschedule(activation)
        except SchedulerError as e:
            log.error("activation %s could not be rescheduled: %s", aid, e)
            return
        log.info("activation %s %s", aid, "rescheduled" if queued else "not taken back")
        if queued and self._journal is not None:  # else the next start tries again
            self._journal.remove(aid)

    async def _pause(self, seconds: float) -> None:
        """Wait before a retry, or until stopped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
