"""The API gateway (``wsk api``) through HTTP with real action runtimes: the apimgmt
endpoints the CLI and the npm client call (create, list with filters, get, delete), the
gateway's URLs for every response type and path parameters, who sees which API, and the
4xx refusals."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from front.identities import GUEST_AUTH, SYSTEM, Identities, basic_auth
from tests.integration.front.conftest import NS, put_action
from whisk.protocol.controller import GUEST_UUID

MGMT = "/api/v1/web/whisk.system/apimgmt"
WEB = [{"key": "web-export", "value": True}]
SHOP = """
def main(a):
    seen = {"method": a.get("__ow_method"), "path": a.get("__ow_path"),
            "name": a.get("name"), "qty": a.get("qty")}
    return {"statusCode": 201, "headers": {"X-Shop": "yes"}, "body": seen, "seen": seen,
            "text": "plain " + str(a.get("name")), "html": "<p>" + str(a.get("name")) + "</p>"}
"""
PLAIN = "def main(a):\n    return {'ok': True}\n"
ALICE_KEY = "5b1e3a2c-0d3f-4c55-9a11-2b7c6d8e9f00:" + "alicesecret" * 6
ALICE = {"Authorization": basic_auth(ALICE_KEY)}
IDENTITIES = Identities.parse(
    [f"guest={GUEST_AUTH}", f"whisk.system={SYSTEM.authkey['api_key']}", f"alice={ALICE_KEY}"]
)


def apidoc(basepath: str, relpath: str, verb: str, action: str, **more: Any) -> dict[str, Any]:
    """What ``wsk api create BASE REL VERB ACTION`` sends."""
    return {
        "apidoc": {
            "namespace": "_",
            "gatewayBasePath": basepath,
            "gatewayPath": relpath,
            "gatewayMethod": verb.upper(),
            "id": f"API:_:{basepath}",
            "action": {
                "name": action,
                "namespace": "_",
                "backendMethod": verb.upper(),
                "backendUrl": f"http://127.0.0.1/api/v1/web/_/default/{action}.http",
                "authkey": GUEST_AUTH,
            },
            **more,
        }
    }


async def create(live, basepath, relpath, verb, action, rtype="json", **more):
    query = urlencode({"responsetype": rtype, "accesstoken": "DUMMY TOKEN", "spaceguid": "x"})
    return await live.call(
        "POST",
        f"{MGMT}/createApi.http?{query}",
        json=apidoc(basepath, relpath, verb, action, **more),
    )


async def get_apis(live, **query: str):
    status, body = await live.call("GET", f"{MGMT}/getApi.http?{urlencode(query)}")
    assert status == 200, body
    return body["apis"]


def operations(apis: list[dict]) -> set[tuple[str, str, str]]:
    """(base path, relative path, verb) of every operation listed."""
    return {
        (api["value"]["apidoc"]["basePath"], path, verb)
        for api in apis
        for path, ops in api["value"]["apidoc"]["paths"].items()
        for verb in ops
        if verb != "parameters"
    }


async def gw(live, method: str, path: str, **kw: Any):
    """A gateway call without credentials: (status, headers, body bytes)."""
    headers = {"Authorization": "", **kw.pop("headers", {})}
    async with live.http.request(
        method, f"{live.url}/api/{GUEST_UUID}{path}", headers=headers, **kw
    ) as r:
        return r.status, r.headers, await r.read()


async def shop(live) -> None:
    """The web action ``shop`` and the API /shop on it in every response type."""
    await put_action(live, "shop", SHOP, annotations=WEB)
    for relpath, verb, rtype in [
        ("/items", "get", "json"),
        ("/items", "post", "http"),
        ("/items/{id}", "get", "http"),
        ("/items/{id}/reviews/{n}", "put", "http"),
        ("/about", "get", "text"),
        ("/page", "get", "html"),
    ]:
        status, body = await create(live, "/shop", relpath, verb, "shop", rtype)
        assert status == 200, body


async def test_create_answers_the_api_with_its_gateway_url(live):
    await put_action(live, "shop", SHOP, annotations=WEB)
    status, api = await create(live, "/shop", "/items/{id}", "get", "shop", "http", apiName="Shop")
    assert status == 200, api
    assert api["gwApiUrl"] == f"{live.url}/api/{GUEST_UUID}/shop"
    assert api["namespace"] == "guest" and api["gwApiActivated"] is True
    doc = api["apidoc"]
    assert doc["swagger"] == "2.0" and doc["basePath"] == "/shop"
    assert doc["info"] == {"title": "Shop", "version": "1.0.0"}
    op = doc["paths"]["/items/{id}"]["get"]
    assert op["operationId"] == "getItemsId"
    assert op["x-openwhisk"] == {
        "namespace": "guest",
        "package": "",
        "action": "shop",
        "url": f"{live.url}/api/v1/web/guest/default/shop.http",
    }
    assert [p["name"] for p in op["parameters"]] == ["id"]
    assert op["parameters"][0]["in"] == "path" and op["parameters"][0]["required"] is True
    # The caller's key is not kept anywhere in the API.
    assert GUEST_AUTH.split(":")[1] not in str(api)
    # The stored document: an id no entity can have, a shape stock's views ignore.
    stored = await live.front.api.ctx.entities.find("API:guest:/shop")
    assert stored is not None and stored["entityType"] == "api"
    assert not {"exec", "binding", "trigger", "parameters"} & set(stored)


async def test_gateway_calls_the_web_action_in_each_response_type(live):
    await shop(live)
    status, headers, body = await gw(live, "GET", "/shop/items?name=pen")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    result = json.loads(body)
    assert result["seen"] == {"method": "get", "path": "", "name": "pen", "qty": None}
    assert headers["Access-Control-Allow-Origin"] == "*"  # CORS on by default, as stock

    status, headers, body = await gw(live, "POST", "/shop/items?name=ink", json={"qty": 3})
    assert status == 201 and headers["X-Shop"] == "yes"
    assert json.loads(body) == {
        "method": "post",
        "path": "/shop/items",
        "name": "ink",
        "qty": 3,
    }
    # Path parameters: an http action sees the whole path below the namespace (as stock).
    status, _, body = await gw(live, "GET", "/shop/items/42")
    assert status == 201 and json.loads(body)["path"] == "/shop/items/42"
    status, _, body = await gw(live, "PUT", "/shop/items/7/reviews/2", data=b"not json")
    assert status == 201 and json.loads(body)["path"] == "/shop/items/7/reviews/2"

    status, headers, body = await gw(live, "GET", "/shop/about?name=us")
    assert (status, body) == (200, b"plain us")
    assert headers["Content-Type"].startswith("text/plain")
    status, headers, body = await gw(live, "GET", "/shop/page?name=home")
    assert (status, body) == (200, b"<p>home</p>")
    assert headers["Content-Type"].startswith("text/html")

    # The namespace's name works in place of its uuid.
    async with live.http.get(f"{live.url}/api/guest/shop/items/9") as r:
        assert r.status == 201 and (await r.json())["path"] == "/shop/items/9"


async def test_gateway_refusals(live):
    await shop(live)
    status, headers, _ = await gw(live, "DELETE", "/shop/items")
    assert status == 405 and headers["Allow"] == "GET, OPTIONS, POST"
    status, headers, body = await gw(
        live, "OPTIONS", "/shop/items", headers={"Access-Control-Request-Headers": "X-Mine"}
    )
    assert status == 204 and headers["Access-Control-Allow-Methods"] == "GET, OPTIONS, POST"
    assert headers["Access-Control-Allow-Headers"] == "X-Mine"
    for path in ("/shop/nothing", "/shop", "/elsewhere/items", "/shop/items/1/2"):
        status, _, body = await gw(live, "GET", path)
        assert status == 404, (path, body)
        assert b"The requested resource does not exist." in body
    async with live.http.get(f"{live.url}/api/nobody/shop/items") as r:
        assert r.status == 404
    # The REST API's own paths keep their answers.
    assert (await live.call("POST", f"{NS}/packages/p", json={}))[0] == 405
    assert (await live.call("GET", "/api/v1/nothing"))[0] == 404
    # The action stops being a web action: its operations answer 404.
    await put_action(live, "shop", SHOP, annotations=[{"key": "web-export", "value": False}])
    status, _, _ = await gw(live, "GET", "/shop/items")
    assert status == 404


async def test_list_filters_and_get(live):
    await shop(live)
    await put_action(live, "plain", PLAIN, annotations=WEB)
    status, _ = await create(live, "/", "/root", "get", "plain")
    assert status == 200
    status, _ = await create(live, "/b", "/x", "delete", "plain", apiName="Bee")
    assert status == 200

    everything = await get_apis(live, limit="30", skip="0")
    assert [a["value"]["apidoc"]["basePath"] for a in everything] == ["/", "/b", "/shop"]
    assert len(operations(everything)) == 8
    assert everything[0]["value"]["gwApiUrl"] == f"{live.url}/api/{GUEST_UUID}"
    assert everything[1]["id"] == "API:guest:/b" and everything[1]["key"] == "guest"
    page = await get_apis(live, limit="1", skip="1")
    assert [a["value"]["apidoc"]["basePath"] for a in page] == ["/b"]
    assert operations(await get_apis(live, basepath="/shop", relpath="/items")) == {
        ("/shop", "/items", "get"),
        ("/shop", "/items", "post"),
    }
    assert operations(await get_apis(live, relpath="/items", operation="POST")) == {
        ("/shop", "/items", "post")
    }
    assert operations(await get_apis(live, operation="delete")) == {("/b", "/x", "delete")}
    assert operations(await get_apis(live, basepath="Bee")) == {("/b", "/x", "delete")}
    assert operations(await get_apis(live, basepath="/shop/")) == operations(
        await get_apis(live, basepath="/shop")
    )
    # Unknown: an empty list, as stock (the CLI prints "API does not exist for basepath").
    assert await get_apis(live, basepath="/nothing") == []
    assert await get_apis(live, basepath="/shop", relpath="/nothing") == []


async def test_delete_by_operation_path_and_base_path(live):
    await shop(live)
    status, body = await live.call(
        "DELETE", f"{MGMT}/deleteApi.http?basepath=/shop&relpath=/items&operation=POST"
    )
    assert (status, body) == (200, {})
    assert (await gw(live, "POST", "/shop/items"))[0] == 405
    assert (await gw(live, "GET", "/shop/items"))[0] == 200
    status, _ = await live.call(
        "DELETE", f"{MGMT}/deleteApi.http?basepath=/shop&relpath=/items/{{id}}"
    )
    assert status == 200
    assert (await gw(live, "GET", "/shop/items/1"))[0] == 404
    assert ("/shop", "/items/{id}", "get") not in operations(await get_apis(live))
    # Unknown parts: 404 with what is missing.
    status, body = await live.call(
        "DELETE", f"{MGMT}/deleteApi.http?basepath=/shop&relpath=/items&operation=post"
    )
    assert status == 404
    assert body["error"] == "path '/items' with operation 'post' does not exist in the API '/shop'."
    status, body = await live.call("DELETE", f"{MGMT}/deleteApi.http?basepath=/shop&relpath=/no")
    assert status == 404 and body["error"] == "path '/no' does not exist in the API '/shop'."
    status, body = await live.call("DELETE", f"{MGMT}/deleteApi.http?basepath=/nothing")
    assert status == 404 and body["error"] == "API '/nothing' does not exist."
    # The whole API.
    status, _ = await live.call("DELETE", f"{MGMT}/deleteApi.http?basepath=/shop")
    assert status == 200
    assert await get_apis(live) == []
    assert (await gw(live, "GET", "/shop/items"))[0] == 404
    # Deleting the last operation deletes the API.
    await create(live, "/one", "/op", "get", "shop")
    status, _ = await live.call(
        "DELETE", f"{MGMT}/deleteApi?basepath=/one&relpath=/op&operation=get&force=true"
    )
    assert status == 200 and await get_apis(live) == []
    assert (await live.call("GET", "/api/v1/namespaces/_/actions"))[1][0]["name"] == "shop"


async def test_create_refusals(live):
    await put_action(live, "shop", SHOP, annotations=WEB)
    await put_action(live, "plain", PLAIN)
    status, body = await create(live, "/p", "/x", "get", "plain")
    assert status == 400
    assert body["error"] == (
        "Action '/guest/plain' is not a web action. Issue 'wsk action update \"/guest/plain\" "
        "--web true' to convert the action to a web action."
    )
    status, body = await create(live, "/p", "/x", "get", "nosuch")
    assert status == 404 and "'/guest/nosuch'" in body["error"]
    status, body = await create(live, "/p", "/x/{id}", "get", "shop", "json")
    assert status == 400 and "response type of '.http'" in body["error"]

    good = apidoc("/p", "/x", "get", "shop")["apidoc"]
    bad: list[tuple[str, Any, str]] = [
        ("createApi.http", {}, "apidoc is required."),
        ("createApi.http", {"apidoc": "{not json"}, "cannot be parsed"),
        ("createApi.http", {"apidoc": [1]}, "apidoc must be a JSON object."),
        ("createApi.http", {"apidoc": {**good, "gatewayPath": None}}, "gatewayPath"),
        ("createApi.http", {"apidoc": {**good, "gatewayBasePath": "/a b"}}, "not allowed"),
        ("createApi.http", {"apidoc": {**good, "gatewayBasePath": "/{x}"}}, "cannot have param"),
        ("createApi.http", {"apidoc": {**good, "gatewayPath": "x"}}, "must begin with '/'"),
        ("createApi.http", {"apidoc": {**good, "gatewayPath": "/a//b"}}, "empty segment"),
        ("createApi.http", {"apidoc": {**good, "gatewayPath": "/a{b}"}}, "malformed parameter"),
        ("createApi.http", {"apidoc": {**good, "gatewayMethod": "FETCH"}}, "not a valid API verb"),
        ("createApi.http", {"apidoc": {**good, "action": "shop"}}, "action must be"),
        ("createApi.http", {"apidoc": {**good, "action": {"name": 3}}}, "action.name"),
        ("createApi.http", {"apidoc": {**good, "action": {"name": "a/b/c"}}}, "too many"),
        ("createApi.http", {"apidoc": {**good, "pathParameters": "id"}}, "pathParameters"),
        ("createApi.http", {"apidoc": {**good, "gatewayBasePath": "NoSuchApi"}}, "does not exist"),
        (
            "createApi.http",
            {"apidoc": {**good, "swagger": {"basePath": "/s"}}},
            "mutually exclusive",
        ),
        ("createApi.http?responsetype=xml", {"apidoc": good}, "not a valid response type"),
        ("createApi.http?responsetype=json", b"[1, 2", "malformed"),
    ]
    for op, body_in, message in bad:
        kw = {"data": body_in} if isinstance(body_in, bytes) else {"json": body_in}
        status, body = await live.call("POST", f"{MGMT}/{op}", **kw)
        assert 400 <= status < 500 and message in body["error"], (body_in, status, body)
    status, body = await live.call("DELETE", f"{MGMT}/deleteApi.http")
    assert status == 400 and body["error"] == "basepath is required."
    status, body = await live.call("DELETE", f"{MGMT}/deleteApi.http?basepath=/p&operation=get")
    assert status == 400
    assert body["error"] == "When specifying an operation, the path is required."
    for query in ("limit=x", "limit=500", "relpath=nope", "operation=GRAB", "basepath=/a%20b"):
        status, body = await live.call("GET", f"{MGMT}/getApi.http?{query}")
        assert status == 400, (query, body)
    assert (await live.call("GET", f"{MGMT}/createApi.http"))[0] == 405
    assert (await live.call("PUT", f"{MGMT}/getApi"))[0] == 405
    assert await get_apis(live) == []  # nothing was created


async def test_swagger_documents_replace_an_api(live):
    """``wsk api create --config-file``: the CLI sends the file as a JSON string."""
    await put_action(live, "shop", SHOP, annotations=WEB)
    await create(live, "/club", "/old", "get", "shop")
    status, api = await create(live, "/club", "/books/{isbn}", "get", "shop", "http")
    exported = api["apidoc"]
    del exported["paths"]["/old"]
    exported["info"]["title"] = "Book Club"
    exported["paths"]["/books"] = {
        "post": {"x-openwhisk": {"namespace": "_", "package": "", "action": "shop"}}
    }
    body = {"apidoc": {"namespace": "_", "swagger": json.dumps(exported)}}
    status, api = await live.call("POST", f"{MGMT}/createApi.http", json=body)
    assert status == 200, api
    assert operations([{"value": api}]) == {
        ("/club", "/books/{isbn}", "get"),
        ("/club", "/books", "post"),
    }
    post = api["apidoc"]["paths"]["/books"]["post"]
    assert post["operationId"] == "postBooks"
    assert post["x-openwhisk"]["url"] == f"{live.url}/api/v1/web/guest/default/shop.json"
    assert (await gw(live, "GET", "/club/old"))[0] == 404
    status, _, body = await gw(live, "POST", "/club/books?name=n")
    assert status == 200 and json.loads(body)["seen"]["name"] == "n"
    assert operations(await get_apis(live, basepath="Book Club")) == operations([{"value": api}])

    swagger = {
        "swagger": "2.0",
        "basePath": "/s",
        "info": {"title": "S", "version": "1"},
        "paths": {"/a": {"get": {"x-openwhisk": {"namespace": "_", "action": "shop"}}}},
    }
    get_shop = swagger["paths"]["/a"]
    bad: list[tuple[Any, str]] = [
        ({**swagger, "basePath": None}, "must begin with '/'"),
        ({k: v for k, v in swagger.items() if k != "paths"}, "missing the paths"),
        ({**swagger, "paths": {}}, "at least one path"),
        ({**swagger, "paths": {"/a": {"get": {}}}}, "only routes to web actions"),
        ({**swagger, "paths": {"/a": {"grab": {}}}}, "not a valid API verb"),
        ({**swagger, "paths": {"/a": {"parameters": "x"}}}, "list of parameters"),
        ({**swagger, "paths": {"/a": {}}}, "no operations"),
        ({**swagger, "paths": {"/a": [1]}}, "must be a JSON object"),
        ({**swagger, "paths": {"/a": get_shop, "/a/": get_shop}}, "more than once"),
        ({**swagger, "swagger": "3.0"}, "swagger 2.0"),
        ({**swagger, "info": {"title": "Book Club"}}, "already used"),
        (
            {**swagger, "paths": {"/a/{id}": swagger["paths"]["/a"]}},
            "response type of '.http'",
        ),
        (
            {
                **swagger,
                "paths": {
                    "/a/{id}": {
                        "get": {
                            "x-openwhisk": {
                                "namespace": "_",
                                "action": "shop",
                                "url": "http://h/api/v1/web/guest/default/shop.http",
                            }
                        }
                    }
                },
            },
            "does not match any of the parameters",
        ),
        (
            {
                **swagger,
                "paths": {"/a": {"get": {"x-openwhisk": {"namespace": "_", "action": "nope"}}}},
            },
            "does not exist",
        ),
        ("{broken", "cannot be parsed"),
    ]
    for doc, message in bad:
        body = {"apidoc": {"namespace": "_", "swagger": doc}}
        status, answer = await live.call("POST", f"{MGMT}/createApi", json=body)
        assert 400 <= status < 500 and message in answer["error"], (doc, status, answer)
    assert await get_apis(live, basepath="/s") == []


@pytest.mark.front_options(identities=IDENTITIES)
async def test_each_namespace_sees_and_changes_only_its_own_apis(live):
    await put_action(live, "shop", SHOP, annotations=WEB)
    assert (await create(live, "/shop", "/items", "get", "shop"))[0] == 200
    status, body = await live.call("GET", f"{MGMT}/getApi.http", headers=ALICE)
    assert (status, body) == (200, {"apis": []})
    status, body = await live.call("DELETE", f"{MGMT}/deleteApi.http?basepath=/shop", headers=ALICE)
    assert status == 404
    # alice may route to guest's web action (web actions are public), under her own URL.
    body = apidoc("/shop", "/items", "post", "/guest/shop")
    status, api = await live.call("POST", f"{MGMT}/createApi.http", json=body, headers=ALICE)
    assert status == 200, api
    alice_uuid = ALICE_KEY.split(":")[0]
    assert api["gwApiUrl"].endswith(f"/api/{alice_uuid}/shop")
    assert api["apidoc"]["paths"]["/items"]["post"]["x-openwhisk"]["namespace"] == "guest"
    async with live.http.post(f"{live.url}/api/{alice_uuid}/shop/items") as r:
        assert r.status == 200
    assert (await gw(live, "POST", "/shop/items"))[0] == 405  # guest's /shop has no POST
    assert operations(await get_apis(live)) == {("/shop", "/items", "get")}
    # Not: another namespace's private (non-web) action, which alice may not learn about.
    await put_action(live, "plain", PLAIN)
    body = apidoc("/x", "/y", "get", "/guest/plain")
    status, answer = await live.call("POST", f"{MGMT}/createApi.http", json=body, headers=ALICE)
    assert status == 404, answer
    # Without credentials: 401.
    async with live.http.get(f"{live.url}{MGMT}/getApi.http", headers={"Authorization": ""}) as r:
        assert r.status == 401


async def test_apis_are_invisible_to_entity_listings(live):
    await shop(live)
    status, ns = await live.call("GET", "/api/v1/namespaces/_")
    assert status == 200
    assert [a["name"] for a in ns["actions"]] == ["shop"]
    assert ns["packages"] == [] and ns["triggers"] == [] and ns["rules"] == []
    for kind in ("packages", "triggers", "rules"):
        assert (await live.call("GET", f"{NS}/{kind}"))[1] == []


async def test_web_actions_answer_http_results_with_their_own_content_type(live):
    """The code the gateway shares with /api/v1/web: an http result that sets Content-Type
    with an object body, and one that is not a valid response."""
    code = (
        "def main(a):\n"
        "    if a.get('bad'):\n"
        "        return {'statusCode': 'teapot'}\n"
        "    return {'statusCode': 202, 'headers': {'Content-Type': 'application/json',\n"
        "            'X-N': 5}, 'body': {'ok': True}}\n"
    )
    await put_action(live, "typed", code, annotations=WEB)
    async with live.http.get(f"{live.url}/api/v1/web/guest/default/typed.http") as r:
        assert r.status == 202 and r.headers["X-N"] == "5"
        assert r.headers["Content-Type"] == "application/json" and await r.json() == {"ok": True}
    async with live.http.get(f"{live.url}/api/v1/web/guest/default/typed.http?bad=1") as r:
        assert r.status == 400
        assert (await r.json())["error"] == "The action did not produce a valid response."
