"""The container pool: owns every container of the node and applies :mod:`placement`.

Reservation is synchronous (so the dispatcher decides atomically), the slow work — creating,
resuming, destroying — is awaited by the caller of :meth:`ContainerPool.prepare`. A janitor
pauses containers idle for ``pause_grace_s`` and removes those idle for ``idle_timeout_s``.

A container of an action with ``limits.concurrency`` N > 1 is created with
``__OW_ALLOW_CONCURRENT=true`` (how the stock runtimes learn they may overlap ``/run``s;
prewarmed containers lack it, so such actions start their own), and up to N calls
:meth:`ContainerPool.join` it while it is busy; it counts its memory once, and goes back to
idle (or is destroyed, if any of its calls said so) when the last one leaves.

Keep-alive by footprint (``keep_alive="footprint"``, the invoker's default): a container that
goes idle is measured (:meth:`Container.memory_usage`) and from then on counts at what it
uses, not at its limit (:func:`placement.charged_mb`), until a call takes it again; it
counts at its limit until measured. Idle containers are then evicted only when a call needs
their memory, the one of least Greedy-Dual value first (FaasCache, ASPLOS'21: ``floor +
uses * cold-start cost / footprint``, where ``floor`` rises to each evicted container's
value, so a container not used for long ages out). The janitor measures kept containers
again every ``MEASURE_EVERY_S``; should they have grown past the node's memory, it evicts
them until they fit. ``keep_alive="limit"`` is the stock invoker's accounting: every
container counts at its limit, evicted least recently used first.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from containers.backend import (
    Container,
    ContainerBackend,
    ContainerError,
    ContainerSpec,
    ImagePullError,
)
from containers.placement import (
    AHEAD_STATES,
    IDLE_STATES,
    KEPT_STATES,
    How,
    SlotState,
    SlotView,
    WarmKey,
    fits_ahead,
    place,
    to_evict,
    used_memory,
)
from whisk.clock import Clock
from whisk.supervisor import Supervisor

log = logging.getLogger(__name__)

KEEP_ALIVE = ("footprint", "limit")
MEASURE_EVERY_S = 10.0  # how often a kept container's footprint is measured again
MIB = 1 << 20
CREATIONS_KEPT = 16  # the last creations measured, behind start_cost_s


@dataclass(slots=True)
class Slot:
    id: int
    kind: str
    memory_mb: int
    state: SlotState
    key: WarmKey | None = None
    last_used: float = 0.0
    container: Container | None = None
    initialized: bool = False
    image: str | None = None  # a blackbox action's own image (else the kind's)
    ready: asyncio.Future[None] | None = None  # resolved when a STARTING prewarm is up
    paused: bool = False  # the backend's state, which may lag ``state`` while pausing
    pausing: asyncio.Task[None] | None = None
    logs_done: asyncio.Future[None] | None = None  # the last activation's log collection
    condemned: bool = False  # destroy at release (its logs could not be collected)
    concurrency: int = 1  # calls it may run at once (the action's limit)
    calls: int = 0  # calls holding it now
    # Making it ready is done once for all the calls that share it: creating or resuming
    # it (``preparing``), then ``/init`` (``init_result``: None if it succeeded, else the
    # error every call that shares it answers with, as the stock invoker aborts them).
    preparing: asyncio.Lock = field(default_factory=asyncio.Lock)
    failure: Exception | None = None  # why creating it failed
    init_result: asyncio.Future[Any] | None = None
    # Keep-alive by footprint: what it was measured to use while kept (None: counts at its
    # limit), when, its Greedy-Dual value, its calls, and what making it cost.
    footprint_mb: int | None = None
    measured_at: float = 0.0
    keep_value: float = 0.0
    uses: int = 0
    cold_cost_s: float = 1.0  # until its own start is measured
    starting_since: float | None = None

    def view(self) -> SlotView:
        return SlotView(
            self.kind,
            self.memory_mb,
            self.state,
            self.key,
            self.last_used,
            self.footprint_mb,
            self.keep_value,
        )


@dataclass(frozen=True, slots=True)
class StemCell:
    kind: str
    memory_mb: int
    count: int


@dataclass(slots=True)
class Lease:
    """A reserved slot; ``how`` says whether it is warm, prewarmed or to be created."""

    slot: Slot
    how: How
    evict: list[Slot] = field(default_factory=list)


def _clean(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "", s)


class ContainerPool:
    def __init__(
        self,
        backend: ContainerBackend,
        *,
        user_memory_mb: int,
        clock: Clock,
        name_prefix: str,
        container_env: dict[str, str] | None = None,
        image_for: Callable[[str], str | None] = lambda kind: None,
        cpu_shares: Callable[[int], int | None] = lambda memory_mb: None,
        stem_cells: tuple[StemCell, ...] = (),
        pause_grace_s: float = 10.0,
        idle_timeout_s: float = 600.0,
        keep_alive: str = "limit",
        on_change: Callable[[], None] = lambda: None,
        supervisor: Supervisor | None = None,
    ) -> None:
        if keep_alive not in KEEP_ALIVE:
            raise ValueError(f"keep_alive is one of {', '.join(KEEP_ALIVE)}, not {keep_alive!r}")
        self.backend = backend
        self.supervisor = supervisor or Supervisor(clock)
        self.user_memory_mb = user_memory_mb
        self.clock = clock
        self.name_prefix = name_prefix
        self.container_env = container_env or {}
        self.image_for = image_for
        self.cpu_shares = cpu_shares
        self.stem_cells = stem_cells
        self.pause_grace_s = pause_grace_s
        self.idle_timeout_s = idle_timeout_s
        self.by_footprint = keep_alive == "footprint"
        self._floor = 0.0  # Greedy-Dual's: the value of the last container evicted
        self.on_change = on_change  # called whenever capacity may have freed up
        # Called with each container removed (the scheduler mode drops its warmed key).
        self.on_removed: Callable[[Container], None] = lambda container: None
        self.slots: dict[int, Slot] = {}
        self._ids = itertools.count(1)
        self._names = itertools.count(1)
        # Container names carry a per-run generation: a previous run's leftovers (still being
        # removed after a kill -9) never hold a name this run wants.
        self.generation = os.urandom(3).hex()
        self._tasks: set[asyncio.Task[None]] = set()
        # Why the last container creation failed (None after a success): the node's health.
        self.create_problem: str | None = None
        self._probe_spec: ContainerSpec | None = None
        self.cold_starts = 0
        self.warm_starts = 0
        self.prewarm_starts = 0
        self.evictions = 0
        self._evicted_prewarms: Counter[tuple[str, int]] = Counter()  # (kind, memory)
        self._creations: deque[float] = deque(maxlen=CREATIONS_KEPT)  # seconds each took

    # -- lifecycle --

    async def start(self) -> None:
        removed = await self.backend.remove_leftovers()
        if removed:
            log.info("removed %d leftover containers of a previous run", removed)
        for cell in self.stem_cells:
            for _ in range(cell.count):
                self._start_prewarm(cell)
        self.supervisor.start("pool-janitor", self._janitor_loop)

    async def close(self) -> None:
        await self.supervisor.stop("pool-janitor")
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(
            *(s.container.destroy() for s in self.slots.values() if s.container is not None),
            return_exceptions=True,
        )
        self.slots.clear()
        await self.backend.remove_leftovers()

    # -- accounting --

    @property
    def used_memory_mb(self) -> int:
        """Memory held in the pool's accounting: limits of the containers running or
        starting, footprints (or limits, unmeasured) of those kept."""
        return used_memory(self.slots.values())

    @property
    def kept_memory_mb(self) -> int:
        """The part of :attr:`used_memory_mb` held by kept (idle, paused, prewarmed)
        containers."""
        return used_memory(s for s in self.slots.values() if s.state in KEPT_STATES)

    def count(self, state: SlotState) -> int:
        return sum(1 for s in self.slots.values() if s.state is state)

    # -- reservation (synchronous) and preparation (awaited) --

    def reserve(
        self,
        key: WarmKey,
        kind: str,
        memory_mb: int,
        image: str | None = None,
        concurrency: int = 1,
    ) -> Lease | None:
        """``image``: a blackbox action's image, for a container created for this call;
        ``concurrency``: the action's limit (> 1: a container that calls may :meth:`join`)."""
        # The slots as they are (place is pure and synchronous: nothing changes meanwhile).
        p = place(self.slots, key, kind, memory_mb, self.user_memory_mb, prewarm=concurrency == 1)
        if p is None:
            return None
        victims = self._evict(p.evict)
        if p.slot is not None:
            slot = self.slots[p.slot]
        else:
            slot = Slot(next(self._ids), kind, memory_mb, SlotState.STARTING, image=image)
            self.slots[slot.id] = slot
        slot.state = SlotState.BUSY
        slot.key = key
        slot.last_used = self.clock.now()
        slot.concurrency = concurrency
        slot.calls = 1
        slot.uses += 1
        if p.how in (How.PREWARM, How.COLD):  # one created ahead counts from its creation
            slot.starting_since = slot.last_used
        if p.how is How.PREWARM:
            self.prewarm_starts += 1
            self._refill(kind, memory_mb)
        elif p.how is How.WARM:
            self.warm_starts += 1
        else:  # created for this call, now or ahead of it (create_ahead)
            self.cold_starts += 1
        return Lease(slot, p.how, victims)

    def _evict(self, sids: tuple[int, ...]) -> list[Slot]:
        """Take these kept containers out of the pool (their destruction is the caller's)."""
        victims = [self.slots.pop(sid) for sid in sids]
        for victim in victims:
            if victim.state is SlotState.PREWARM and victim.key is None:  # a stem cell:
                self._evicted_prewarms[victim.kind, victim.memory_mb] += 1  # _replenish
            self._floor = max(self._floor, victim.keep_value)
        self.evictions += len(victims)
        return victims

    def create_ahead(self, key: WarmKey, kind: str, memory_mb: int, image: str | None) -> bool:
        """Start creating a container for a call of ``key`` that waits for a core, so that
        its cold start's engine work (hundreds of ms on Docker) does not hold the core when
        it starts (it then only initialises it: :func:`place` gives it this one). Only in
        free memory (:func:`fits_ahead`); False if there is not enough."""
        if not fits_ahead(self.slots.values(), memory_mb, self.user_memory_mb):
            return False
        slot = Slot(next(self._ids), kind, memory_mb, SlotState.STARTING, image=image)
        slot.key = key
        slot.last_used = slot.starting_since = self.clock.now()
        self.slots[slot.id] = slot
        self._boot(slot, self._name(f"{_clean(key.namespace)}_{_clean(key.docid)}"))
        return True

    def start_cost_s(self, key: WarmKey, kind: str, memory_mb: int) -> float:
        """What a call of ``key`` would wait now for a container to be made if it started:
        :attr:`mean_creation_s` if placement would create one; 0 if one of its action is
        idle or created ahead for it, a stem cell is ready, or it must wait for memory.

        The engine's creation only: the ``/init`` that follows runs at the call's own rank
        under an attained-service order (seconds, for a call ranked last), which is no cost
        of the container but of the call's place in the order."""
        p = place(self.slots, key, kind, memory_mb, self.user_memory_mb)
        return self.mean_creation_s if p is not None and p.how is How.COLD else 0.0

    @property
    def mean_creation_s(self) -> float:
        """The mean of the last creations measured (the engine's, the backend's ``create``;
        0 while none is)."""
        made = self._creations
        return sum(made) / len(made) if made else 0.0

    def has_idle(self, key: WarmKey) -> bool:
        """Whether a warm container of ``key`` waits for a call."""
        return any(s.key == key and s.state in IDLE_STATES for s in self.slots.values())

    def busy_since(self, key: WarmKey) -> list[float]:
        """When each busy container of ``key`` that takes one call at a time took its call."""
        return [
            s.last_used
            for s in self.slots.values()
            if s.key == key and s.state is SlotState.BUSY and s.concurrency == 1
        ]

    @property
    def ahead(self) -> int:
        """Containers created ahead that no call has taken yet."""
        return sum(1 for s in self.slots.values() if s.key is not None and s.state in AHEAD_STATES)

    def join(self, slot: Slot) -> Lease | None:
        """One more call into a busy container of concurrency > 1 (its action's), or None
        if it takes no more: full, or going (a call in it failed, or it is gone)."""
        if (
            self.slots.get(slot.id) is not slot
            or slot.state is not SlotState.BUSY
            or slot.condemned
            or slot.failure is not None
            or slot.calls >= slot.concurrency
        ):
            return None
        slot.calls += 1
        slot.last_used = self.clock.now()
        self.warm_starts += 1
        return Lease(slot, How.WARM)

    async def prepare(self, lease: Lease, namespace: str, action_name: str) -> Container:
        """Make the leased container ready: destroy victims, create or resume it (once,
        for all the calls that share it)."""
        for victim in lease.evict:
            self._spawn(self._destroy(victim))
        slot = lease.slot
        async with slot.preparing:
            if slot.container is None and slot.ready is not None:
                await slot.ready  # a prewarm still starting
            if slot.failure is not None:  # the call that was creating it failed
                raise slot.failure
            if slot.container is None:
                name = self._name(f"{_clean(namespace)}_{_clean(action_name)}")
                try:
                    slot.container = await self._create(slot, name)
                except Exception as e:
                    slot.failure = e
                    raise
            if slot.pausing is not None:
                await slot.pausing
            if slot.paused:
                await slot.container.resume()
                slot.paused = False
        return slot.container

    def release(self, lease: Lease, healthy: bool) -> None:
        """Return the container: back to idle, or destroyed after a developer/whisk error
        (when its last call leaves, if calls share it)."""
        slot = lease.slot
        slot.calls -= 1
        if slot.calls > 0:
            if not healthy:
                slot.condemned = True  # takes no more calls; destroyed when the last leaves
            self.on_change()
            return
        if healthy and slot.container is not None and not slot.condemned:
            slot.state = SlotState.IDLE
            slot.last_used = self.clock.now()
            slot.footprint_mb = None  # its limit until measured after this call
            if self.by_footprint:
                self._spawn(self._measure(slot))
        else:
            self.slots.pop(slot.id, None)
            self._spawn(self._destroy(slot))
        self.on_change()

    def condemn(self, slot: Slot) -> None:
        """Remove a container that misbehaved after its call: now if idle, else at release."""
        if self.slots.get(slot.id) is not slot:
            return
        if slot.state is SlotState.BUSY:
            slot.condemned = True
        else:
            self.slots.pop(slot.id)
            self._spawn(self._destroy(slot))
            self.on_change()

    def mark_initialized(self, lease: Lease) -> None:
        slot = lease.slot
        slot.initialized = True
        if slot.starting_since is not None:  # what a cold start of it costs, for keep_value
            slot.cold_cost_s = self.clock.now() - slot.starting_since
            slot.starting_since = None

    # -- internals --

    def _name(self, suffix: str) -> str:
        return f"{self.name_prefix}_{self.generation}_{next(self._names)}_{suffix}"

    async def _create(self, slot: Slot, name: str) -> Container:
        spec = ContainerSpec(
            name=name,
            kind=slot.kind,
            memory_mb=slot.memory_mb,
            image=slot.image or self.image_for(slot.kind),
            cpu_shares=self.cpu_shares(slot.memory_mb),
            env={**self.container_env, "__OW_ALLOW_CONCURRENT": "true"}
            if slot.concurrency > 1
            else self.container_env,
        )
        t0 = self.clock.now()
        try:
            container = await self.backend.create(spec)
        except BaseException as e:
            self.slots.pop(slot.id, None)
            self.on_change()
            if isinstance(e, ContainerError) and not isinstance(e, ImagePullError):
                self.create_problem = f"cannot create containers: {e}"
                self._probe_spec = spec
            raise
        self.create_problem = None
        self._creations.append(self.clock.now() - t0)
        return container

    async def probe(self) -> None:
        """Try to create (and remove) a container like the one that last failed, to learn
        whether containers can be created again; clears :attr:`create_problem` if so.
        Only called while creating fails, when little else runs: it takes no memory slot."""
        spec = self._probe_spec
        if spec is None:
            return
        probe = ContainerSpec(
            name=self._name("probe"),
            kind=spec.kind,
            memory_mb=spec.memory_mb,
            image=spec.image,
            cpu_shares=spec.cpu_shares,
            env=spec.env,
        )
        try:
            container = await self.backend.create(probe)
        except ContainerError as e:
            log.debug("container probe failed: %s", e)  # create_problem still says why
            return
        await container.destroy()
        self.create_problem = None
        self.on_change()

    def _start_prewarm(self, cell: StemCell) -> bool:
        """Start one prewarmed container of ``cell`` if memory allows; whether it did."""
        # Prewarmed containers may hold at most half of the memory (they are evicted only
        # after every idle warm container), so a small node keeps room for what it runs.
        prewarmed = used_memory(
            s for s in self.slots.values() if s.key is None and s.state is not SlotState.BUSY
        )
        if cell.memory_mb > min(
            self.user_memory_mb - self.used_memory_mb, self.user_memory_mb // 2 - prewarmed
        ):
            return False
        slot = Slot(next(self._ids), cell.kind, cell.memory_mb, SlotState.STARTING)
        self.slots[slot.id] = slot
        self._boot(slot, self._name(f"prewarm_{_clean(cell.kind)}"))
        return True

    def _boot(self, slot: Slot, name: str) -> None:
        """Create the container of a slot that no call holds yet (prewarmed, or created
        ahead); a call that takes it meanwhile waits for ``slot.ready`` in :meth:`prepare`,
        and fails as its own cold start would if the creation fails."""
        slot.ready = ready = asyncio.get_running_loop().create_future()

        async def boot() -> None:
            try:
                slot.container = await self._create(slot, name)
                if slot.state is SlotState.STARTING:
                    slot.state = SlotState.PREWARM
                    slot.last_used = self.clock.now()
                    if self.by_footprint:
                        await self._measure(slot)
            except (ContainerError, ValueError) as e:
                slot.failure = e
                log.warning("creating %s before a call needs it failed: %s", name, e)
            finally:
                if not ready.done():
                    ready.set_result(None)
                self.on_change()

        self._spawn(boot())

    def _replenish(self) -> None:
        """Start again, as memory allows, the prewarmed containers that calls evicted."""
        for cell in self.stem_cells:
            shape = (cell.kind, cell.memory_mb)
            while self._evicted_prewarms[shape] and self._start_prewarm(cell):
                self._evicted_prewarms[shape] -= 1

    def _refill(self, kind: str, memory_mb: int) -> None:
        for cell in self.stem_cells:
            if cell.kind == kind and cell.memory_mb == memory_mb:
                self._start_prewarm(cell)

    async def _destroy(self, slot: Slot) -> None:
        if slot.ready is not None and not slot.ready.done():
            await asyncio.shield(slot.ready)
        if slot.concurrency > 1 and slot.logs_done is not None:
            # Its calls' logs are read in turn after they leave (see ActivationRunner).
            await asyncio.shield(slot.logs_done)
        if slot.container is not None:
            container, slot.container = slot.container, None
            await container.destroy()
            self.on_removed(container)
        self.on_change()

    async def _measure(self, slot: Slot) -> None:
        """Count a kept container at what it uses now (at most its limit), and give it its
        Greedy-Dual value; a container that cannot be measured keeps counting at its limit."""
        container = slot.container
        used = await container.memory_usage() if container is not None else None
        if used is None or self.slots.get(slot.id) is not slot or slot.state not in KEPT_STATES:
            return  # unmeasurable, or gone or taken by a call meanwhile
        slot.footprint_mb = min(slot.memory_mb, max(1, -(-used // MIB)))
        slot.measured_at = self.clock.now()
        slot.keep_value = self._floor + slot.uses * slot.cold_cost_s / slot.footprint_mb
        self.on_change()  # memory may have freed up

    def _shed(self) -> None:
        """Evict kept containers (least value first) while the pool holds more than the
        node's memory: kept containers that grew after they were measured."""
        over = self.used_memory_mb - self.user_memory_mb
        for sid in to_evict(self.slots, over, None, partial=True) or ():
            slot = self.slots.pop(sid)
            self._floor = max(self._floor, slot.keep_value)
            self.evictions += 1
            self._spawn(self._destroy(slot))

    def _spawn(self, coro) -> asyncio.Task[None]:
        return self.supervisor.spawn(coro, track=self._tasks)

    async def _janitor_loop(self) -> None:
        """Pause containers idle for ``pause_grace_s``, remove those idle for
        ``idle_timeout_s``, each within a second of its time. Between rounds it sleeps
        until the oldest idle container can be due (a container that becomes idle later
        is due later): with limits that are never reached, as the simulator sets them, it
        does not wake every second of a simulated day."""
        soonest = min(self.pause_grace_s, self.idle_timeout_s)
        step = min(1.0, soonest)
        wait = step
        while True:
            await asyncio.sleep(wait)
            now = self.clock.now()
            oldest = now  # the last use of the longest idle container kept
            for slot in [s for s in self.slots.values() if _idle(s)]:
                idle_for = now - slot.last_used
                if idle_for >= self.idle_timeout_s:
                    self.slots.pop(slot.id, None)
                    self._spawn(self._destroy(slot))
                    continue
                if slot.state is SlotState.IDLE and idle_for >= self.pause_grace_s:
                    slot.state = SlotState.PAUSED
                    slot.pausing = self._spawn(self._pause(slot))
                oldest = min(oldest, slot.last_used)
            if self.by_footprint:
                self._shed()
                for slot in self.slots.values():
                    measured = slot.state in KEPT_STATES and slot.footprint_mb is not None
                    if measured and now - slot.measured_at >= MEASURE_EVERY_S:
                        slot.measured_at = now
                        self._spawn(self._measure(slot))
            self._replenish()
            wait = max(step, oldest + soonest - now)

    async def _pause(self, slot: Slot) -> None:
        container = slot.container
        try:
            if container is not None:
                await container.pause()
                slot.paused = True
        except ContainerError as e:
            assert container is not None
            log.warning("pausing %s failed (%s); removing it", container.name, e)
            if self.slots.get(slot.id) is slot and slot.state is SlotState.PAUSED:
                self.slots.pop(slot.id)
                self._spawn(self._destroy(slot))
        finally:
            slot.pausing = None


def _idle(slot: Slot) -> bool:
    """A warm container with no call, or one created ahead that no call took (its call
    went elsewhere): both are removed after ``idle_timeout_s``."""
    return slot.state in IDLE_STATES or (slot.key is not None and slot.state is SlotState.PREWARM)
