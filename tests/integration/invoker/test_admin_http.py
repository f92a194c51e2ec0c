"""The operators' view of a running invoker (docs/operations.md, docs/metrics.md): which
activations run and wait (ids, ages), the container pool by state and action, and the
metrics that docs/metrics.md and the committed Grafana dashboard name."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import aiohttp
import pytest

from front.identities import basic_auth
from harness.controller import running_invoker
from harness.processes import free_port
from invoker.admin_http import serve_admin

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "ow-invoker.json"
METRICS_DOC = ROOT / "docs" / "metrics.md"
AUTH = {"Authorization": basic_auth("invoker.user:invoker.pass")}
SLEEPY = (
    b"import time\ndef main(a):\n    time.sleep(a.get('s', 0.2))\n    return {'i': a.get('i')}\n"
)


async def _get(http: aiohttp.ClientSession, url: str, **kw):
    async with http.get(url, **kw) as r:
        return r.status, (
            await r.json() if r.content_type == "application/json" else await r.text()
        )


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value of every sample in Prometheus text."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def families(text: str) -> dict[str, str]:
    """Metric family name -> type, from the ``# TYPE`` lines."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


async def test_activations_pool_and_metrics_while_calls_run_and_wait(kafka, couchdb, tmp_path):
    async with running_invoker(kafka, couchdb, tmp_path) as (invoker, stub):
        port = free_port()
        runner = await serve_admin(invoker, "127.0.0.1", port)
        base = f"http://127.0.0.1:{port}"
        try:
            action, rev = await stub.create_action("sleepy", SLEEPY)
            aids = [
                await stub.invoke(action, rev, blocking=False, content={"i": i, "s": 2.5})
                for i in range(3)
            ]
            async with aiohttp.ClientSession() as http:
                for path in ("/activations", "/pool"):
                    assert (await _get(http, base + path))[0] == 401
                async with asyncio.timeout(30):  # one core: one runs, two wait
                    while True:
                        status, view = await _get(http, f"{base}/activations", headers=AUTH)
                        if view["runningTotal"] == 1 and view["queuedTotal"] == 2:
                            break
                        await asyncio.sleep(0.1)
                assert status == 200 and view["pending"] == 3
                (run,) = view["running"]
                assert run["activationId"] in aids and run["state"] == "running"
                assert run["action"] == "guest/sleepy" and run["kind"] == "python:3.11"
                assert run["core"] == 0 and run["runningS"] >= 0 and run["ageS"] >= run["runningS"]
                assert run["sinceAcceptedS"] >= 0 and run["namespace"] == "guest"
                queued = view["queued"]
                assert {q["activationId"] for q in queued} == set(aids) - {run["activationId"]}
                assert all(q["state"] == "queued" and "runningS" not in q for q in queued)
                assert queued[0]["ageS"] >= queued[1]["ageS"] >= 0  # oldest first; a new call: 0.0
                _, one = await _get(http, f"{base}/activations?limit=1", headers=AUTH)
                assert len(one["queued"]) == 1 and one["queuedTotal"] == 2
                status, bad = await _get(http, f"{base}/activations?limit=x", headers=AUTH)
                assert status == 400 and "limit" in bad["error"]

                async with asyncio.timeout(30):  # a busy slot is named once its container is up
                    while True:
                        _, pool = await _get(http, f"{base}/pool", headers=AUTH)
                        busy = [c for c in pool["containers"] if c["state"] == "busy"]
                        if len(busy) != 1 or busy[0]["name"]:
                            break
                        await asyncio.sleep(0.1)
                assert len(busy) == 1 and busy[0]["action"] == "guest/sleepy"
                assert busy[0]["memoryMB"] == 256 and busy[0]["name"]
                assert pool["byAction"] == {"guest/sleepy": {"busy": 1}}
                assert pool["byState"]["busy"] == 1 and pool["usedMemoryMB"] >= 256
                assert pool["userMemoryMB"] == 1024 and pool["byKind"]["python:3.11"]["busy"] == 1

                async with http.get(f"{base}/metrics") as r:
                    now = samples(await r.text())
                assert now['invoker_containers{kind="python:3.11",state="busy"}'] == 1
                assert now['invoker_containers_memory_mb{state="busy"}'] == 256
                assert now["invoker_queue_length"] == 2 and now["invoker_running_calls"] == 1
                assert now["invoker_oldest_queued_seconds"] > 0
                assert now["invoker_oldest_running_seconds"] > 0
                assert now["invoker_user_memory_mb"] == 1024 and now["invoker_action_cores"] == 1

                for aid in aids:
                    await stub.wait_completion(aid, timeout_s=60)
                async with asyncio.timeout(10):
                    while (await _get(http, f"{base}/activations", headers=AUTH))[1]["pending"]:
                        await asyncio.sleep(0.1)
                _, view = await _get(http, f"{base}/activations", headers=AUTH)
                assert view["running"] == [] and view["queued"] == []
                _, pool = await _get(http, f"{base}/pool", headers=AUTH)
                assert list(pool["byAction"]) == ["guest/sleepy"]
                assert list(pool["byAction"]["guest/sleepy"]) == ["idle"]  # all warm, none busy
                assert all(c["idleS"] >= 0 for c in pool["containers"] if c["action"])
                async with http.get(f"{base}/metrics") as r:
                    after = samples(await r.text())
                assert after["invoker_oldest_queued_seconds"] == 0
                assert after['invoker_containers{kind="python:3.11",state="idle"}'] >= 1
                assert after['invoker_containers{kind="python:3.11",state="busy"}'] == 0
                assert after['invoker_activations_total{status="success"}'] == 3
        finally:
            await runner.cleanup()


def _documented() -> dict[str, str]:
    """Metric name -> type from docs/metrics.md's tables (`| `name` | type | ...`)."""
    return dict(
        re.findall(
            r"^\| `(invoker_[a-z_]+)` \| (counter|gauge|histogram) \|",
            METRICS_DOC.read_text(),
            re.M,
        )
    )


def _dashboard_metrics() -> set[str]:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert exprs, "the dashboard has queries"
    return {name for e in exprs for name in re.findall(r"\b(invoker_[a-z_]+)", e)}


async def test_metrics_doc_and_dashboard_name_what_metrics_serves(kafka, couchdb, tmp_path):
    async with running_invoker(kafka, couchdb, tmp_path) as (invoker, _):
        port = free_port()
        runner = await serve_admin(invoker, "127.0.0.1", port)
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/metrics") as r,
            ):
                text = await r.text()
        finally:
            await runner.cleanup()
    served = families(text)
    # Every family the invoker serves is documented with its type, and nothing more.
    assert _documented() == {n: t for n, t in served.items() if not n.endswith("_created")}
    # prometheus_client names a counter's samples <name>_total, a histogram's _bucket/_sum/_count.
    names = set(samples(text)) | set(served)
    series = {re.sub(r"\{.*", "", n) for n in names}
    used = _dashboard_metrics()
    assert used, "the dashboard queries invoker metrics"
    missing = sorted(m for m in used if m not in series)
    assert not missing, f"the dashboard names metrics /metrics does not serve: {missing}"


def test_metrics_doc_lists_every_label_value():
    from containers.placement import SlotState
    from whisk.protocol.errors import KINDS
    from whisk.protocol.records import StatusCode

    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r"^\| `(invoker_[a-z_]+)` \| \w+ \| ([^|]*) \|", METRICS_DOC.read_text(), re.M
        )
    }
    assert {s.value for s in SlotState} <= set(
        re.findall(r"`([\w ]+)`", rows["invoker_containers"])
    )
    assert {s.status for s in StatusCode} <= set(
        re.findall(r"`([\w ]+)`", rows["invoker_activations_total"])
    )
    assert set(KINDS) <= set(re.findall(r"`(\w+)`", rows["invoker_bad_message_kinds_total"]))
    assert {"cold", "warm", "prewarm"} <= set(
        re.findall(r"`(\w+)`", rows["invoker_container_starts_total"])
    )
