"""Triggers and rules through the REST API with real action runtimes: a fire runs every
active rule's action with the trigger's parameters and the fire's merged, and leaves a
trigger activation whose logs are the rules' results; rules are enabled and disabled."""

from __future__ import annotations

import json

from front.entities import annotation
from tests.integration.front.conftest import NS, activation, put_action

ECHO = "def main(a):\n    return a\n"


async def make_rule(live, rule: str, trigger: str, action: str, status: int = 200) -> dict:
    got, body = await live.call(
        "PUT", f"{NS}/rules/{rule}", json={"trigger": f"/_/{trigger}", "action": f"/_/{action}"}
    )
    assert got == status, body
    return body


async def fire(live, trigger: str, payload: dict) -> tuple[int, dict | str]:
    return await live.call("POST", f"{NS}/triggers/{trigger}", json=payload)


async def test_a_fire_runs_each_active_rule_with_merged_parameters(live):
    await put_action(live, "echo", ECHO)
    await put_action(live, "echo2", ECHO, parameters=[{"key": "own", "value": True}])
    status, trigger = await live.call(
        "PUT", f"{NS}/triggers/t", json={"parameters": [{"key": "p", "value": 1}]}
    )
    assert status == 200 and trigger["name"] == "t" and "rules" not in trigger
    rule = await make_rule(live, "r1", "t", "echo")
    assert rule["status"] == "active"
    assert rule["trigger"] == {"path": "guest", "name": "t"}
    assert rule["action"] == {"path": "guest", "name": "echo"}
    await make_rule(live, "r2", "t", "echo2")

    status, body = await fire(live, "t", {"q": 2, "p": 3})
    assert status == 202, body
    record = await activation(live, body["activationId"])
    assert record["name"] == "t" and record["response"]["result"] == {"q": 2, "p": 3}
    results = sorted((json.loads(line) for line in record["logs"]), key=lambda r: r["rule"])
    assert [(r["rule"], r["action"], r["success"]) for r in results] == [
        ("guest/r1", "guest/echo", True),
        ("guest/r2", "guest/echo2", True),
    ]
    first = await activation(live, results[0]["activationId"])
    got = first["response"]["result"]
    assert got["p"] == 3 and got["q"] == 2  # the fire's payload over the trigger's
    assert got["__ow_headers"]["content-type"].startswith("application/json")
    assert "authorization" not in got["__ow_headers"]
    second = await activation(live, results[1]["activationId"])
    assert second["response"]["result"]["own"] is True
    status, t = await live.call("GET", f"{NS}/triggers/t")
    assert t["rules"]["guest/r1"] == {
        "action": {"path": "guest", "name": "echo"},
        "status": "active",
    }


async def test_rules_are_enabled_and_disabled(live):
    await put_action(live, "echo", ECHO)
    await live.call("PUT", f"{NS}/triggers/t", json={})
    await make_rule(live, "r", "t", "echo")
    await make_rule(live, "other", "t", "echo")
    status, _ = await live.call("POST", f"{NS}/rules/r", json={"status": "inactive"})
    assert status == 200
    status, got = await live.call("GET", f"{NS}/rules/r")
    assert got["status"] == "inactive"
    status, body = await fire(live, "t", {})
    assert status == 202
    record = await activation(live, body["activationId"])
    entries = {json.loads(line)["rule"]: json.loads(line) for line in record["logs"]}
    assert entries["guest/r"] == {
        "rule": "guest/r",
        "action": "guest/echo",
        "statusCode": 1,
        "success": False,
        "error": "Rule 'guest/r' is inactive, action 'guest/echo' was not activated.",
    }
    assert entries["guest/other"]["success"] is True
    await live.call("POST", f"{NS}/rules/other", json={"status": "inactive"})
    status, body = await fire(live, "t", {})
    assert status == 204  # no active rule: nothing runs, no record
    status, _ = await live.call("POST", f"{NS}/rules/r", json={"status": "active"})
    status, body = await fire(live, "t", {})
    assert status == 202
    status, body = await live.call("POST", f"{NS}/rules/r", json={"status": "paused"})
    assert status == 400


async def test_rule_lifecycle_and_refusals(live):
    await put_action(live, "echo", ECHO)
    await live.call("PUT", f"{NS}/triggers/t", json={})
    await live.call("PUT", f"{NS}/triggers/u", json={})
    body = await make_rule(live, "r", "t", "nope", status=400)
    assert body["error"] == "action /guest/nope does not exist"
    body = await make_rule(live, "r", "nope", "echo", status=400)
    assert body["error"] == "trigger /guest/nope does not exist"
    await make_rule(live, "r", "t", "echo")
    await make_rule(live, "r", "t", "echo", status=409)
    # Moving the rule to another trigger keeps its status and relinks it.
    await live.call("POST", f"{NS}/rules/r", json={"status": "inactive"})
    status, moved = await live.call("PUT", f"{NS}/rules/r?overwrite=true", json={"trigger": "/_/u"})
    assert status == 200 and moved["status"] == "inactive"
    assert moved["trigger"] == {"path": "guest", "name": "u"}
    status, t = await live.call("GET", f"{NS}/triggers/t")
    assert not t.get("rules")
    status, listed = await live.call("GET", f"{NS}/rules")
    assert [r["name"] for r in listed] == ["r"]
    status, deleted = await live.call("DELETE", f"{NS}/rules/r")
    assert status == 200 and deleted["status"] == "inactive"
    status, u = await live.call("GET", f"{NS}/triggers/u")
    assert not u.get("rules")
    # A rule whose trigger was deleted is inactive and cannot be enabled.
    await make_rule(live, "r2", "t", "echo")
    await live.call("DELETE", f"{NS}/triggers/t")
    status, got = await live.call("GET", f"{NS}/rules/r2")
    assert status == 200 and got["status"] == "inactive"
    status, body = await live.call("POST", f"{NS}/rules/r2", json={"status": "active"})
    assert status == 404


async def test_a_rule_may_run_a_sequence_and_a_packaged_action(live):
    await put_action(live, "echo", ECHO)
    await live.call("PUT", f"{NS}/packages/p", json={"parameters": [{"key": "pk", "value": 1}]})
    await put_action(live, "p/echo", ECHO)
    await live.call(
        "PUT", f"{NS}/actions/s", json={"exec": {"kind": "sequence", "components": ["echo"]}}
    )
    await live.call("PUT", f"{NS}/triggers/t", json={})
    await make_rule(live, "to-seq", "t", "s")
    status, _ = await live.call(
        "PUT", f"{NS}/rules/to-pkg", json={"trigger": "/_/t", "action": "/_/p/echo"}
    )
    assert status == 200
    status, body = await fire(live, "t", {"x": 1})
    record = await activation(live, body["activationId"])
    results = {json.loads(x)["rule"]: json.loads(x) for x in record["logs"]}
    seq = await activation(live, results["guest/to-seq"]["activationId"])
    assert annotation(seq, "kind") == "sequence" and seq["response"]["result"]["x"] == 1
    packaged = await activation(live, results["guest/to-pkg"]["activationId"])
    assert packaged["response"]["result"]["pk"] == 1
