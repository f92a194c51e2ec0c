"""The REST API's logic on an in-process platform with the simulated backend (fast, no
external services). Real clients against real services are in tests/integration/front/clients."""

import asyncio

import pytest

from containers.simulated import SimulatedBackend
from tests.front_platform import platform
from whisk.bus.memory import MemoryBus
from whisk.store.embedded import EmbeddedStore

NS = "/api/v1/namespaces/_"


@pytest.fixture
async def p(tmp_path):
    store = EmbeddedStore(tmp_path / "db.sqlite3")
    async with platform(
        bus=MemoryBus(),
        store=store,
        backend=SimulatedBackend(),
        state_dir=tmp_path,
        policy="fifo",
        action_cores=(0,),
    ) as plat:
        yield plat
    await store.close()


async def test_action_crud_invoke_and_activations(p):
    body = {"exec": {"kind": "python:default", "code": "def main(a): return a"}}
    status, action = await p.call("PUT", f"{NS}/actions/hello", json=body)
    assert status == 200, action
    # python:default is the manifest's default python kind: python:3.10, as in the stock one
    assert action["exec"]["kind"] == "python:3.10" and action["version"] == "0.0.1"
    status, _ = await p.call("PUT", f"{NS}/actions/hello", json=body)
    assert status == 409
    status, action = await p.call(
        "PUT", f"{NS}/actions/hello?overwrite=true", json={"parameters": [{"key": "a", "value": 1}]}
    )
    assert status == 200 and action["version"] == "0.0.2"
    assert action["exec"]["kind"] == "python:3.10"
    status, got = await p.call("GET", f"{NS}/actions/hello")
    assert got["exec"]["code"] == "def main(a): return a"
    assert got["parameters"] == [{"key": "a", "value": 1}]
    status, listing = await p.call("GET", f"{NS}/actions")
    assert [a["name"] for a in listing] == ["hello"]

    status, rec = await p.call("POST", f"{NS}/actions/hello?blocking=true", json={"x": 2})
    assert status == 200 and rec["response"]["success"] is True
    assert rec["response"]["status"] == "success" and "statusCode" not in rec["response"]
    aid = rec["activationId"]
    status, result = await p.call("POST", f"{NS}/actions/hello?blocking=true&result=true")
    assert status == 200 and result == {"ok": True}
    status, ack = await p.call("POST", f"{NS}/actions/hello")
    assert status == 202 and len(ack["activationId"]) == 32

    for _ in range(100):  # the record is stored just after the result is sent
        status, got = await p.call("GET", f"{NS}/activations/{aid}")
        if status == 200:
            break
        await asyncio.sleep(0.05)
    assert status == 200 and got["activationId"] == aid
    status, logs = await p.call("GET", f"{NS}/activations/{aid}/logs")
    assert logs == {"logs": []}
    status, res = await p.call("GET", f"{NS}/activations/{aid}/result")
    assert res["result"] == {"ok": True} and res["success"] is True
    status, listing = await p.call("GET", f"{NS}/activations?name=hello&limit=10")
    assert status == 200 and aid in [a["activationId"] for a in listing]
    status, deleted = await p.call("DELETE", f"{NS}/actions/hello")
    assert status == 200 and deleted["name"] == "hello"
    status, err = await p.call("GET", f"{NS}/actions/hello")
    assert status == 404 and err["error"] == "The requested resource does not exist."


async def test_errors_have_openwhisk_codes_and_bodies(p):
    status, err = await p.call(
        "GET", f"{NS}/actions", headers={"Authorization": "Basic Zm9vOmJhcg=="}
    )
    assert status == 401 and err["error"] == "The supplied authentication is invalid."
    assert "code" in err
    status, err = await p.call("PUT", f"{NS}/actions/x", data=b"{not json")
    assert status == 400 and "malformed" in err["error"]
    status, err = await p.call(
        "PUT", f"{NS}/actions/x", json={"exec": {"kind": "cobol:1", "code": "x"}}
    )
    assert status == 400 and "cobol:1" in err["error"]
    status, err = await p.call("POST", f"{NS}/actions/missing?blocking=true")
    assert status == 404
    status, err = await p.call(
        "PUT", f"{NS}/actions/big", json={"exec": {"kind": "nodejs:20", "code": "x" * (49 << 20)}}
    )
    assert status == 413
    body = {"exec": {"kind": "nodejs:20", "code": "function main(p){return p}"}}
    assert (await p.call("PUT", f"{NS}/actions/n", json=body))[0] == 200
    status, err = await p.call("POST", f"{NS}/actions/n", data=b'{"a":"' + b"x" * (1 << 20) + b'"}')
    assert status == 413
    status, err = await p.call("GET", "/api/v1/namespaces/other/actions")
    assert status == 403
    status, err = await p.call("PUT", f"{NS}/actions/bad..name%2F..%2Fx", json=body)
    assert status == 400


async def test_web_action_json(p):
    body = {
        "exec": {"kind": "python:3.11", "code": "def main(a): return a"},
        "annotations": [{"key": "web-export", "value": True}],
    }
    assert (await p.call("PUT", f"{NS}/actions/web", json=body))[0] == 200
    status, result = await p.call("GET", "/api/v1/web/guest/default/web.json?x=1")
    assert status == 200 and result == {"ok": True}
    assert (await p.call("PUT", f"{NS}/actions/hidden", json={"exec": body["exec"]}))[0] == 200
    status, _ = await p.call("GET", "/api/v1/web/guest/default/hidden.json")
    assert status == 404
