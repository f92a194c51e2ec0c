"""The driver of an attained-service policy (:mod:`policies.attained`): it orders the CPU
among the running calls, not a queue.

Every ``quantum_s``, and soon after a call ends, it reads each running call's attained
service (its own processing time so far: the time in ``/run`` less the time its container
waited for a CPU, the same measure the history keeps; see :meth:`CpuOrder._read` for a wait
the kernel has not counted yet), ranks the calls and writes the ``cpu.weight`` of each
container whose tier changed. A call entering ``/init`` or ``/run``
is ranked at once, before the request is sent (:meth:`CpuOrder.admit`): a pass may come late
on a busy invoker, and until then the call would share the core at the weight its container
kept (a new container's: the default, 1 % of a top-weight call's).
The kernel enforces the order (cgroup CPU weights under CFS): no container is paused or
resumed, every call runs as soon as memory lets it start (as the stock invoker admits them),
and a call pulled rather than pushed is ordered the same way.

Why a poll, not an event per crossing: an index changes continuously with age, and a
re-ranking of a hundred calls is a hundred cached lookups; one pass per quantum bounds
the invoker's work and the cgroup writes (one per call that changes tier).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import NamedTuple

from containers.backend import Container, ContainerError, ContainerGone
from containers.cpu import CpuTimes
from invoker.activation import CpuMark, Job
from invoker.scheduler import Call
from policies.attained import (
    Aged,
    Attained,
    DurationHistory,
    aged_deadline,
    aged_weights,
    cpu_weights,
)
from policies.base import CallInfo, Policy
from whisk.clock import Clock

log = logging.getLogger(__name__)

MEASURED_S = 0.05  # a call's CPU share counts once it has run this long (a core until then)
MIN_SHARE = 0.05  # a call that has used less still counts for this much of a core
TICKS_TO_MEASURE = 10  # ... and this many of its counters' ticks (from /proc: 10 ms each)
STARVED_S = 0.01  # a call that got less CPU than this since the last pass was starved
_UNREAD = (0.0, 0.0, 0.0, 1.0)  # age, used, own and share of a call not read before


def shared_cores_warning(
    action_cores: Iterable[int], usable: Iterable[int], weights_among_calls: bool
) -> str | None:
    """What to tell an operator whose attained-service order weighs calls against the
    invoker on every core, or None."""
    if weights_among_calls or not set(usable) <= set(action_cores):
        return None
    return (
        "every core is an action core and this backend weighs the calls against the "
        "invoker's own process (the engine's cgroup parent where Docker's containers have "
        "no group of their own, or nice values without cpu cgroups; the start log says "
        "why): a top-ranked call gets 100x its CPU weight, so the invoker's own work "
        "(and each call's start, which waits for its ranking) waits behind the calls it "
        "orders; leave the invoker a core (--action-cores)"
    )


class Running(NamedTuple):
    """A call in ``/init`` or ``/run`` as the ranking sees it."""

    function: str
    order: int  # its receipt order: the tie-break
    container: Container
    age: float  # attained service: its own processing time so far, in seconds
    share: float = 1.0  # the CPU it has used over that time (a core: 1)
    received: float = 0.0  # when the invoker received it (gittins-aged's deadline)
    used: float = 0.0  # read: the CPU time it has received in /run
    own: float = 0.0  # read: its time in /run less the waits the kernel has counted


class CpuOrder:
    """Ranks the running calls of one node by ``spec`` and weights their containers.

    ``running`` lists the node's started calls; those in ``/run`` with their container's
    CPU measured (:attr:`Job.in_run`) and those initialising their own container
    (:attr:`Job.in_init`) are ranked, the others (sharing a container, or waiting for
    another call's /init) keep the weight their container has."""

    def __init__(
        self,
        spec: Attained,
        cores: int,
        clock: Clock,
        running: Callable[[], Iterable[Call[Job]]],
        history: DurationHistory | None = None,
        on_ranked: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_ranked``: called after each pass (calls waiting for their rank look again)."""
        self.spec = spec
        self.cores = max(1, cores)
        self.clock = clock
        self.history = history or DurationHistory()
        self._running = running
        self._on_ranked = on_ranked
        self._weights: dict[Container, int] = {}  # what was last written, of running ones
        self._measured: dict[CpuMark, Running] = {}  # the last pass's, by call
        self._writing = asyncio.Lock()  # one ranking written at a time
        self._poked = asyncio.Event()
        self.writes = 0
        self.failed_writes = 0  # not counting containers removed meanwhile
        self.write_s = 0.0  # the invoker's time in the writes: what the order costs it

    def queue_policy(self, policy: Policy) -> Policy:
        """The policy whose waiting queue (memory-bound) runs the best index at age 0
        first: what the CPU order would do with the call the moment it started. For
        ``gittins-aged``, with its bounded share too (:attr:`Policy.late`): a call past its
        deadline starts ahead while such calls are at most ``overdue_share`` of the running
        ones. (By deadlines alone, at 2 GB where the queue is all the order there is, the
        Azure slices' mean was 1.76x the better baseline's.)"""
        if self.spec.kind == "las":
            return policy  # every new call has attained nothing: receipt order
        if self.spec.kind == "gittins-aged" and self.spec.overdue_share is not None:
            return replace(
                policy,
                priority=self._priority_at_start,
                late=self._deadline_at_start,
                late_share=self.spec.overdue_share,
            )
        return replace(policy, priority=self._priority_at_start)

    def would_run(self, function: str) -> bool:
        """Whether a new call of ``function`` would be among the calls that fill the cores
        (the top tier) if it started now: fewer than the cores' worth of the running calls,
        as the last pass measured them, and of those started but not yet in ``/init`` or
        ``/run`` (their container being made: at age 0, a core each; on Docker a creation
        takes seconds under load, and counting only the calls in ``/run`` let a burst start
        one after another) have an index at least its own at age 0. Under ``gittins-aged``
        too (its late calls are the queue's, :attr:`Policy.late`); under LAS a new call has
        attained least, so always."""
        if self.spec.kind == "las":
            return True
        index = self.history.index
        new = index(function, 0.0)
        ahead = sum(c.share for c in self._as_measured() if index(c.function, c.age) >= new)
        starting = sum(
            1
            for call in self._running()
            if call.limit == 1  # calls sharing a container are never measured one by one
            and call.payload.in_init is None
            and call.payload.in_run is None
            and index(call.function, 0.0) >= new
        )
        return ahead + starting < self.cores

    def _priority_at_start(self, info: CallInfo) -> float:
        return -self.history.index(info.function, 0.0)

    def _deadline_at_start(self, info: CallInfo) -> float:
        index = self.history.index(info.function, 0.0)
        return aged_deadline(info.received, index, self.spec.slack)

    def finished(self, function: str, own_s: float) -> None:
        """A call ended after ``own_s`` of its own processing: learn it, re-rank soon."""
        self.history.add(function, own_s)
        self._poked.set()

    async def admit(self) -> None:
        """A call is entering ``/init`` or ``/run``: rank it now, at age 0, with the other
        running calls as the last pass measured them, and write the weights that changed
        before its request is sent (else it would share the core at the weight its
        container kept until a pass, which a busy invoker may run late); a full pass
        follows. No reads: only the writes the new rank needs, on the call's own path."""
        async with self._writing:
            await self._write(self.rank(self._as_measured()), keep=True)
        self._poked.set()

    def _as_measured(self) -> list[Running]:
        """The calls in ``/run`` now, as the last pass measured them; those it did not
        (they entered since) at their time in ``/run``, as if they had had the CPU; and
        those initialising their container at age 0 (an /init is no service of the call's
        own, but at its container's default weight it would wait for every top-weight call)."""
        calls, now = [], self.clock.now()
        for call in self._running():
            job = call.payload
            if job.in_init is not None:
                calls.append(self._running_at(call, job.in_init, 0.0))
            elif (mark := job.in_run) is not None:
                measured = self._measured.get(mark)
                calls.append(
                    measured or self._running_at(call, mark.container, max(0.0, now - mark.since))
                )
        return calls

    @staticmethod
    def _running_at(call: Call[Job], container: Container, age: float) -> Running:
        return Running(call.function, call.seq, container, age, 1.0, call.received)

    async def measure(self) -> list[Running]:
        """The calls in ``/run`` and the service each has had (one read of its
        container's CPU counters: the time it waited for a CPU is not service)."""
        return list((await self._measure_by_call()).values())

    async def _measure_by_call(self) -> dict[CpuMark, Running]:
        calls = {}
        for call in list(self._running()):
            mark = call.payload.in_run
            if mark is None:
                continue
            try:
                times = await mark.container.cpu_times()
            except (ContainerError, OSError):  # removed meanwhile: its run ends
                continue
            if call.payload.in_run is not mark:
                continue  # /run ended meanwhile
            wall = self.clock.now() - mark.since
            if times is None:  # no counters: as if it had had the CPU
                calls[mark] = self._running_at(call, mark.container, wall)
            else:
                calls[mark] = self._read(call, mark, times, wall)
        return calls

    def _read(self, call: Call[Job], mark: CpuMark, times: CpuTimes, wall: float) -> Running:
        """The service a call has had: its time in ``/run`` less its waits for a CPU, and
        the share of a core it used over that time.

        Two corrections where the counters lag. The kernel adds a wait to a task's
        schedstat only once the wait ends, so a call runnable now that got no CPU since the
        last pass (starved at a low weight) would seem to have aged as if it ran: Gittins
        then demoted it further (live, a mean 1.5x the simulator's); such a call has aged
        by the CPU it got, and keeps its share. And counters in ticks (10 ms from /proc)
        read a CPU-bound call short by up to two ticks: a share within that of a whole
        core is one (at 0.95 the next call would join it in the top tier)."""
        own = max(0.0, wall - max(0.0, times.waited - mark.first.waited))
        used = max(0.0, times.used - mark.first.used)
        age, share = own, 1.0  # a whole core until measured, and within two ticks of one
        before = self._measured.get(mark)
        aged, used_before, own_before, share_before = (
            (before.age, before.used, before.own, before.share) if before else _UNREAD
        )
        if times.runnable and used - used_before < STARVED_S < own - own_before:
            age, share = aged + (used - used_before), share_before
        elif own >= max(MEASURED_S, TICKS_TO_MEASURE * times.tick):
            measured = used / own
            if measured < 1.0 - 2 * times.tick / own:
                share = max(MIN_SHARE, measured)
        return Running(
            call.function, call.seq, mark.container, age, share, call.received, used, own
        )

    def rank(self, calls: list[Running]) -> dict[Container, int]:
        """The weight of each call's container, best first by index (LAS: least attained
        service; ``gittins-aged``: :func:`aged_ranking`), earlier receipt first among equals."""
        if self.spec.kind == "las":
            ranked = sorted(calls, key=lambda c: (c.age, c.order))
        elif self.spec.kind == "gittins-aged":
            index = self.history.index
            aged = [
                Aged(c.container, c.received, index(c.function, c.age), c.share, c.order)
                for c in calls
            ]
            spec = self.spec
            return aged_weights(aged, self.clock.now(), self.cores, spec.slack, spec.overdue_share)
        else:
            index = self.history.index
            ranked = sorted(calls, key=lambda c: (-index(c.function, c.age), c.order))
        return cpu_weights(((c.container, c.share) for c in ranked), self.cores)

    async def apply(self) -> None:
        """One pass: measure the calls in ``/run``, rank them with those that entered
        meanwhile (:meth:`admit` ranked them already) and write the weights that changed."""
        measured = await self._measure_by_call()
        async with self._writing:
            self._measured = measured
            await self._write(self.rank(self._as_measured()), keep=False)
        self._on_ranked()

    async def _write(self, weights: dict[Container, int], keep: bool) -> None:
        """Write the weights that differ from what was last written; ``keep``: the
        containers not ranked here keep theirs (else they are no longer running)."""
        before = self._weights
        self._weights = dict(before) if keep else {}
        for container, weight in weights.items():
            if before.get(container) != weight:
                began = time.perf_counter()
                try:
                    await container.set_cpu_weight(weight)
                except ContainerGone:  # removed meanwhile: its call ended
                    continue
                except (ContainerError, OSError) as e:
                    self.failed_writes += 1
                    # Said once: a host that refuses one write (no right to a nice value,
                    # no cgroup) refuses them all, and the order is then not enforced.
                    level = logging.WARNING if self.failed_writes == 1 else logging.DEBUG
                    log.log(level, "setting the CPU weight of %s failed: %s", container.name, e)
                    continue
                finally:
                    self.write_s += time.perf_counter() - began
                self.writes += 1
            self._weights[container] = weight

    def status(self) -> dict[str, float]:
        """The writes so far, for ``/status``: how often the order changed a weight, what
        that cost the invoker, and whether the host refused it."""
        return {
            "writes": self.writes,
            "failedWrites": self.failed_writes,
            "writeSeconds": round(self.write_s, 6),
        }

    async def run(self) -> None:
        """Re-rank every quantum and soon after a call ends or is admitted, for as long as
        the node runs."""
        while True:
            self._poked.clear()
            await self.apply()
            try:
                async with asyncio.timeout(self.spec.quantum_s):
                    await self._poked.wait()
            except TimeoutError:
                pass
