"""The etcd keys and record of the scheduler mode, exactly as the stock invoker writes them."""

from __future__ import annotations

import base64
import json

import pytest

from whisk.etcd import EtcdError, parse_hosts, prefix_end
from whisk.protocol.etcd_keys import (
    ContainerRef,
    InvokerId,
    ResourceRecord,
    SchedulerState,
    container_key,
    invoker_of_record_key,
    lease_key,
    queue_leader_key,
    record_key,
    scheduler_key,
    warmed_key,
)

REF = ContainerRef("guest", "guest/pkg", "hello", "3-9f0a", "wsk0_12_guest_hello")


@pytest.mark.parametrize(
    ("invoker", "lease", "record"),
    [
        (InvokerId(0), "whisk/instance/invoker0/lease", "whisk/invokers/0"),
        (InvokerId(3, "u3"), "whisk/instance/invoker3/u3/lease", "whisk/invokers/3/u3"),
        (
            InvokerId(3, "u3", "node-a"),
            "whisk/instance/invoker3/u3/node-a/lease",
            "whisk/invokers/3/u3/node-a",
        ),
        # a displayed name alone is not in the record's key (upstream's InvokerKeys.health)
        (InvokerId(1, None, "node-b"), "whisk/instance/invoker1/node-b/lease", "whisk/invokers/1"),
    ],
)
def test_lease_and_record_keys(invoker: InvokerId, lease: str, record: str) -> None:
    assert lease_key("whisk", invoker) == lease
    assert record_key("whisk", invoker) == record


def test_container_and_warmed_keys_differ_in_the_invoker_part() -> None:
    invoker = InvokerId(2, "u2")
    assert (
        container_key("c1", invoker, REF)
        == "c1/namespace/guest/guest/pkg/hello/3-9f0a/invoker2/container/wsk0_12_guest_hello"
    )
    assert (
        warmed_key("c1", invoker, REF)
        == "c1/warmed/guest/guest/pkg/hello/3-9f0a/invoker/2/container/wsk0_12_guest_hello"
    )


def test_record_json_is_the_stock_one() -> None:
    record = ResourceRecord("up", 2048, 256, 128, ("gpu",), ("guest",))
    assert record.to_json() == (
        '{"status":"up","freeMemory":2048,"busyMemory":256,"inProgressMemory":128,'
        '"tags":["gpu"],"dedicatedNamespaces":["guest"]}'
    )
    assert json.loads(ResourceRecord().to_json())["tags"] == []
    with pytest.raises(ValueError, match="status"):
        ResourceRecord("healthy")


def test_hosts_in_the_stock_form() -> None:
    assert parse_hosts("etcd0:2379, etcd1:2379") == ["http://etcd0:2379", "http://etcd1:2379"]
    assert parse_hosts(["https://e:2379/"]) == ["https://e:2379"]
    with pytest.raises(ValueError):
        parse_hosts(" , ")


def test_prefix_end_covers_exactly_the_prefix() -> None:
    assert base64.b64decode(prefix_end("whisk/")) == b"whisk0"
    assert base64.b64decode(prefix_end("a\xff")) == b"a\xc3\xc0"  # UTF-8 bytes, last one + 1
    assert base64.b64decode(prefix_end("")) == b"\0"


def test_error_names_the_endpoint_and_the_call() -> None:
    e = EtcdError("http://e:2379", "put k", "HTTP 404: lease not found", 5)
    assert str(e) == "etcd http://e:2379: put k failed: HTTP 404: lease not found"
    assert e.not_found and not EtcdError("x", "y", "z").not_found


def test_a_record_reads_back_and_a_broken_one_is_refused() -> None:
    record = ResourceRecord("unhealthy", 1024, 512, 0, ("gpu",), ("guest",))
    assert ResourceRecord.from_json(record.to_json()) == record
    for broken in (
        "[]",
        '{"status":"up"}',
        '{"status":"sleeping","freeMemory":1,"busyMemory":0,"inProgressMemory":0}',
        "not json",
    ):
        with pytest.raises(ValueError):
            ResourceRecord.from_json(broken)


@pytest.mark.parametrize(
    "invoker", [InvokerId(0), InvokerId(3, "u3"), InvokerId(3, "u3", "node-a")]
)
def test_a_record_key_names_its_invoker(invoker: InvokerId) -> None:
    assert invoker_of_record_key("c1", record_key("c1", invoker)) == invoker


@pytest.mark.parametrize(
    "key", ["c1/invokers/", "c1/invokers/x", "c2/invokers/0", "c1/invokers/0/a/b/c"]
)
def test_a_key_that_is_no_record_key_is_refused(key: str) -> None:
    with pytest.raises(ValueError):
        invoker_of_record_key("c1", key)


def test_scheduler_state_is_upstreams_schedulerstates() -> None:
    state = SchedulerState("0", 2, "10.0.0.5", 13001, 25520)
    assert scheduler_key("whisk", "0") == "whisk/scheduler/0"
    assert json.loads(state.to_json()) == {
        "sid": {"asString": "0"},
        "queueSize": 2,
        "endpoints": {"host": "10.0.0.5", "rpcPort": 13001, "pekkoPort": 25520},
    }
    assert SchedulerState.from_json(state.to_json()) == state
    # a queue's leader key holds the endpoints alone, compared by value, not by text
    assert state.serves('{"pekkoPort":25520,"host":"10.0.0.5","rpcPort":13001}')
    assert not state.serves('{"host":"10.0.0.5","rpcPort":13002,"pekkoPort":25520}')
    assert not state.serves("garbage")
    with pytest.raises(ValueError):
        SchedulerState.from_json('{"sid":"0","queueSize":1}')


def test_queue_leader_key() -> None:
    assert (
        queue_leader_key("whisk", "guest", "guest/pkg/hello")
        == "whisk/queue/guest/guest/pkg/hello/leader"
    )
