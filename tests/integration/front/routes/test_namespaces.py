"""The namespace listing (``wsk list``, ``wsk namespace get``), counts, and the activation
list's filters (``name``, ``since``, ``upto``, ``skip``, ``limit``, ``docs``) that
``wsk activation list`` and ``wsk activation poll`` use."""

from __future__ import annotations

import asyncio

from tests.integration.front.conftest import NS, invoke, put_action

ECHO = "def main(a):\n    return a\n"


async def test_the_namespace_lists_every_entity_kind(live):
    await put_action(live, "a", ECHO)
    await live.call("PUT", f"{NS}/packages/p", json={})
    await put_action(live, "p/b", ECHO)
    await live.call("PUT", f"{NS}/triggers/t", json={})
    await live.call("PUT", f"{NS}/rules/r", json={"trigger": "/_/t", "action": "/_/a"})
    status, everything = await live.call("GET", "/api/v1/namespaces/_")
    assert status == 200
    assert sorted(everything) == ["actions", "packages", "rules", "triggers"]
    assert sorted(a["name"] for a in everything["actions"]) == ["a", "b"]
    assert [p["name"] for p in everything["packages"]] == ["p"]
    assert [t["name"] for t in everything["triggers"]] == ["t"]
    assert [r["name"] for r in everything["rules"]] == ["r"]
    assert (await live.call("GET", "/api/v1/namespaces/guest"))[1] == everything
    assert (await live.call("GET", "/api/v1/namespaces"))[1] == ["guest"]
    assert (await live.call("GET", "/api/v1/namespaces/_/limits"))[0] == 200
    assert (await live.call("GET", "/api/v1/namespaces/whisk.system"))[0] == 403
    for collection, n in (("actions", 2), ("packages", 1), ("triggers", 1), ("rules", 1)):
        assert (await live.call("GET", f"{NS}/{collection}?count=true"))[1] == {collection: n}
    assert (await live.call("GET", f"{NS}/actions?limit=201"))[0] == 400


async def test_activation_list_filters(live):
    await put_action(live, "a", ECHO)
    await live.call("PUT", f"{NS}/packages/p", json={})
    await put_action(live, "p/a", ECHO)
    await put_action(live, "b", ECHO)
    starts = []
    for name in ("a", "b", "a", "p/a", "b", "a"):
        status, rec = await invoke(live, name, {"who": name})
        assert status == 200, rec
        starts.append(rec["start"])
    for _ in range(100):  # the records are written after the results are answered
        if (await live.call("GET", f"{NS}/activations?count=true"))[1]["activations"] == 6:
            break
        await asyncio.sleep(0.05)

    async def ids(query: str) -> list[str]:
        status, listed = await live.call("GET", f"{NS}/activations?{query}")
        assert status == 200, listed
        return [r["name"] + ("*" if "response" in r else "") for r in listed]

    assert len(await ids("limit=50")) == 6
    # name: the simple name matches packaged actions of that name too; pkg/name only those
    assert await ids("name=a") == ["a", "a", "a", "a"]
    status, listed = await live.call("GET", f"{NS}/activations?name=p/a&docs=true")
    assert [r["response"]["result"]["who"] for r in listed] == ["p/a"]
    assert await ids("name=b&docs=true") == ["b*", "b*"]
    # since/upto bound the start (epoch ms, inclusive), newest first
    status, listed = await live.call("GET", f"{NS}/activations?since={starts[3]}")
    assert [r["start"] for r in listed] == sorted(starts[3:], reverse=True)
    status, listed = await live.call("GET", f"{NS}/activations?upto={starts[1]}")
    assert [r["start"] for r in listed] == sorted(starts[:2], reverse=True)
    status, listed = await live.call("GET", f"{NS}/activations?skip=1&limit=2")
    assert [r["start"] for r in listed] == sorted(starts, reverse=True)[1:3]
    assert (await live.call("GET", f"{NS}/activations?count=true&name=a"))[1] == {"activations": 4}
    assert (await live.call("GET", f"{NS}/activations?count=true&docs=true"))[0] == 400
    assert (await live.call("GET", f"{NS}/activations?since=yesterday"))[0] == 400


async def test_the_root_lists_the_runtimes_and_limits(live):
    """Deployment tools (``aio runtime deploy``) check a manifest's kinds against it."""
    status, info = await live.call("GET", "/")
    assert status == 200 and info["api_paths"] == ["/api/v1"]
    kinds = {r["kind"]: r for family in info["runtimes"].values() for r in family}
    assert kinds["nodejs:20"]["default"] is True and "python:3.11" in kinds
    assert info["limits"]["sequence_length"] == 50
