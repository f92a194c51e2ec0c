"""The front's view of a scheduler ("FPC") deployment, as the stock ``FPCPoolBalancer`` keeps
it: the schedulers and the invokers as they register themselves in etcd
(openwhisk-protocol.md 1.8).

An activation goes to the scheduler that leads its action's queue (``<cluster>/queue/<ns>/
<fqn>/leader``), or, for an action with no queue yet, to the scheduler leading the fewest
(the scheduler makes the queue on the activation's arrival). Invokers are not chosen here:
their records (``<cluster>/invokers/...``) only answer ``GET /invokers`` and say when the
deployment can serve. Both prefixes are read every second; while etcd is away the last
view stands and each failed read is logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from whisk.etcd import EtcdClient, EtcdError
from whisk.protocol.etcd_keys import (
    InvokerId,
    ResourceRecord,
    SchedulerState,
    invoker_of_record_key,
    invokers_prefix,
    queue_leader_key,
    schedulers_prefix,
)

log = logging.getLogger(__name__)

REFRESH_S = 1.0
K = TypeVar("K")
T = TypeVar("T")


class NoScheduler(Exception):
    """No scheduler is registered in etcd (HTTP 503, as the stock controller answers)."""


@dataclass
class SchedulerDirectory:
    etcd: EtcdClient
    cluster: str = "whisk"
    schedulers: dict[str, SchedulerState] = field(default_factory=dict)
    invokers: dict[InvokerId, ResourceRecord] = field(default_factory=dict)
    # leader key -> the scheduler id found there; forgotten at every refresh, so a queue
    # that moved (its leader re-elected) is followed within a second.
    _leaders: dict[str, str] = field(default_factory=dict)

    async def refresh(self) -> None:
        """Read both prefixes; EtcdError if etcd cannot answer (the view is kept)."""
        schedulers = await self.etcd.get_prefix(schedulers_prefix(self.cluster))
        self.schedulers = dict(_parsed(schedulers, _scheduler_state, "scheduler state"))
        self.invokers = await read_invokers(self.etcd, self.cluster)
        self._leaders.clear()

    async def keep_fresh(self) -> None:
        """Refresh every second for ever (a supervised task of the front)."""
        failing = False
        while True:
            try:
                await self.refresh()
                if failing:
                    log.info("etcd answers again: %d schedulers", len(self.schedulers))
                failing = False
            except EtcdError as e:
                if not failing:
                    log.warning("cannot read the schedulers and invokers from etcd: %s", e)
                failing = True
            await asyncio.sleep(REFRESH_S)

    async def scheduler_for(self, invocation_namespace: str, fqn: str) -> str:
        """The id of the scheduler to send this action's activation to (its topic is
        ``scheduler<id>``). NoScheduler when none is registered."""
        if not self.schedulers:
            raise NoScheduler("No scheduler endpoint available")
        key = queue_leader_key(self.cluster, invocation_namespace, fqn)
        sid = self._leaders.get(key)
        if sid is None:
            try:
                endpoints = await self.etcd.get(key)
            except EtcdError as e:
                log.warning("reading the queue leader of %s failed: %s", fqn, e)
                endpoints = None
            leader = next(
                (s for s in self.schedulers.values() if endpoints and s.serves(endpoints)), None
            )
            if leader is None:  # no queue yet, or led by a scheduler not seen yet
                leader = min(self.schedulers.values(), key=lambda s: (s.queue_size, s.sid))
            sid = self._leaders[key] = leader.sid
        return sid

    def invoker_states(self) -> dict[str, str]:
        """``GET /invokers``: each registered invoker's status, ``invoker0/<uniqueName>``
        first (the id as the stock controller prints it)."""
        ordered = sorted(self.invokers.items(), key=lambda kv: kv[0].instance)
        return {str(invoker): record.status for invoker, record in ordered}


async def read_invokers(etcd: EtcdClient, cluster: str) -> dict[InvokerId, ResourceRecord]:
    """Every invoker's record under ``<cluster>/invokers/`` (a key or value that is not one
    logged and left out); EtcdError if etcd cannot answer."""

    def record(key: str, value: str) -> tuple[InvokerId, ResourceRecord]:
        return invoker_of_record_key(cluster, key), ResourceRecord.from_json(value)

    kvs = await etcd.get_prefix(invokers_prefix(cluster))
    return dict(_parsed(kvs, record, "invoker record"))


def _scheduler_state(key: str, value: str) -> tuple[str, SchedulerState]:
    state = SchedulerState.from_json(value)
    return state.sid, state


def _parsed(
    kvs: dict[str, str], parse: Callable[[str, str], tuple[K, T]], what: str
) -> Iterator[tuple[K, T]]:
    """``parse(key, value)`` of each pair that parses; the others logged and left out."""
    for key, value in kvs.items():
        try:
            yield parse(key, value)
        except ValueError as e:
            log.warning("etcd key %s does not hold a %s: %s", key, what, e)
