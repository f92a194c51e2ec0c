"""The drop-in core end to end: controller-format messages on real Kafka, action documents
and activation records in the real CouchDB-API server, process containers, acks on
``completed0`` and pings on ``health``."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from containers.placement import SlotState
from harness.controller import running_invoker
from tests.integration.harness import NODE_ECHO, PY_HELLO, python_zip
from whisk.protocol import QualifiedName, dumps
from whisk.protocol.controller import GUEST, activation_message
from whisk.protocol.messages import Identity

pytestmark = pytest.mark.services


@pytest.fixture
async def live(kafka, couchdb, tmp_path):
    async with running_invoker(kafka, couchdb, tmp_path) as pair:
        yield pair


def annotations(record):
    return {a["key"]: a["value"] for a in record["annotations"]}


async def test_blocking_python_action_result_then_completion_and_record(live):
    invoker, ctl = live
    action, rev = await ctl.create_action("hello", PY_HELLO)
    aid = await ctl.invoke(action, rev, content={"name": "World"}, blocking=True)
    acks = await ctl.wait_completion(aid)
    result, completion = acks[0], acks[-1]
    assert set(result) == {"transid", "response"}  # ResultMessage first, for the waiting client
    assert result["response"]["response"]["result"] == {"greeting": "Hello World"}
    assert result["response"]["activationId"] == aid
    assert completion["isSystemError"] is False and completion["activationId"] == aid
    assert completion["instance"]["instance"] == 0
    assert completion["instance"]["userMemory"] == f"{1024 * 1024 * 1024} B"
    assert completion["transid"] == result["transid"]
    rec = await ctl.record(aid)
    assert rec["_id"] == f"guest/{aid}" and rec["entityType"] == "activation"
    assert rec["response"]["statusCode"] == 0 and rec["response"]["size"] > 0
    assert rec["namespace"] == "guest" and rec["name"] == "hello" and rec["subject"] == "guest"
    assert rec["duration"] == rec["end"] - rec["start"]
    ann = annotations(rec)
    assert ann["path"] == "guest/hello" and ann["kind"] == "python:3.11"
    assert ann["timeout"] is False and ann["initTime"] >= 0 and ann["waitTime"] >= 0
    assert ann["limits"] == {"timeout": 60000, "memory": 256, "logs": 10, "concurrency": 1}
    assert any(line.endswith("stdout: hello stdout") for line in rec["logs"])
    assert any(line.endswith("stderr: hello stderr") for line in rec["logs"])
    # A second call is warm: no initTime, its own logs only.
    aid2 = await ctl.invoke(action, rev, content={"name": "again"})
    await ctl.wait_completion(aid2)
    rec2 = await ctl.record(aid2)
    assert "initTime" not in annotations(rec2)
    assert len(rec2["logs"]) == 2
    assert invoker.pool.warm_starts >= 1


async def test_non_blocking_nodejs_gets_only_a_completion(live):
    _, ctl = live
    action, rev = await ctl.create_action("echo", NODE_ECHO, kind="nodejs:20")
    aid = await ctl.invoke(action, rev, content={"a": [1, 2]}, blocking=False)
    acks = await ctl.wait_completion(aid)
    assert len(acks) == 1 and "response" not in acks[0]
    rec = await ctl.record(aid)
    assert rec["response"]["result"] == {"a": [1, 2]}
    assert any("node says hi" in line for line in rec["logs"])


async def test_controller_health_action_with_null_revision(live):
    _, ctl = live
    await ctl.create_action(
        "invokerHealthTestAction0",
        b"function main(params) { return params; }",
        kind="nodejs:default",
        namespace="whisk.system",
        memory_mb=128,
    )
    system = Identity("whisk.system", "whisk.system", "u", {"api_key": "u:k"})
    transid = ["sid_invokerHealth", 1717000000001]
    aid = await ctl.invoke(
        QualifiedName("whisk.system", "invokerHealthTestAction0", "0.0.1"),
        None,
        blocking=False,
        user=system,
        transid=transid,
    )
    (ack,) = await ctl.wait_completion(aid)
    assert ack["transid"] == transid and ack["isSystemError"] is False
    await ctl.record(aid, namespace="whisk.system")


async def test_pings_every_second_with_a_complete_instance(live):
    _, ctl = live
    await asyncio.sleep(2.5)
    assert len(ctl.pings) >= 2
    name = ctl.pings[-1]["name"]
    for key in ("instance", "userMemory", "instanceType", "tags", "dedicatedNamespaces"):
        assert key in name
    assert ctl.pings[-1]["isEnabled"] is True


async def test_zip_action_stored_as_attachment_and_init_args(live):
    _, ctl = live
    big_helper = "DATA = " + repr("x" * 40_000) + "\n"
    code = python_zip(
        {
            "__main__.py": "import helper, os\n"
            "def main(a):\n"
            "    return {'n': len(helper.DATA), 'secret': os.environ.get('secret')}\n",
            "helper.py": big_helper,
        }
    )
    action, rev = await ctl.create_action("zipped", code, binary=True)
    doc = await ctl.store.get(ctl.config.whisks_db, "guest/zipped")
    assert doc["exec"]["code"]["attachmentName"].startswith("couch:")  # a real attachment
    aid = await ctl.invoke(action, rev, content={"secret": "s3", "x": 1}, init_args=("secret",))
    await ctl.wait_completion(aid)
    rec = await ctl.record(aid)
    assert rec["response"]["result"] == {"n": 40_000, "secret": "s3"}


@pytest.mark.parametrize(
    "code,status,needle",
    [
        (b"def main(a):\n    return {'error': 'boom'}\n", 1, "boom"),
        (b"def main(a) syntax error\n", 2, ""),
        (b"import os\ndef main(a):\n    os._exit(3)\n", 2, "exited unexpectedly"),
        (b"def main(a):\n    return 42\n", 2, "dictionary or array"),
        (b"def main(a):\n    raise ValueError('bad input')\n", 1, "bad input"),
    ],
    ids=["application-error", "init-failure", "crash", "not-a-dict", "exception"],
)
async def test_error_mapping(live, code, status, needle):
    _, ctl = live
    action, rev = await ctl.create_action("err", code)
    aid = await ctl.invoke(action, rev)
    acks = await ctl.wait_completion(aid)
    assert acks[-1]["isSystemError"] is False
    rec = await ctl.record(aid)
    assert rec["response"]["statusCode"] == status
    assert needle in str(rec["response"]["result"]["error"])
    # The node keeps serving: a good action still runs afterwards.
    good, grev = await ctl.create_action("good", PY_HELLO)
    aid = await ctl.invoke(good, grev)
    await ctl.wait_completion(aid)
    assert (await ctl.record(aid))["response"]["statusCode"] == 0


async def test_timeout_is_a_developer_error_and_the_container_is_replaced(live):
    _, ctl = live
    action, rev = await ctl.create_action(
        "sleepy",
        b"import time\ndef main(a):\n    time.sleep(a.get('s', 0))\n    return {}\n",
        timeout_ms=500,
    )
    aid = await ctl.invoke(action, rev, content={"s": 5})
    await ctl.wait_completion(aid)
    rec = await ctl.record(aid)
    assert rec["response"]["statusCode"] == 2
    assert rec["response"]["result"]["error"] == (
        "The action exceeded its time limits of 500 milliseconds."
    )
    assert annotations(rec)["timeout"] is True
    aid = await ctl.invoke(action, rev, content={"s": 0})
    await ctl.wait_completion(aid)
    rec = await ctl.record(aid)
    assert rec["response"]["statusCode"] == 0 and "initTime" in annotations(rec)


async def test_oversized_result_is_truncated_and_the_ack_fits(live):
    _, ctl = live
    action, rev = await ctl.create_action(
        "huge", b"def main(a):\n    return {'x': 'y' * 3_000_000}\n"
    )
    aid = await ctl.invoke(action, rev)
    acks = await ctl.wait_completion(aid)
    assert all(len(dumps(a)) < 1_054_644 for a in acks)
    rec = await ctl.record(aid)
    assert rec["response"]["statusCode"] == 1
    assert "exceeded the allowed length" in rec["response"]["result"]["error"]


async def test_log_limit_truncates(live):
    _, ctl = live
    action, rev = await ctl.create_action(
        "chatty",
        b"def main(a):\n    for i in range(60000):\n        print('line', i)\n    return {}\n",
        logs_mb=1,
    )
    aid = await ctl.invoke(action, rev)
    await ctl.wait_completion(aid)
    rec = await ctl.record(aid)
    assert rec["response"]["statusCode"] == 0
    assert "Logs were truncated" in rec["logs"][-1]
    assert len(rec["logs"]) < 60000


async def test_bad_input_gets_clear_answers_and_nothing_stops(live, caplog):
    invoker, ctl = live
    # Not JSON: nothing can be answered; logged and skipped.
    await ctl.publish_raw(b"this is not json")
    # A readable activation id but a broken user: whisk error ack + record.
    msg = activation_message(QualifiedName("guest", "x"), None, start_ms=1).to_json()
    msg["user"] = "nobody"
    await ctl.publish_raw(dumps(msg))
    acks = await ctl.wait_completion(msg["activationId"])
    assert acks[-1]["isSystemError"] is True
    assert "invalid" in acks[-1]["response"]["response"]["result"]["error"]
    # An unknown action: application error "could not be found".
    aid = await ctl.invoke(QualifiedName("guest", "nosuchaction"), "1-abc")
    acks = await ctl.wait_completion(aid)
    assert acks[-1]["isSystemError"] is False
    rec = await ctl.record(aid)
    assert rec["response"]["result"]["error"] == (
        "Action could not be found or may have been deleted."
    )
    # A missing revision runs the latest document.
    action, rev = await ctl.create_action("latest", PY_HELLO)
    aid = await ctl.invoke(action, None)
    await ctl.wait_completion(aid)
    assert (await ctl.record(aid))["response"]["statusCode"] == 0
    # A bad zip: the runtime refuses it at /init (developer error), the node goes on.
    action, rev = await ctl.create_action("badzip", b"PK\x03\x04 not really a zip", binary=True)
    aid = await ctl.invoke(action, rev)
    await ctl.wait_completion(aid)
    assert (await ctl.record(aid))["response"]["statusCode"] == 2
    assert "bad message" in caplog.text
    assert invoker.metrics.bad_messages._value.get() >= 2
    # Still serving.
    good, grev = await ctl.create_action("good2", PY_HELLO)
    aid = await ctl.invoke(good, grev, user=GUEST)
    await ctl.wait_completion(aid)


async def test_offsets_are_committed_after_completion(live):
    invoker, ctl = live
    action, rev = await ctl.create_action("c", PY_HELLO)
    aids = [await ctl.invoke(action, rev, blocking=False) for _ in range(5)]
    for aid in aids:
        await ctl.wait_completion(aid)
    await asyncio.sleep(0.6)  # the commit loop runs every 0.2 s
    tp = TopicPartition(invoker.config.invoker_topic, 0)
    committed = await invoker.consumer._consumer.committed(tp)
    assert committed == 5


async def test_prewarm_warm_reuse_and_lru_eviction(kafka, couchdb, tmp_path):
    # 1024 MB: the stock nodejs:20 stem cells (2 x 256 MB) may hold at most half of it.
    # The stock invoker's accounting: every container at its limit, evicted LRU first.
    async with running_invoker(
        kafka, couchdb, tmp_path, user_memory_mb=1024, keep_alive="limit"
    ) as (invoker, ctl):
        pool = invoker.pool
        async with asyncio.timeout(30):
            while pool.count(SlotState.PREWARM) < 2:
                await asyncio.sleep(0.05)
        node, nrev = await ctl.create_action("n", NODE_ECHO, kind="nodejs:20")
        await ctl.wait_completion(await ctl.invoke(node, nrev))
        assert pool.prewarm_starts == 1  # the prewarmed container was used...
        async with asyncio.timeout(30):  # ...and replaced
            while pool.count(SlotState.PREWARM) < 2:
                await asyncio.sleep(0.05)
        await ctl.wait_completion(await ctl.invoke(node, nrev))
        assert pool.warm_starts == 1
        a, arev = await ctl.create_action("a", PY_HELLO)
        await ctl.wait_completion(await ctl.invoke(a, arev))  # fills the memory
        assert pool.used_memory_mb == 1024 and pool.evictions == 0
        b, brev = await ctl.create_action("b", PY_HELLO)
        aid = await ctl.invoke(b, brev)
        await ctl.wait_completion(aid)
        assert (await ctl.record(aid))["response"]["statusCode"] == 0
        assert pool.evictions == 1  # the least recently used idle container (the node one)
        assert pool.count(SlotState.PREWARM) == 2  # prewarmed containers are never evicted
        keys = {s.key.docid for s in pool.slots.values() if s.key is not None}
        assert keys == {"guest/a", "guest/b"}


async def test_idle_containers_kept_at_their_footprint_outnumber_the_memorys_limits(
    kafka, couchdb, tmp_path
):
    """Keep-alive by footprint (the default): six 256 MB python actions called in turn on a
    node of 1024 MB (four containers at their limits) all stay warm, measured at what they
    use, and their second calls are all warm."""
    async with running_invoker(kafka, couchdb, tmp_path, user_memory_mb=1024) as (invoker, ctl):
        pool = invoker.pool
        actions = [await ctl.create_action(f"k{i}", PY_HELLO) for i in range(6)]
        for action, rev in actions * 2:
            await ctl.wait_completion(await ctl.invoke(action, rev))
        assert (pool.cold_starts, pool.warm_starts, pool.evictions) == (6, 6, 0)
        warm = [s for s in pool.slots.values() if s.key is not None]
        async with asyncio.timeout(10):  # the last one is measured after its call
            while any(s.footprint_mb is None for s in warm):
                await asyncio.sleep(0.05)
        assert len(warm) == 6 and all(0 < s.footprint_mb < 100 for s in warm), warm
        assert pool.used_memory_mb == pool.kept_memory_mb < 1024


PY_SHIFTY = b"""
import time
def main(args):
    end = time.process_time() + args.get("cpu", 0)
    while time.process_time() < end:
        pass
    time.sleep(args.get("sleep", 0))
    return {}
"""


async def test_a_call_burning_more_cpu_than_expected_is_seen_while_it_runs(live):
    """The misprediction guard live: a function learnt as a sleeper burns its core for 3 s;
    the CPU sampler reads it while it runs, puts its overrun on its core's load (so the
    core takes only what fits beside it) and raises the function's estimate; the overrun
    leaves the core with the call."""
    invoker, ctl = live
    action, rev = await ctl.create_action("shifty", PY_SHIFTY)
    for _ in range(2):
        await ctl.wait_completion(await ctl.invoke(action, rev, content={"sleep": 0.3}))
    assert invoker.scheduler.stats.snapshot()["guest/shifty"]["cpu_share"] < 0.1
    core = str(invoker.config.action_cores[0])
    aid = await ctl.invoke(action, rev, content={"cpu": 3.0})
    async with asyncio.timeout(20):
        while invoker.status()["cores"][core]["measuredOverrun"] < 0.5:
            await asyncio.sleep(0.05)
    assert invoker.status()["cores"][core]["expectedLoad"] > 0.5
    assert invoker.scheduler.stats.snapshot()["guest/shifty"]["cpu_share"] > 0.5
    await ctl.wait_completion(aid)
    assert invoker.status()["cores"][core] == {
        "calls": 0,
        "expectedLoad": 0.0,
        "measuredOverrun": 0.0,
        "full": False,
    }
