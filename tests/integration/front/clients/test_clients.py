"""Real OpenWhisk clients, written by others, against both deployments: the Adobe I/O Runtime
CLI (`aio runtime ...`, an OpenWhisk CLI; the `wsk` Go module is refused by the module proxy
here) and Apache's `openwhisk` npm client."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from harness.processes import ROOT, Platform
from tests.integration.front.clients.clients import Cli, run_node

pytestmark = pytest.mark.services

NODE_CLIENTS = ROOT / ".cache" / "node" / "node_modules"
PY_ACTION = (
    'def main(a):\n    print("cli log")\n'
    '    return {"msg": a.get("greeting", "Hi") + " " + a.get("name", "x")}\n'
)
JS_ACTION = "function main(p) { console.log('node log'); return {echo: p}; }\n"


def zipped_action() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("__main__.py", "import helper\ndef main(a):\n    return {'zip': helper.X}\n")
        z.writestr("helper.py", "X = 'from a zip'\n")
    return buf.getvalue()


def test_cli_flow(platform: Platform, aio_cli, tmp_path):
    cli = Cli(aio_cli, platform, tmp_path)
    (tmp_path / "hello.py").write_text(PY_ACTION)
    (tmp_path / "echo.js").write_text(JS_ACTION)
    (tmp_path / "action.zip").write_bytes(zipped_action())
    auth = "--use-runtime-auth"
    cli(
        "action",
        "create",
        "clihello",
        str(tmp_path / "hello.py"),
        "--kind",
        "python:3.11",
        "-p",
        "greeting",
        "Hello",
        auth,
    )
    cli("action", "create", "echo", str(tmp_path / "echo.js"), auth)  # kind from the extension
    assert cli.json("action", "invoke", "clihello", "--result", "-p", "name", "CLI") == {
        "msg": "Hello CLI"
    }
    record = cli.json("action", "invoke", "echo", "--blocking", "-p", "n", "1")
    assert record["response"]["success"] is True and record["response"]["result"] == {
        "echo": {"n": "1"}
    }
    aid = cli.json("action", "invoke", "clihello", "-p", "name", "async")["activationId"]
    listing = cli("action", "list")
    assert "clihello" in listing and "echo" in listing
    got = cli.json("action", "get", "clihello")
    assert got["parameters"] == [{"key": "greeting", "value": "Hello"}]
    cli("action", "update", "clihello", "--param", "greeting", "Hey", auth)
    assert cli.json("action", "invoke", "clihello", "--result", "-p", "name", "U") == {
        "msg": "Hey U"
    }
    cli("action", "create", "zipped", str(tmp_path / "action.zip"), "--kind", "python:3.11", auth)
    assert cli.json("action", "invoke", "zipped", "--result") == {"zip": "from a zip"}
    activation = cli.json("activation", "get", aid)
    assert activation["activationId"] == aid
    assert any(line.endswith("stdout: cli log") for line in activation["logs"])
    assert cli.json("activation", "result", aid)["result"] == {"msg": "Hello async"}
    assert aid in cli("activation", "list", "--limit", "50")
    cli("action", "create", "boxed", "--docker", "openwhisk/dockerskeleton", auth)
    boxed = cli.json("action", "get", "boxed")
    assert (
        boxed["exec"]["kind"] == "blackbox" and boxed["exec"]["image"] == "openwhisk/dockerskeleton"
    )
    cli(
        "action",
        "create",
        "web",
        str(tmp_path / "hello.py"),
        "--kind",
        "python:3.11",
        "--web",
        "true",
        auth,
    )
    status, body = platform.rest("GET", "/api/v1/web/guest/default/web.json?name=Web")
    assert (status, body) == (200, {"msg": "Hi Web"})
    for name in ("clihello", "echo", "zipped", "boxed", "web"):
        cli("action", "delete", name, auth)
    assert "clihello" not in cli("action", "list")
    cli("action", "get", "clihello", ok=False)


def test_js_client_flow(platform: Platform, tmp_path):
    if not (NODE_CLIENTS / "openwhisk").is_dir():
        pytest.fail("the openwhisk npm client is missing: run `scripts/install.sh openwhisk-js`")
    (tmp_path / "action.zip").write_bytes(zipped_action())
    flow = Path(__file__).with_name("js_flow.js")
    out = run_node(flow, platform, NODE_CLIENTS, 180, str(tmp_path / "action.zip"))
    assert out["result"] == {"msg": "Hello JS"}
    assert out["blockingStatus"] == "success"
    assert out["activationResult"] == {"msg": "Hello NB"}
    assert out["resultOnly"] == {"msg": "Hello NB"}
    assert any(line.endswith("stdout: js-flow log") for line in out["logs"])
    assert "jshello" in out["list"] and out["activations"] >= 3
    assert out["updated"] == {"msg": "Hey U"}
    assert out["zip"] == {"zip": "from a zip"}
    assert out["missing"]["status"] == 404
    assert out["badKind"]["status"] == 400
    assert out["deleted"] == "jshello" and out["afterDelete"]["status"] == 404


def test_bad_input_gets_openwhisk_codes(platform: Platform):
    ns = "/api/v1/namespaces/_"
    status, body = platform.rest("GET", f"{ns}/actions", auth="nobody:wrong")
    assert status == 401 and body["error"] == "The supplied authentication is invalid."
    status, body = platform.rest("PUT", f"{ns}/actions/x", raw=b"{broken")
    assert status == 400 and "malformed" in body["error"] and body["code"]
    status, body = platform.rest(
        "PUT", f"{ns}/actions/x", {"exec": {"kind": "cobol:1", "code": "x"}}
    )
    assert status == 400
    status, body = platform.rest(
        "PUT", f"{ns}/actions/big", {"exec": {"kind": "nodejs:20", "code": "x" * (49 << 20)}}
    )
    assert status == 413
    assert (
        platform.rest(
            "PUT",
            f"{ns}/actions/small?overwrite=true",
            {"exec": {"kind": "nodejs:20", "code": JS_ACTION}},
        )[0]
        == 200
    )
    status, body = platform.rest(
        "POST", f"{ns}/actions/small?blocking=true", raw=b'{"a":"' + b"x" * (1 << 20) + b'"}'
    )
    assert status == 413
    status, body = platform.rest("POST", f"{ns}/actions/none?blocking=true", {})
    assert status == 404 and body["error"] == "The requested resource does not exist."
    # After all that the platform still serves.
    status, body = platform.rest("POST", f"{ns}/actions/small?blocking=true&result=true", {"k": 1})
    assert (status, body) == (200, {"echo": {"k": 1}})
