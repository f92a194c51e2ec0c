"""The front's view of a scheduler deployment (front/fpc.py): which scheduler gets an
action's activation, what ``GET /invokers`` says, and what it does while etcd is away."""

from __future__ import annotations

import pytest

from front.fpc import NoScheduler, SchedulerDirectory
from whisk.etcd import EtcdError
from whisk.protocol.etcd_keys import (
    InvokerId,
    ResourceRecord,
    SchedulerState,
    queue_leader_key,
    record_key,
    scheduler_key,
)

S0 = SchedulerState("0", 5, "10.0.0.1", 13001)
S1 = SchedulerState("1", 2, "10.0.0.2", 13001)


class FakeEtcd:
    """Keys in a dict; ``down`` makes every call fail as an unreachable etcd does."""

    def __init__(self) -> None:
        self.kv: dict[str, str] = {}
        self.down = False
        self.gets = 0

    async def get(self, key: str) -> str | None:
        self._check()
        self.gets += 1
        return self.kv.get(key)

    async def get_prefix(self, prefix: str) -> dict[str, str]:
        self._check()
        return {k: v for k, v in self.kv.items() if k.startswith(prefix)}

    def _check(self) -> None:
        if self.down:
            raise EtcdError("127.0.0.1:2379", "range", "connection refused")


@pytest.fixture
def etcd() -> FakeEtcd:
    etcd = FakeEtcd()
    for s in (S0, S1):
        etcd.kv[scheduler_key("c", s.sid)] = s.to_json()
    etcd.kv[record_key("c", InvokerId(0, "u0"))] = ResourceRecord("up", 1024).to_json()
    etcd.kv[record_key("c", InvokerId(1, "u1", "node-b"))] = ResourceRecord("down").to_json()
    return etcd


async def test_an_action_with_a_queue_goes_to_its_leader_else_to_the_least_loaded(etcd):
    d = SchedulerDirectory(etcd, "c")
    await d.refresh()
    assert await d.scheduler_for("guest", "guest/hello") == "1"  # no queue: fewest queues
    etcd.kv[queue_leader_key("c", "guest", "guest/led")] = S0.endpoints_json()
    assert await d.scheduler_for("guest", "guest/led") == "0"
    gets = etcd.gets
    assert await d.scheduler_for("guest", "guest/led") == "0"
    assert etcd.gets == gets, "the leader is remembered until the next refresh"
    # The queue moves (re-elected on scheduler 1): followed after the next refresh.
    etcd.kv[queue_leader_key("c", "guest", "guest/led")] = S1.endpoints_json()
    await d.refresh()
    assert await d.scheduler_for("guest", "guest/led") == "1"


async def test_a_leader_of_an_unknown_scheduler_or_an_unreadable_one_is_passed_over(etcd):
    d = SchedulerDirectory(etcd, "c")
    await d.refresh()
    other = SchedulerState("9", 0, "10.0.0.9", 13001)
    etcd.kv[queue_leader_key("c", "guest", "guest/a")] = other.endpoints_json()
    etcd.kv[queue_leader_key("c", "guest", "guest/b")] = "garbage"
    assert await d.scheduler_for("guest", "guest/a") == "1"
    assert await d.scheduler_for("guest", "guest/b") == "1"


async def test_no_scheduler_is_an_error_and_a_broken_value_is_left_out(etcd):
    etcd.kv[scheduler_key("c", "2")] = "{not json"
    etcd.kv[record_key("c", InvokerId(2))] = '{"status":"up"}'
    d = SchedulerDirectory(etcd, "c")
    await d.refresh()
    assert set(d.schedulers) == {"0", "1"}
    assert d.invoker_states() == {"invoker0/u0": "up", "invoker1/u1/node-b": "down"}
    with pytest.raises(NoScheduler, match="No scheduler endpoint available"):
        await SchedulerDirectory(FakeEtcd(), "c").scheduler_for("guest", "guest/x")


async def test_while_etcd_is_away_the_last_view_stands(etcd):
    d = SchedulerDirectory(etcd, "c")
    await d.refresh()
    etcd.down = True
    with pytest.raises(EtcdError):
        await d.refresh()
    assert d.invoker_states()["invoker0/u0"] == "up"
    # The leader cannot be read: the least loaded scheduler still takes the call.
    assert await d.scheduler_for("guest", "guest/hello") == "1"
