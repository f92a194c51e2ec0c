"""Real clients, written by others, through the whole entity surface (issue #17): sequences,
packages (bindings, shared packages), triggers and rules, activation list filters, namespaces.

- Apache's `openwhisk` npm client, every entity kind (js_entities.js prints what it saw), and
  its `routes` through the API gateway (js_routes.js);
- the Adobe I/O Runtime CLI (`aio runtime ...`): sequences, packages, bindings, triggers,
  rules, and `aio runtime deploy` of a wskdeploy manifest;
- the Serverless Framework v3 with the serverless-openwhisk plugin: deploy, invoke, remove;
- the `wsk` CLI itself where a binary exists (WSK_BIN; the Go proxy refuses it here).

The expected values follow the stock controller's semantics (Packages/Triggers/Rules/Actions/
SequenceActions/Activations.scala); every client gets its own HOME.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.processes import Platform
from tests.integration.front.clients.clients import Cli, run_node

pytestmark = pytest.mark.services

HERE = Path(__file__).resolve().parent
NS = "/api/v1/namespaces/_"

# Node.js actions (nodejs:20). CLI parameters arrive as strings, hence Number().
INC = "function main(p) { return { n: Number(p.n || 0) + Number(p.step || 1) }; }\n"
DOUBLE = "function main(p) { return { n: Number(p.n) * 2 }; }\n"
GREET = (
    "function main(p) {\n"
    "  return { greeting: p.greeting, punct: p.punct, lang: p.lang, name: p.name };\n}\n"
)
ONEVENT = "function main(p) { return { from: p.from, fired: p.fired }; }\n"
PAGE = "function main(p) { return { page: 'web ' + p.name, greeting: p.greeting }; }\n"


def rest(platform: Platform, method: str, path: str, body: object = None) -> tuple[int, Any]:
    """``Platform.rest`` with the body typed for indexing."""
    return platform.rest(method, path, body)


def wait_for(fn: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def get_activation(platform: Platform, aid: str) -> dict[str, Any]:
    def fetch() -> dict[str, Any] | None:
        status, body = rest(platform, "GET", f"{NS}/activations/{aid}")
        return body if status == 200 and isinstance(body, dict) else None

    return wait_for(fetch, f"activation {aid}")


def rule_results(platform: Platform, trigger_aid: str, rules: int) -> dict[str, dict[str, Any]]:
    """The trigger activation's log entries (one JSON object per rule), by rule name."""

    def fetch() -> list[str] | None:
        status, body = rest(platform, "GET", f"{NS}/activations/{trigger_aid}")
        if status != 200 or not isinstance(body, dict):
            return None
        logs = body.get("logs") or []
        return logs if len(logs) >= rules else None

    logs = wait_for(fetch, f"trigger activation {trigger_aid} with {rules} rule results")
    return {entry["rule"]: entry for entry in map(json.loads, logs)}


def activation_ids(platform: Platform, name: str) -> list[str]:
    status, body = rest(platform, "GET", f"{NS}/activations?name={name}&limit=200")
    assert status == 200, body
    assert isinstance(body, list)
    return [a["activationId"] for a in body]


def annotation_map(entity: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in entity.get("annotations") or []}


# ---------------------------------------------------------------------------------------------
# The openwhisk npm client


@pytest.fixture(scope="module")
def js_run(platform: Platform, node_modules: Path) -> dict[str, Any]:
    """js_entities.js run once per deployment; the tests below each check one part of it."""
    out: dict[str, Any] = run_node(HERE / "js_entities.js", platform, node_modules, 600)
    return out


def test_js_sequences(js_run: dict[str, Any]):
    """Sequences: components resolved to the caller's namespace, results composed, one
    activation per component caused by the sequence's, stops at the first error."""
    out = js_run
    assert out["seqExec"] == {"kind": "sequence", "components": ["/guest/jsinc", "/guest/jsdouble"]}
    assert out["seqResult"] == {"n": 8}
    record = out["seqRecord"]
    assert record["result"] == {"n": 14} and record["success"] is True
    assert len(record["logs"]) == 2
    ann = annotation_map(record)
    assert ann["kind"] == "sequence" and ann["topmost"] is True and ann["path"] == "guest/jsseq"
    components = out["seqComponents"]
    assert [c["name"] for c in components] == ["jsinc", "jsdouble"]
    assert [c["result"] for c in components] == [{"n": 7}, {"n": 14}]
    assert all(c["cause"] == out["seqId"] and c["causedBy"] == "sequence" for c in components)
    assert out["seqFail"] == {
        "status": 502,
        "result": {"error": "boom at 2"},
        "success": False,
        "logs": out["seqFail"]["logs"],
    }
    assert len(out["seqFail"]["logs"]) == 2  # jsinc, jsfail; jsdouble never ran
    assert out["seqNonBlocking"] == {"n": 22}
    assert out["seqOfSeq"] == {"n": 5}


def test_js_packages_and_bindings(js_run: dict[str, Any]):
    """Packages and bindings: parameters package < binding < action < invocation."""
    out = js_run
    assert out["pkgInvoke"] == {"greeting": "Hello", "punct": "!", "lang": "en", "name": "JS"}
    assert out["pkgGet"]["actions"] == ["greet"] and not out["pkgGet"]["binding"]
    assert out["bindInvoke"] == {"greeting": "Howdy", "punct": "!", "lang": "en", "name": "B"}
    assert out["bindInvokeOverride"] == {"greeting": "Yo", "punct": "!", "lang": "en", "name": "B"}
    assert out["bindGet"] == {
        "binding": {"namespace": "guest", "name": "jspkg"},
        "parameters": {"greeting": "Howdy", "punct": ".", "lang": "en"},
        "actions": ["greet"],
    }
    assert out["pkgList"]["jspkg"] is False and out["pkgList"]["jsbind"] is True
    assert out["bindMissing"]["status"] == 400
    assert out["pkgNotEmptyDelete"]["status"] == 409
    assert {"jsinc", "jsdouble", "jsseq", "greet"} <= set(out["actionsInList"])


def test_js_shared_packages(js_run: dict[str, Any]):
    """A package the guest publishes: another namespace (whisk.system) can read, list, invoke
    and bind it; the guest's private package is none of these for it (403, stock
    entitlement: PackageCollection)."""
    out = js_run
    assert out["sharedGet"] == {"publish": True, "actions": ["greet"]}
    assert out["sharedList"]["ok"] == ["jsshared"]
    assert out["privateGet"] == 403
    assert out["sharedInvoke"] == {"ok": {"greeting": "Shared", "punct": "?", "name": "G"}}
    assert out["privateInvoke"] == 403
    assert out["sharedBind"]["ok"]["binding"] == {"namespace": "guest", "name": "jsshared"}
    assert out["sharedBindInvoke"] == {"ok": {"greeting": "Mine", "punct": "?", "name": "G"}}
    assert out["privateBind"] == 403


def test_js_triggers_and_rules(js_run: dict[str, Any]):
    """Triggers and rules: fire, the trigger activation's rule results, disable/enable."""
    out = js_run
    assert out["ruleCreated"]["status"] == "active"
    assert out["ruleGet"] == {
        "status": "active",
        "trigger": {"path": "guest", "name": "jstrig"},
        "action": {"path": "guest", "name": "jsonevent"},
    }
    assert {"jsrule", "jsseqrule"} <= set(out["rulesList"])
    assert out["ruleBadAction"] == 400
    fired = out["triggerActivation"]
    assert fired["name"] == "jstrig"
    assert fired["result"] == {"fired": 1, "both": "fire", "n": 2}  # the fire's payload
    logs = {entry["rule"]: entry for entry in fired["logs"]}
    assert set(logs) == {"guest/jsrule", "guest/jsseqrule"}
    assert logs["guest/jsrule"]["action"] == "guest/jsonevent"
    assert logs["guest/jsseqrule"]["action"] == "guest/jsseq"
    assert all(e["success"] is True and e["statusCode"] == 0 for e in logs.values())
    # The trigger's parameters under the fire's.
    assert out["ruleResults"]["guest/jsrule"] == {"from": "trigger", "both": "fire", "fired": 1}
    assert out["ruleResults"]["guest/jsseqrule"] == {"n": 6}
    assert logs["guest/jsrule"]["activationId"] in out["oneventListed"]
    assert out["ruleDisabled"] == "inactive"
    assert out["triggerRules"] == {"guest/jsrule": "inactive", "guest/jsseqrule": "inactive"}
    # No active rule: nothing runs (stock: 204, no activation id).
    assert "status" not in out["firedDisabled"], out["firedDisabled"]
    assert not (out["firedDisabled"].get("ok") or {}).get("activationId")
    assert out["afterDisabledFire"] == 0
    assert out["ruleEnabled"] == "active"
    assert out["thirdFire"] == {
        "rules": ["guest/jsrule"],
        "result": {"from": "updated", "fired": 3},
    }


def test_js_activation_list_filters(js_run: dict[str, Any]):
    """Activation list filters: name, limit, skip, since, upto, docs, count."""
    out = js_run
    ids = out["allIds"]
    assert out["incNames"] == ["jsinc"] and out["incNewestFirst"]
    assert len(set(out["starts"])) == 3, out["starts"]
    assert ids[:3] == out["mine"]  # the three latest invocations, newest first
    assert out["limit1"] == [ids[0]] == [out["newestId"]]
    assert out["skip1"] == ids[1:]
    assert out["since"] == ids[:2]
    assert out["upto"] == ids[1:]
    assert out["docsResult"] == {"n": 103}
    assert out["count"] == {"activations": out["incTotal"]}


def test_js_namespaces_and_deletes(js_run: dict[str, Any]):
    """Namespaces (list, the four collections) and deleting everything again."""
    out = js_run
    assert out["namespaces"] == ["guest"]
    listed = out["namespaceGet"]
    assert {"jsinc", "jsdouble", "jsseq", "jsonevent"} <= set(listed["actions"])
    assert {"jspkg", "jsbind", "jsshared", "jsprivate"} <= set(listed["packages"])
    assert "jstrig" in listed["triggers"] and {"jsrule", "jsseqrule"} <= set(listed["rules"])

    assert out["firedDeleted"] == 404
    assert out["leftover"] == []


SHOP_OPERATIONS = [("/items", "get"), ("/items", "post"), ("/items/{id}", "get")]


def test_js_routes(platform: Platform, node_modules: Path):
    """The API gateway (``wsk api``'s endpoints) with the npm client's ``ow.routes``: create
    (json and http response types, a path parameter), list with filters, get by base path and
    by name, delete by operation and whole, what another namespace sees, and calls through the
    gateway URL the create answered (js_routes.js)."""
    out: dict[str, Any] = run_node(HERE / "js_routes.js", platform, node_modules, 300)
    uuid = platform.auth.split(":")[0]
    assert out["created"] == {
        "gwApiUrl": f"{platform.url}/api/{uuid}/jsshop",
        "title": "JS Shop",
        "basePath": "/jsshop",
    }
    assert out["pathParameters"] == [["id", "path"]]
    assert out["nonWeb"] == {
        "status": 400,
        "error": "Action '/guest/jsplain' is not a web action. Issue 'wsk action update "
        '"/guest/jsplain" --web true\' to convert the action to a web action.',
    }
    assert out["missingAction"]["status"] == 404

    shop = [f"/jsshop {path} {verb} jsshop" for path, verb in SHOP_OPERATIONS]
    assert [o for o in out["list"] if o.startswith("/jsshop ")] == shop
    assert out["listFiltered"] == ["/jsshop /items post jsshop"]
    assert out["get"] == shop and out["getByName"] == shop
    assert not [o for o in out["otherNamespaceList"] if o.startswith("/jsshop ")]
    assert out["otherNamespaceDelete"]["status"] == 404

    # json: the whole result; http: the action's status, headers and body, with the path.
    json_call = out["callJson"]
    assert json_call["status"] == 200 and json_call["cors"] == "*"
    assert json_call["body"]["seen"] == {"method": "get", "path": "", "name": "pen", "qty": None}
    assert out["callHttp"] == {
        "status": 201,
        "shop": "yes",
        "cors": "*",
        "body": {"method": "post", "path": "/jsshop/items", "name": "ink", "qty": 3},
    }
    assert out["callParam"]["status"] == 201
    assert out["callParam"]["body"]["path"] == "/jsshop/items/42"
    assert out["callMissing"]["status"] == 404

    assert out["deleteOperation"] == {}
    assert out["afterDeleteOperation"] == [shop[0], shop[2]]
    assert out["callDeleted"]["status"] == 405
    assert out["deleteApi"] == {}
    assert not [o for o in out["afterDelete"] if o.startswith("/jsshop ")]
    assert out["deleteAgain"] == {"status": 404, "error": "API '/jsshop' does not exist."}
    assert out["callAfterDelete"]["status"] == 404


# ---------------------------------------------------------------------------------------------
# The Adobe I/O Runtime CLI


def table_rows(text: str) -> dict[str, list[str]]:
    """An aio table (ux.table) as {last column: the row's cells}."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if cells and not line.lstrip().startswith("─"):
            rows[cells[-1]] = cells
    return rows


# One deployment: each of its ~40 commands starts the CLI (a minute in all); the same front
# code serves both, and the JS client's tests cover the entities on both.
@pytest.mark.parametrize("platform", ["kafka"], indirect=True)
def test_aio_cli_entities(platform: Platform, aio_cli, tmp_path):
    aio = Cli(aio_cli, platform, tmp_path, namespace="guest")
    for name, code in {"inc": INC, "double": DOUBLE, "greet": GREET, "onevent": ONEVENT}.items():
        (tmp_path / f"{name}.js").write_text(code)
    kind = ("--kind", "nodejs:20")

    # Sequences.
    aio("action", "create", "aioinc", str(tmp_path / "inc.js"), *kind)
    aio("action", "create", "aiodouble", str(tmp_path / "double.js"), *kind)
    aio("action", "create", "aioseq", "--sequence", "aioinc,aiodouble")
    seq = aio.json("action", "get", "aioseq")
    assert seq["exec"]["kind"] == "sequence"
    assert seq["exec"]["components"] == ["/guest/aioinc", "/guest/aiodouble"]
    assert aio.json("action", "invoke", "aioseq", "--result", "-p", "n", "3") == {"n": 8}
    record = aio.json("action", "invoke", "aioseq", "--blocking", "-p", "n", "1")
    assert record["response"]["result"] == {"n": 4} and len(record["logs"]) == 2

    # Packages and a binding.
    aio("package", "create", "aiopkg", "-p", "greeting", "Hello", "-p", "lang", "en")
    aio("action", "create", "aiopkg/greet", str(tmp_path / "greet.js"), *kind, "-p", "punct", "!")
    aio("package", "bind", "aiopkg", "aiobind", "-p", "greeting", "Howdy")
    assert aio.json("action", "invoke", "aiopkg/greet", "--result", "-p", "name", "A") == {
        "greeting": "Hello",
        "punct": "!",
        "lang": "en",
        "name": "A",
    }
    assert aio.json("action", "invoke", "aiobind/greet", "--result", "-p", "name", "A") == {
        "greeting": "Howdy",
        "punct": "!",
        "lang": "en",
        "name": "A",
    }
    bound = aio.json("package", "get", "aiobind")
    assert bound["binding"] == {"namespace": "guest", "name": "aiopkg"}
    assert [a["name"] for a in aio.json("package", "get", "aiopkg")["actions"]] == ["greet"]
    rows = table_rows(aio("package", "list"))
    assert "package" in rows["aiopkg"] and "binding" not in rows["aiopkg"]
    assert "binding" in rows["aiobind"]

    # A trigger with a rule.
    aio("action", "create", "aioevent", str(tmp_path / "onevent.js"), *kind)
    aio("trigger", "create", "aiotrig", "-p", "from", "trigger")
    aio("rule", "create", "aiorule", "aiotrig", "aioevent")
    assert aio("rule", "status", "aiorule").strip() == "active"
    rule = aio.json("rule", "get", "aiorule")
    assert rule["action"] == {"path": "guest", "name": "aioevent"} and rule["status"] == "active"
    tid = aio.json("trigger", "fire", "aiotrig", "-p", "fired", "yes")["activationId"]
    results = rule_results(platform, tid, 1)
    assert results["guest/aiorule"]["success"] is True
    aid = results["guest/aiorule"]["activationId"]
    get_activation(platform, aid)
    assert aio.json("activation", "result", aid)["result"] == {"from": "trigger", "fired": "yes"}
    # The activation tables render (every record has the annotations the table reads) and
    # list the rule's action and the trigger's own activation.
    assert aid in aio("activation", "list", "aioevent")
    listing = aio("activation", "list", "--limit", "50")
    assert aid in listing and tid in listing
    assert [a["activationId"] for a in aio.json("activation", "list", "aioevent", "--json")] == [
        aid
    ]
    assert "activation" in aio("activation", "list", "aioevent", "--count")

    # Disabled: a fire runs nothing; enabled again: it does.
    aio("rule", "disable", "aiorule")
    assert aio("rule", "status", "aiorule").strip() == "inactive"
    aio("trigger", "fire", "aiotrig", "-p", "fired", "no")
    time.sleep(3)
    assert activation_ids(platform, "aioevent") == [aid]
    aio("rule", "enable", "aiorule")
    assert aio("rule", "status", "aiorule").strip() == "active"
    tid2 = aio.json("trigger", "fire", "aiotrig", "-p", "fired", "again")["activationId"]
    aid2 = rule_results(platform, tid2, 1)["guest/aiorule"]["activationId"]
    assert get_activation(platform, aid2)["response"]["result"] == {
        "from": "trigger",
        "fired": "again",
    }

    # The namespace's entity list and the rule list (which reads each rule's status).
    everything = aio("namespace", "get")
    for entity in ("/guest/aiopkg", "/guest/aiobind", "/guest/aioseq", "/guest/aiopkg/greet"):
        assert entity in everything, everything
    assert "aiotrig" in everything and "aiorule" in everything
    assert "active" in table_rows(aio("rule", "list"))["aiorule"]
    assert aio("namespace", "list").split()[-1] == "guest"

    # Deletes, dependents first.
    aio("rule", "delete", "aiorule")
    aio("trigger", "delete", "aiotrig")
    for action in ("aioseq", "aioinc", "aiodouble", "aioevent", "aiopkg/greet"):
        aio("action", "delete", action)
    aio("package", "delete", "aiobind")
    aio("package", "delete", "aiopkg")
    aio("package", "get", "aiopkg", ok=False)
    aio("trigger", "get", "aiotrig", ok=False)
    aio("rule", "get", "aiorule", ok=False)


MANIFEST = """\
packages:
  dbase:
    inputs:
      greeting: Hello
    actions:
      greet:
        function: greet.js
        runtime: nodejs:20
        inputs:
          punct: "!"
      inc:
        function: inc.js
        runtime: nodejs:20
      double:
        function: double.js
        runtime: nodejs:20
      onevent:
        function: onevent.js
        runtime: nodejs:20
      page:
        function: page.js
        runtime: nodejs:20
        web: 'yes'
    sequences:
      calc:
        actions: inc, double
    triggers:
      dtrig:
        inputs:
          from: manifest
    rules:
      drule:
        trigger: dtrig
        action: onevent
  dbound:
    dependencies:
      dbind:
        location: /guest/dbase
        inputs:
          greeting: Bound
"""


def test_aio_deploy_manifest(platform: Platform, aio_cli, tmp_path):
    """`aio runtime deploy -m manifest.yml` (wskdeploy's manifest format): packages with
    actions, a sequence, a trigger with a rule, a web action, a binding; then undeploy."""
    aio = Cli(aio_cli, platform, tmp_path, namespace="guest")
    files = {"greet": GREET, "inc": INC, "double": DOUBLE, "onevent": ONEVENT, "page": PAGE}
    for name, code in files.items():
        (tmp_path / f"{name}.js").write_text(code)
    (tmp_path / "manifest.yml").write_text(MANIFEST)
    out = aio("deploy", "-m", "manifest.yml")
    assert "Success: Deployment completed successfully." in out, out

    status, actions = rest(platform, "GET", f"{NS}/actions?limit=0")
    assert status == 200
    deployed = {f"{a['namespace']}/{a['name']}" for a in actions}
    assert {f"guest/dbase/{n}" for n in ("greet", "inc", "double", "onevent", "page", "calc")} <= (
        deployed
    )
    status, pkg = rest(platform, "GET", f"{NS}/packages/dbase")
    assert status == 200 and {"greet", "calc", "page"} <= {a["name"] for a in pkg["actions"]}
    status, calc = rest(platform, "GET", f"{NS}/actions/dbase/calc")
    assert calc["exec"]["components"] == ["/guest/dbase/inc", "/guest/dbase/double"]

    assert aio.json("action", "invoke", "dbase/greet", "--result", "-p", "name", "D") == {
        "greeting": "Hello",
        "punct": "!",
        "name": "D",
    }
    assert aio.json("action", "invoke", "dbase/calc", "--result", "-p", "n", "3") == {"n": 8}
    assert aio.json("action", "invoke", "dbind/greet", "--result", "-p", "name", "D") == {
        "greeting": "Bound",
        "punct": "!",
        "name": "D",
    }
    assert aio.json("package", "get", "dbind")["binding"] == {"namespace": "guest", "name": "dbase"}

    rule = aio.json("rule", "get", "drule")
    assert rule["status"] == "active"
    assert rule["trigger"] == {"path": "guest", "name": "dtrig"}
    assert rule["action"] == {"path": "guest/dbase", "name": "onevent"}
    tid = aio.json("trigger", "fire", "dtrig", "-p", "fired", "deploy")["activationId"]
    aid = rule_results(platform, tid, 1)["guest/drule"]["activationId"]
    assert get_activation(platform, aid)["response"]["result"] == {
        "from": "manifest",
        "fired": "deploy",
    }

    # The web action answers over /api/v1/web with the package's parameters.
    status, body = rest(platform, "GET", "/api/v1/web/guest/dbase/page.json?name=W")
    assert (status, body) == (200, {"page": "web W", "greeting": "Hello"})

    # Deploying again updates in place (every PUT is overwrite=true).
    aio("deploy", "-m", "manifest.yml")
    assert aio.json("action", "invoke", "dbase/calc", "--result", "-p", "n", "1") == {"n": 4}

    aio("deploy", "undeploy", "-m", "manifest.yml")
    for path in ("actions/dbase/greet", "packages/dbase", "packages/dbind", "triggers/dtrig"):
        assert rest(platform, "GET", f"{NS}/{path}")[0] == 404, path
    assert rest(platform, "GET", f"{NS}/rules/drule")[0] == 404


# ---------------------------------------------------------------------------------------------
# The Serverless Framework (v3) with serverless-openwhisk

SERVERLESS_YML = """\
service: owsls
frameworkVersion: "3"
configValidationMode: off
provider:
  name: openwhisk
  runtime: nodejs:20
plugins:
  - serverless-openwhisk
package:
  patterns:
    - "!node_modules/**"
    - "!.serverless/**"
functions:
  hello:
    handler: handler.hello
    parameters:
      greeting: Hello
  shout:
    handler: handler.shout
    name: slspkg/shout
  pipeline:
    sequence:
      - hello
      - shout
  onevent:
    handler: handler.onevent
    events:
      - trigger: slsping
  web:
    handler: handler.web
    annotations:
      web-export: true
resources:
  packages:
    slspkg:
      parameters:
        suffix: "!"
"""

HANDLER_JS = """\
function hello(p) { return { msg: `${p.greeting || 'Hi'} ${p.name || 'nobody'}` }; }
function shout(p) { return { msg: String(p.msg).toUpperCase() + (p.suffix || '') }; }
function onevent(p) { return { got: p.n }; }
function web(p) { return { msg: `web ${p.name}` }; }
module.exports = { hello, shout, onevent, web };
"""


def test_serverless_deploy_invoke_remove(platform: Platform, serverless_modules: Path, tmp_path):
    service = tmp_path / "service"
    service.mkdir()
    (service / "serverless.yml").write_text(SERVERLESS_YML)
    (service / "handler.js").write_text(HANDLER_JS)
    (service / "node_modules").symlink_to(serverless_modules, target_is_directory=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "OW_APIHOST": platform.url,
        "OW_AUTH": platform.auth,
        "OW_NAMESPACE": "guest",
        "SLS_TELEMETRY_DISABLED": "1",
        "SLS_NOTIFICATIONS_MODE": "off",
        "SLS_DEPRECATION_DISABLE": "*",
        "SLS_INTERACTIVE_SETUP_DISABLE": "1",
        "CI": "1",
    }
    for var in ("AWS_PROFILE", "SERVERLESS_ACCESS_KEY", "SERVERLESS_LICENSE_KEY"):
        env.pop(var, None)

    def sls(*args: str, stderr: bool = False) -> str:
        p = subprocess.run(
            ["node", str(serverless_modules / "serverless" / "bin" / "serverless.js"), *args],
            cwd=service,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, f"serverless {' '.join(args)}:\n{p.stdout}\n{p.stderr}"
        return p.stdout + p.stderr if stderr else p.stdout

    out = sls("deploy", stderr=True)
    assert "Deployment successful!" in out, out

    def invoke(function: str, data: dict[str, Any]) -> Any:
        return json.loads(sls("invoke", "-f", function, "-d", json.dumps(data)))

    assert invoke("hello", {"name": "SLS"}) == {"msg": "Hello SLS"}
    assert invoke("shout", {"msg": "hi"}) == {"msg": "HI!"}  # the package's parameter
    assert invoke("pipeline", {"name": "seq"}) == {"msg": "HELLO SEQ!"}

    status, seq = rest(platform, "GET", f"{NS}/actions/owsls-dev-pipeline")
    assert seq["exec"]["components"] == ["/guest/owsls-dev-hello", "/guest/slspkg/shout"]
    status, rule = rest(platform, "GET", f"{NS}/rules/owsls_slsping_to_onevent")
    assert status == 200 and rule["status"] == "active"
    status, fired = rest(platform, "POST", f"{NS}/triggers/slsping", {"n": 7})
    assert status == 202, fired
    aid = rule_results(platform, fired["activationId"], 1)["guest/owsls_slsping_to_onevent"][
        "activationId"
    ]
    assert get_activation(platform, aid)["response"]["result"] == {"got": 7}
    status, body = rest(platform, "GET", "/api/v1/web/guest/default/owsls-dev-web.json?name=W")
    assert (status, body) == (200, {"msg": "web W"})

    # After deploying it lists what is there from the four collections and the gateway's
    # routes (`serverless info`).
    for name in ("owsls-dev-hello", "slspkg/shout", "owsls-dev-pipeline", "slsping", "slspkg"):
        assert name in out, out

    sls("remove")
    status, actions = rest(platform, "GET", f"{NS}/actions?limit=0")
    assert not [
        a["name"] for a in actions if a["name"].startswith("owsls-") or a["name"] == "shout"
    ]
    for path in ("packages/slspkg", "triggers/slsping", "rules/owsls_slsping_to_onevent"):
        assert rest(platform, "GET", f"{NS}/{path}")[0] == 404, path


# ---------------------------------------------------------------------------------------------
# The wsk CLI (skips where it cannot be built; set WSK_BIN to run it)


def test_wsk_cli_entities(platform: Platform, wsk_cli: Path, tmp_path):
    # The key in wsk's properties file, as `wsk property set` keeps it: not on a command line.
    props = tmp_path / "wskprops"
    props.write_text(f"APIHOST={platform.url}\nAUTH={platform.auth}\n")
    props.chmod(0o600)
    env = {**os.environ, "WSK_CONFIG_FILE": str(props), "HOME": str(tmp_path)}
    base = [str(wsk_cli), "-i"]

    def wsk(*args: str, ok: bool = True) -> str:
        p = subprocess.run(
            [*base, *args], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        if ok:
            assert p.returncode == 0, f"wsk {' '.join(args)}:\n{p.stdout}\n{p.stderr}"
        return p.stdout + p.stderr

    def wsk_json(*args: str) -> Any:
        out = wsk(*args)
        return json.loads(out[min(i for i in (out.find("{"), out.find("[")) if i >= 0) :])

    for name, code in {"inc": INC, "double": DOUBLE, "greet": GREET, "onevent": ONEVENT}.items():
        (tmp_path / f"{name}.js").write_text(code)
    wsk("action", "create", "wskinc", str(tmp_path / "inc.js"), "--kind", "nodejs:20")
    wsk("action", "create", "wskdouble", str(tmp_path / "double.js"), "--kind", "nodejs:20")
    wsk("action", "create", "wskseq", "--sequence", "wskinc,wskdouble")
    assert wsk_json("action", "invoke", "wskseq", "-r", "-p", "n", "3") == {"n": 8}

    wsk("package", "create", "wskpkg", "-p", "greeting", "Hello")
    wsk("action", "create", "wskpkg/greet", str(tmp_path / "greet.js"), "--kind", "nodejs:20")
    wsk("package", "bind", "wskpkg", "wskbind", "-p", "greeting", "Howdy")
    assert wsk_json("action", "invoke", "wskbind/greet", "-r", "-p", "name", "W") == {
        "greeting": "Howdy",
        "name": "W",
    }

    wsk("action", "create", "wskevent", str(tmp_path / "onevent.js"), "--kind", "nodejs:20")
    wsk("trigger", "create", "wsktrig", "-p", "from", "trigger")
    wsk("rule", "create", "wskrule", "wsktrig", "wskevent")
    # `wsk activation poll` lists with since/docs until --exit; it must see the rule's run.
    poller = subprocess.Popen(
        [*base, "activation", "poll", "wskevent", "--exit", "8"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(2)  # it has taken its starting point
    fired = wsk("trigger", "fire", "wsktrig", "-p", "fired", "1")
    match = re.search(r"with id ([0-9a-f]{32})", fired)
    assert match, fired
    aid = rule_results(platform, match.group(1), 1)["guest/wskrule"]["activationId"]
    assert get_activation(platform, aid)["response"]["result"] == {"from": "trigger", "fired": 1}
    polled, _ = poller.communicate(timeout=60)
    assert f"Activation: 'wskevent' ({aid})" in polled, polled
    assert aid in wsk("activation", "list", "wskevent")
    wsk("rule", "disable", "wskrule")
    assert "inactive" in wsk("rule", "get", "wskrule", "--summary") + wsk("rule", "get", "wskrule")
    wsk("rule", "enable", "wskrule")

    assert wsk_json("action", "get", "wskseq")["exec"]["components"] == [
        "/guest/wskinc",
        "/guest/wskdouble",
    ]
    assert "wskpkg" in wsk("package", "list") and "wskbind" in wsk("package", "list")
    everything = wsk("list") + wsk("namespace", "get")
    for name in ("wskpkg", "wskbind", "wskseq", "wskinc", "wsktrig", "wskrule"):
        assert name in everything, everything
    assert "404" not in everything and "not supported" not in everything

    wsk("rule", "delete", "--disable", "wskrule")
    wsk("trigger", "delete", "wsktrig")
    for action in ("wskseq", "wskinc", "wskdouble", "wskevent", "wskpkg/greet"):
        wsk("action", "delete", action)
    wsk("package", "delete", "wskbind")
    wsk("package", "delete", "wskpkg")
