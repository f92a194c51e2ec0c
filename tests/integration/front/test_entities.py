"""Malformed entity requests get a clear 4xx and change nothing; the API keeps serving."""

from __future__ import annotations

from tests.integration.front.conftest import NS, invoke, put_action

ECHO = "def main(a):\n    return a\n"

BAD = [
    ("PUT", "actions/s", {"exec": {"kind": "sequence", "components": [1, None]}}),
    ("PUT", "actions/s", {"exec": {"kind": "sequence", "components": "echo"}}),
    ("PUT", "actions/s", {"exec": {"kind": "sequence", "components": ["/only-ns"]}}),
    ("PUT", "actions/s", {"exec": {"kind": "sequence", "components": ["/a/b/c/d"]}}),
    ("PUT", "actions/s", {"exec": {"kind": "sequence", "components": ["bad name!"]}}),
    ("PUT", "packages/p", {"binding": {"namespace": 3, "name": "x"}}),
    ("PUT", "packages/p", {"binding": "guest/x"}),
    ("PUT", "packages/p", {"parameters": {"a": 1}}),
    ("PUT", "triggers/t", {"annotations": [{"key": "feed", "value": 7}]}),
    ("PUT", "triggers/t", {"limits": []}),
    ("PUT", "rules/r", {"trigger": 5, "action": "/_/echo"}),
    ("PUT", "rules/r", {"trigger": "/_/t"}),
    ("POST", "rules/r", {"status": "on"}),
    ("POST", "triggers/t", [1, 2]),
    ("GET", "activations?name=a/b/c/d", None),
    ("GET", "packages?limit=-1", None),
    ("GET", "triggers?skip=x", None),
]


async def test_bad_entity_requests_are_refused(live):
    await put_action(live, "echo", ECHO)
    await live.call("PUT", f"{NS}/triggers/t", json={})
    await live.call("PUT", f"{NS}/rules/r", json={"trigger": "/_/t", "action": "/_/echo"})
    for method, path, body in BAD:
        status, answer = await live.call(method, f"{NS}/{path}", json=body)
        assert 400 <= status < 500, (method, path, answer)
        assert isinstance(answer, dict) and answer["error"] and answer["code"], answer
    assert (await live.call("GET", f"{NS}/packages/p"))[0] == 404
    assert (await live.call("GET", f"{NS}/actions/s"))[0] == 404
    status, rec = await invoke(live, "echo", {"still": "serving"})
    assert status == 200 and rec["response"]["result"] == {"still": "serving"}
