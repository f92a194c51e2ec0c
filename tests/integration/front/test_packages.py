"""Packages and bindings through the REST API with real action runtimes: default parameters
merged package < binding < action < invocation, actions inside packages, sharing with other
namespaces (published packages, /whisk.system for everyone), and stock's refusals."""

from __future__ import annotations

import pytest

from front.entities import annotation
from front.identities import GUEST_AUTH, SYSTEM, Identities, basic_auth
from tests.integration.front.conftest import NS, invoke, put_action

ALICE_KEY = "5b1e3a2c-0d3f-4c55-9a11-2b7c6d8e9f00:" + "alicesecret" * 6
ALICE = {"Authorization": basic_auth(ALICE_KEY)}
IDENTITIES = Identities.parse(
    [f"guest={GUEST_AUTH}", f"whisk.system={SYSTEM.authkey['api_key']}", f"alice={ALICE_KEY}"]
)
ALICE_NS = "/api/v1/namespaces/alice"

ECHO = "def main(a):\n    return {k: v for k, v in a.items() if not k.startswith('__')}\n"
SYSTEM_NS = "/api/v1/namespaces/whisk.system"


def params(**values) -> list[dict]:
    return [{"key": k, "value": v} for k, v in values.items()]


async def test_package_parameters_are_merged_under_action_and_invocation(live):
    status, pkg = await live.call(
        "PUT", f"{NS}/packages/tools", json={"parameters": params(a=1, b=1, c=1)}
    )
    assert status == 200, pkg
    assert pkg["binding"] == {} and pkg["namespace"] == "guest"
    await put_action(live, "tools/show", ECHO, parameters=params(b=2, c=2))
    status, rec = await invoke(live, "tools/show", {"c": 3})
    assert status == 200, rec
    assert rec["response"]["result"] == {"a": 1, "b": 2, "c": 3}
    assert annotation(rec, "path") == "guest/tools/show"
    status, action = await live.call("GET", f"{NS}/actions/tools/show")
    assert status == 200 and {p["key"]: p["value"] for p in action["parameters"]} == {
        "a": 1,
        "b": 2,
        "c": 2,
    }
    assert action["namespace"] == "guest/tools"
    status, got = await live.call("GET", f"{NS}/packages/tools")
    assert [a["name"] for a in got["actions"]] == ["show"] and got["feeds"] == []
    status, listed = await live.call("GET", f"{NS}/actions/tools/")
    assert [a["name"] for a in listed] == ["show"]
    status, listed = await live.call("GET", f"{NS}/actions")
    assert "show" in [a["name"] for a in listed]  # stock lists packaged actions too


async def test_a_binding_lays_its_parameters_over_the_package(live):
    await live.call("PUT", f"{NS}/packages/tools", json={"parameters": params(a=1, b=1)})
    await put_action(live, "tools/show", ECHO, parameters=params(b=2))
    status, binding = await live.call(
        "PUT",
        f"{NS}/packages/mytools",
        json={"binding": {"namespace": "_", "name": "tools"}, "parameters": params(a=9, b=9)},
    )
    assert status == 200, binding
    assert binding["binding"] == {"namespace": "guest", "name": "tools"}
    assert annotation(binding, "binding") == {"namespace": "guest", "name": "tools"}
    status, rec = await invoke(live, "mytools/show", {})
    assert status == 200, rec
    # binding over package, the action's own over both
    assert rec["response"]["result"] == {"a": 9, "b": 2}
    assert annotation(rec, "binding") == "guest/mytools"
    assert annotation(rec, "path") == "guest/tools/show"
    status, got = await live.call("GET", f"{NS}/packages/mytools")
    assert {p["key"]: p["value"] for p in got["parameters"]} == {"a": 9, "b": 9}
    assert [a["name"] for a in got["actions"]] == ["show"]
    status, listed = await live.call("GET", f"{NS}/packages")
    assert {p["name"]: p["binding"] for p in listed} == {
        "tools": False,
        "mytools": {"namespace": "guest", "name": "tools"},
    }
    status, body = await live.call(
        "PUT",
        f"{NS}/actions/mytools/other?overwrite=true",
        json={"exec": {"kind": "python:default", "code": ECHO}},
    )
    assert status == 400 and body["error"] == "Operation not permitted on package binding."
    status, body = await live.call(
        "PUT",
        f"{NS}/packages/tools?overwrite=true",
        json={"binding": {"namespace": "guest", "name": "mytools"}},
    )
    assert status == 409
    status, body = await live.call(
        "PUT", f"{NS}/packages/loop", json={"binding": {"namespace": "guest", "name": "mytools"}}
    )
    assert status == 400 and body["error"] == "Cannot bind to another package binding."
    status, body = await live.call(
        "PUT", f"{NS}/packages/ghost", json={"binding": {"namespace": "guest", "name": "nope"}}
    )
    assert status == 400
    assert body["error"] == "Binding references a package that does not exist."


async def share(live, ns: str, auth: dict, private_name: str = "private") -> None:
    for name, publish in (("public", True), (private_name, False)):
        status, _ = await live.call(
            "PUT",
            f"{ns}/packages/{name}",
            json={"publish": publish, "parameters": params(origin=name)},
            headers=auth,
        )
        assert status == 200
        status, _ = await live.call(
            "PUT",
            f"{ns}/actions/{name}/show",
            json={"exec": {"kind": "python:default", "code": ECHO}},
            headers=auth,
        )
        assert status == 200


@pytest.mark.front_options(identities=IDENTITIES)
async def test_published_packages_are_shared_with_other_namespaces(live):
    """alice publishes one package and keeps another private: guest may read and invoke the
    first and bind to it, and may neither see nor use the second."""
    await share(live, ALICE_NS, ALICE)
    status, rec = await invoke(live, "public/show", {"x": 1}, ns=ALICE_NS)
    assert status == 200 and rec["response"]["result"] == {"origin": "public", "x": 1}
    assert rec["namespace"] == "guest"  # the record belongs to the invoking subject
    status, body = await invoke(live, "private/show", {}, ns=ALICE_NS)
    assert status == 403 and "not authorized" in body["error"]
    status, body = await invoke(live, "missing/show", {}, ns=ALICE_NS)
    assert status == 403  # what may not be read does not say whether it exists
    assert (await live.call("GET", f"{ALICE_NS}/packages/public"))[0] == 200
    assert (await live.call("GET", f"{ALICE_NS}/packages/private"))[0] == 403
    assert (await live.call("PUT", f"{ALICE_NS}/packages/mine", json={}))[0] == 403
    assert (await live.call("GET", f"{ALICE_NS}/actions"))[0] == 403
    status, listed = await live.call("GET", f"{ALICE_NS}/packages")
    assert [p["name"] for p in listed] == ["public"]
    status, _ = await live.call(
        "PUT", f"{NS}/packages/bound", json={"binding": {"namespace": "alice", "name": "public"}}
    )
    assert status == 200
    status, rec = await invoke(live, "bound/show", {})
    assert status == 200 and rec["response"]["result"] == {"origin": "public"}
    status, body = await live.call(
        "PUT", f"{NS}/packages/sneaky", json={"binding": {"namespace": "alice", "name": "private"}}
    )
    assert status == 403
    # Unpublished later: the binding stops working.
    status, _ = await live.call(
        "PUT", f"{ALICE_NS}/packages/public?overwrite=true", json={"publish": False}, headers=ALICE
    )
    assert status == 200
    status, _ = await live.call("GET", f"{NS}/packages/bound")
    assert status == 403


async def test_whisk_system_is_readable_by_everyone(live):
    system = {"Authorization": basic_auth(SYSTEM.authkey["api_key"])}
    await share(live, SYSTEM_NS, system, private_name="unpublished")
    status, rec = await invoke(live, "unpublished/show", {"x": 1}, ns=SYSTEM_NS)
    assert status == 200 and rec["response"]["result"] == {"origin": "unpublished", "x": 1}
    status, listed = await live.call("GET", f"{SYSTEM_NS}/packages")
    assert {"public", "unpublished", "utils"} <= {p["name"] for p in listed}
    assert (await live.call("GET", f"{SYSTEM_NS}/actions"))[0] == 403  # not outside packages
    assert (await live.call("PUT", f"{SYSTEM_NS}/packages/mine", json={}))[0] == 403


async def test_whisk_system_utils_are_ready_to_use(live):
    status, utils = await live.call("GET", f"{SYSTEM_NS}/packages/utils")
    assert status == 200 and utils["publish"] is True
    actions = {a["name"]: a for a in utils["actions"]}
    assert {"echo", "split", "sort", "head", "cat", "date"} <= set(actions)
    assert annotation(actions["sort"], "description").startswith("Sorts `lines`")
    status, rec = await invoke(live, "utils/echo", {"hi": 1}, ns=SYSTEM_NS)
    assert status == 200 and rec["response"]["result"] == {"hi": 1}
    status, seq = await live.call(
        "PUT",
        f"{NS}/actions/sorted",
        json={
            "exec": {
                "kind": "sequence",
                "components": ["/whisk.system/utils/split", "/whisk.system/utils/sort"],
            }
        },
    )
    assert status == 200, seq
    status, rec = await invoke(live, "sorted", {"payload": "c\na\nb"})
    assert status == 200 and rec["response"]["result"] == {"lines": ["a", "b", "c"], "length": 3}


async def test_deleting_a_package(live):
    await live.call("PUT", f"{NS}/packages/full", json={})
    await put_action(live, "full/one", ECHO)
    await put_action(live, "full/two", ECHO)
    status, body = await live.call("DELETE", f"{NS}/packages/full")
    assert status == 409
    assert body["error"] == (
        "Package not empty (contains 2 entities). Set force param or delete package contents."
    )
    status, _ = await live.call("DELETE", f"{NS}/packages/full?force=true")
    assert status == 200
    status, _ = await live.call("GET", f"{NS}/actions/full/one")
    assert status in (403, 404)
    status, listed = await live.call("GET", f"{NS}/actions")
    assert listed == []


async def test_package_refusals(live):
    status, body = await live.call("PUT", f"{NS}/packages/default", json={})
    assert status == 400 and body["error"] == "Package name 'default' is reserved."
    await live.call("PUT", f"{NS}/packages/p", json={})
    status, _ = await live.call("PUT", f"{NS}/packages/p", json={})
    assert status == 409
    status, body = await live.call(
        "PUT", f"{NS}/actions/nopkg/a", json={"exec": {"kind": "python:default", "code": ECHO}}
    )
    assert status == 404
    await put_action(live, "plain", ECHO)
    status, body = await live.call("GET", f"{NS}/packages/plain")
    assert status == 409
    status, body = await live.call("POST", f"{NS}/packages/p", json={})
    assert status == 405
