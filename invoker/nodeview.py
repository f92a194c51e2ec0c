"""What an operator asks of a node, as JSON for the admin API and as gauges for ``/metrics``:
which activations wait and which run (ids, ages), the container pool by state, kind and
action, and the scheduler as the console draws it (the queue in policy order with each
call's priority, the calls on each core with their CPU shares, per-function response-time
and stretch histograms). Read-only snapshots: nothing here changes the invoker, and a queued
job that keeps only its raw message is parsed for the listing without being expanded again."""

from __future__ import annotations

import asyncio
import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client.core import GaugeMetricFamily

from containers.placement import KEPT_STATES, SlotState, charged_mb
from invoker.calltimes import RESPONSE_EDGES_S, STRETCH_EDGES
from whisk.protocol import ProtocolError, parse_activation

if TYPE_CHECKING:
    from containers.pool import ContainerPool
    from invoker.activation import Job
    from invoker.calltimes import CallTimes
    from invoker.config import InvokerConfig
    from invoker.metrics import InvokerMetrics
    from invoker.scheduler import Call, NodeScheduler
    from policies import Policy
    from whisk.clock import Clock
    from whisk.protocol import ActivationMessage

STATES = tuple(s.value for s in SlotState)


class Invoker(Protocol):
    """What this module reads of an :class:`invoker.service.Invoker` (which imports it)."""

    config: InvokerConfig
    clock: Clock
    metrics: InvokerMetrics
    pool: ContainerPool
    policy: Policy
    scheduler: NodeScheduler[Job]
    gpu_calls: NodeScheduler[Job]
    call_times: CallTimes
    pending: int

    def running_calls(self) -> list[Call[Job]]: ...


def _message(job: Job) -> ActivationMessage | None:
    """The job's parsed message, without caching a parse of a compacted job."""
    if job.parsed is not None:
        return job.parsed
    try:
        return parse_activation(job.raw)
    except ProtocolError:  # admitted messages parse; a last guard for a listing
        return None


def _call(call: Call[Job], now: float, epoch_ms: int, state: str) -> dict[str, Any]:
    job = call.payload
    msg = _message(job)
    entry: dict[str, Any] = {
        "activationId": msg.activation_id if msg else None,
        "state": state,
        "action": job.action.docid,
        "kind": job.action.kind,
        "memoryMB": job.action.limits.memory_mb,
        "namespace": msg.user.namespace if msg else None,
        "transid": msg.transaction_id if msg else None,
        "ageS": round(now - job.received, 3),
        "sinceAcceptedS": round((epoch_ms - msg.transaction_start_ms) / 1000, 3) if msg else None,
        "partition": job.partition,
        "offset": job.offset,
    }
    if call.started is not None:
        entry["runningS"] = round(now - call.started, 3)
        entry["core"] = call.core
    return entry


def _oldest(calls: Iterable[Call[Job]], limit: int) -> list[Call[Job]]:
    return heapq.nsmallest(limit, calls, key=lambda c: c.payload.received)


def activations(invoker: Invoker, limit: int = 100) -> dict[str, Any]:
    """The running and queued activations, oldest first (at most ``limit`` of each), with
    the totals; ``pending`` also counts calls being resolved or answered."""
    now, epoch_ms = invoker.clock.now(), invoker.clock.epoch_ms()
    queued = [c for q in (invoker.scheduler, invoker.gpu_calls) for c in q.waiting()]
    running = invoker.running_calls()
    return {
        "pending": invoker.pending,
        "runningTotal": len(running),
        "queuedTotal": len(queued),
        "running": [_call(c, now, epoch_ms, "running") for c in _oldest(running, limit)],
        "queued": [_call(c, now, epoch_ms, "queued") for c in _oldest(queued, limit)],
    }


def oldest_age_s(invoker: Invoker, which: str) -> float:
    """Age (since receipt) of the oldest queued or running call, 0 when there is none."""
    if which == "queued":
        calls = [c for q in (invoker.scheduler, invoker.gpu_calls) for c in q.waiting()]
    else:
        calls = invoker.running_calls()
    if not calls:
        return 0.0
    return invoker.clock.now() - min(c.payload.received for c in calls)


def owned(function: str, namespace: str | None) -> bool:
    """Whether ``function`` (an action's ``namespace/[package/]name``) is ``namespace``'s;
    every function is, for None (the operator's view)."""
    return namespace is None or function.partition("/")[0] == namespace


def _queued(
    queue: NodeScheduler[Job], now: float, limit: int, namespace: str | None = None
) -> tuple[int, list[dict[str, Any]]]:
    """(total, the first ``limit`` calls in the order the policy runs them, with their
    priorities); ties go to the call received first, as in the scheduler. Only
    ``namespace``'s functions, when given."""
    waiting = queue.waiting()
    if namespace is not None:
        waiting = [c for c in waiting if owned(c.function, namespace)]
    first = heapq.nsmallest(limit, waiting, key=lambda c: (c.priority, c.seq))
    stats = queue.stats
    calls = []
    for rank, call in enumerate(first, 1):
        msg = _message(call.payload)
        calls.append(
            {
                "rank": rank,
                "activationId": msg.activation_id if msg else None,
                "function": call.function,
                "priority": call.priority,
                "waitingS": round(now - call.received, 3),
                "expectedS": round(stats.expected(call.function), 6),
                "cpuShare": round(stats.share(call.function), 3),
                "concurrent": call.group is not None,
            }
        )
    return len(waiting), calls


def _on_core(call: Call[Job], now: float) -> dict[str, Any]:
    msg = _message(call.payload)
    entry: dict[str, Any] = {
        "activationId": msg.activation_id if msg else None,
        "function": call.function,
        "share": round(call.share, 3),
        "overrun": round(call.overrun, 3),
        "runningS": round(now - call.started, 3) if call.started is not None else None,
        "expectedS": round(call.expected, 6) if call.expected else None,
    }
    if call.shared is not None:  # one of several calls in one container, which holds the core
        entry["container"] = {"calls": call.shared.calls, "limit": call.shared.limit}
        entry["share"] = round(call.shared.share / max(1, call.shared.calls), 3)
    if call.paused_at is not None:
        entry["pausedS"] = round(now - call.paused_at, 3)
    return entry


def scheduler(invoker: Invoker, limit: int = 100, namespace: str | None = None) -> dict[str, Any]:
    """The node's scheduler as the console shows it: the queue in the order the policy runs
    it (at most ``limit`` calls, each with its priority), every action core with the calls
    on it and their expected CPU shares, paused calls, and per-function response time and
    stretch histograms (:mod:`invoker.calltimes`) with the estimates the policy uses.

    With ``namespace``, only that namespace's functions are listed (a user's view: no other
    tenant's calls, names or timings); the cores' loads stay the node's."""
    now = invoker.clock.now()
    sched, table = invoker.scheduler, invoker.scheduler.cores_table
    queued, queue = _queued(sched, now, limit, namespace)
    gpu_queued, gpu_queue = _queued(invoker.gpu_calls, now, limit, namespace)
    cores: dict[int, list[dict[str, Any]]] = {c: [] for c in table.ids}
    unplaced, paused = [], []
    running = [c for c in invoker.running_calls() if owned(c.function, namespace)]
    for call in sorted(running, key=lambda c: c.seq):
        entry = _on_core(call, now)
        if call.paused_at is not None:
            paused.append(entry)
        elif call.core is not None and call.core in cores:
            cores[call.core].append(entry)
        else:
            unplaced.append(entry)
    stats = sched.stats
    functions = []
    snapshot = invoker.call_times.snapshot(None if namespace else limit).items()
    for name, times in [(n, t) for n, t in snapshot if owned(n, namespace)][:limit]:
        functions.append(
            {
                "function": name,
                "expectedS": round(stats.expected(name), 6),
                "cpuShare": round(stats.share(name), 3),
                **times,
            }
        )
    return {
        "policy": invoker.policy.name,
        "policyDescription": invoker.policy.description,
        "exclusiveCores": invoker.policy.exclusive_cores,
        "preemption": sched.preemption is not None,
        "capacity": round(1.0 + table.margin, 3),
        "queuedTotal": queued,
        "runningTotal": len(running),
        "queue": queue,
        "gpuQueuedTotal": gpu_queued,
        "gpuQueue": gpu_queue,
        "cores": [
            {
                "core": c,
                "calls": table.calls[c],
                "load": round(table.load[c], 3),
                "overrun": round(table.overrun[c], 3),
                "full": c in table.full,
                "running": cores[c],
            }
            for c in table.ids
        ],
        "unplaced": unplaced,
        "paused": paused,
        "memory": memory(invoker),
        "responseEdgesS": list(RESPONSE_EDGES_S),
        "stretchEdges": list(STRETCH_EDGES),
        "functions": functions,
    }


def memory(invoker: Invoker) -> dict[str, Any]:
    """The pool's memory as its accounting holds it (docs/operations.md, keep-alive):
    running and starting containers at their limits, kept ones at their footprints. Node
    totals only, so a user's console view shows them too: no tenant's names. ``/status``,
    ``/pool`` and the console's view all report these."""
    p = invoker.pool
    return {
        "userMemoryMB": invoker.config.user_memory_mb,
        "usedMemoryMB": p.used_memory_mb,
        "keptMemoryMB": p.kept_memory_mb,
        "keptContainers": sum(1 for s in p.slots.values() if s.state in KEPT_STATES),
        "keepAlive": invoker.config.keep_alive,
    }


def pool(invoker: Invoker) -> dict[str, Any]:
    """The container pool: every container, and counts by state, by kind and by action."""
    p, now = invoker.pool, invoker.clock.now()
    containers = []
    by_action: dict[str, Counter[str]] = defaultdict(Counter)
    for slot in sorted(p.slots.values(), key=lambda s: s.id):
        action = slot.key.docid if slot.key else None
        containers.append(
            {
                "id": slot.id,
                "name": slot.container.name if slot.container else None,
                "kind": slot.kind,
                "memoryMB": slot.memory_mb,
                "chargedMB": charged_mb(slot),  # its footprint while kept, once measured
                "state": slot.state.value,
                "action": action,
                "namespace": slot.key.namespace if slot.key else None,
                "revision": slot.key.revision if slot.key else None,
                "idleS": None
                if slot.state in (SlotState.BUSY, SlotState.STARTING, SlotState.PREWARM)
                else round(now - slot.last_used, 3),
            }
        )
        if action is not None:
            by_action[action][slot.state.value] += 1
    return {
        **memory(invoker),
        "byState": {state: n for state, n in state_counts(invoker)},
        "byKind": {
            kind: dict(counts) for kind, counts in sorted(kind_state_counts(invoker).items())
        },
        "byAction": {a: dict(counts) for a, counts in sorted(by_action.items())},
        "coldStarts": p.cold_starts,
        "warmStarts": p.warm_starts,
        "prewarmStarts": p.prewarm_starts,
        "evictions": p.evictions,
        "containers": containers,
    }


def state_counts(invoker: Invoker) -> Iterator[tuple[str, int]]:
    """(state, containers), every state listed (0 when none)."""
    counts = Counter(s.state.value for s in invoker.pool.slots.values())
    for state in STATES:
        yield state, counts[state]


def kind_state_counts(invoker: Invoker) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for slot in invoker.pool.slots.values():
        counts[slot.kind][slot.state.value] += 1
    return counts


def memory_by_state(invoker: Invoker) -> dict[str, int]:
    mb: Counter[str] = Counter()
    for slot in invoker.pool.slots.values():
        mb[slot.state.value] += charged_mb(slot)
    return {state: mb[state] for state in STATES}


def _loop_tasks() -> int:
    try:
        return len(asyncio.all_tasks())
    except RuntimeError:  # scraped outside an event loop: none to count
        return 0


class NodeCollector:
    """Gauges read from the pool and the queues at scrape time (labels that come and go,
    such as a kind, cannot be fixed gauges)."""

    def __init__(self, invoker: Invoker) -> None:
        self.invoker = invoker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        inv = self.invoker
        containers = GaugeMetricFamily(
            "invoker_containers", "Containers by state and kind", labels=["state", "kind"]
        )
        counts = kind_state_counts(inv)
        for kind in sorted(counts):
            for state in STATES:
                containers.add_metric([state, kind], counts[kind][state])
        yield containers
        memory = GaugeMetricFamily(
            "invoker_containers_memory_mb", "Memory held by containers, by state", labels=["state"]
        )
        for state, mb in memory_by_state(inv).items():
            memory.add_metric([state], mb)
        yield memory
        yield GaugeMetricFamily(
            "invoker_user_memory_mb",
            "Memory for containers (--user-memory-mb)",
            value=inv.config.user_memory_mb,
        )
        yield GaugeMetricFamily(
            "invoker_used_memory_mb", "Memory held by containers now", value=inv.pool.used_memory_mb
        )
        yield GaugeMetricFamily(
            "invoker_action_cores", "Cores for user calls", value=len(inv.config.action_cores)
        )
        yield GaugeMetricFamily(
            "invoker_oldest_queued_seconds",
            "Age since receipt of the oldest call waiting for a core (0: none)",
            value=oldest_age_s(inv, "queued"),
        )
        yield GaugeMetricFamily(
            "invoker_oldest_running_seconds",
            "Age since receipt of the oldest running call (0: none)",
            value=oldest_age_s(inv, "running"),
        )
        yield GaugeMetricFamily(
            "invoker_event_loop_tasks",
            "Tasks alive in the event loop that serves this scrape (a leak grows it)",
            value=_loop_tasks(),
        )


def install(invoker: Invoker) -> None:
    """Add the node's scrape-time gauges to its metrics registry."""
    invoker.metrics.registry.register(NodeCollector(invoker))
