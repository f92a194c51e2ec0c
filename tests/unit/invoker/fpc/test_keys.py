"""The etcd keys and record of the scheduler mode, exactly as the stock invoker writes them."""

from __future__ import annotations

import base64
import json

import pytest

from invoker.fpc.etcd import EtcdError, parse_hosts, prefix_end
from invoker.fpc.keys import (
    ContainerRef,
    InvokerId,
    ResourceRecord,
    container_key,
    lease_key,
    record_key,
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
