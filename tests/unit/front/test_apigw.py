"""The API gateway's documents without a platform (front/apigw.py): paths, the swagger an
endpoint makes, merging and removing operations, filters, the RetApi shapes, matching a
request to an operation, and hostile apidocs refused with a 4xx (never another exception)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from front import apigw
from front.http import BadRequest
from tests.unit.whisk.protocol.test_messages_fuzz import json_values

ORIGIN = "http://front:3233"
OWN = "guest"


def ep(basepath: str, relpath: str, verb: str, action: str, rtype: str = "http") -> apigw.Endpoint:
    doc = {
        "gatewayBasePath": basepath,
        "gatewayPath": relpath,
        "gatewayMethod": verb,
        "action": {"name": action, "namespace": "_"},
    }
    return apigw.endpoint(doc, OWN, rtype)


def api(*endpoints: apigw.Endpoint, title: str | None = None) -> dict[str, Any]:
    swagger = apigw.new_swagger(endpoints[0].basepath, title)
    for e in endpoints:
        swagger = apigw.add_endpoint(swagger, e, ORIGIN)
    return swagger


@pytest.mark.parametrize(
    "given,base,rel",
    [
        ("/", "/", "/"),
        ("/a", "/a", "/a"),
        ("/a/", "/a", "/a"),
        ("/a/b.c-d_e~f", "/a/b.c-d_e~f", "/a/b.c-d_e~f"),
        ("/v1/x:y@z", "/v1/x:y@z", "/v1/x:y@z"),
    ],
)
def test_paths_are_normalized(given: str, base: str, rel: str) -> None:
    assert apigw.base_path(given) == base
    assert apigw.relative_path(given) == rel


@pytest.mark.parametrize(
    "value,message",
    [
        ("a", "must begin with '/'"),
        (None, "must begin with '/'"),
        (5, "must begin with '/'"),
        ("//a", "empty segment"),
        ("/a//b", "empty segment"),
        ("/a b", "not allowed"),
        ("/a%20b", "not allowed"),
        ("/a?b", "not allowed"),
        ("/é", "not allowed"),
        ("/" + "a" * 2000, "longer than"),
    ],
)
def test_bad_paths_are_refused(value: Any, message: str) -> None:
    for check in (apigw.base_path, apigw.relative_path):
        with pytest.raises(BadRequest) as e:
            check(value)
        assert e.value.status == 400 and message in str(e.value)


def test_parameters_are_whole_segments_of_relative_paths_only() -> None:
    assert apigw.relative_path("/books/{isbn}/") == "/books/{isbn}"
    assert apigw.path_parameters("/a/{x}/b/{y}/{x}") == ["x", "y"]
    with pytest.raises(BadRequest, match="cannot have parameters"):
        apigw.base_path("/club/{id}")
    for bad in ("/a{x}", "/{x}b", "/{}", "/{a b}", "/{x"):
        with pytest.raises(BadRequest, match="malformed parameter"):
            apigw.relative_path(bad)


def test_verbs_response_types_and_operation_ids() -> None:
    assert apigw.verb("GET") == "get" and apigw.verb("Patch") == "patch"
    with pytest.raises(BadRequest, match="not a valid API verb"):
        apigw.verb("TRACE")
    assert apigw.response_type(None) == "json" and apigw.response_type("HTTP") == "http"
    with pytest.raises(BadRequest, match="not a valid response type"):
        apigw.response_type("xml")
    assert apigw.operation_id("get", "/books/{isbn}") == "getBooksIsbn"
    assert apigw.operation_id("POST", "/") == "post"
    assert apigw.operation_id("put", "/my-shop/item_list.v2") == "putMy-shopItem_listV2"


def test_an_endpoint_names_its_web_action() -> None:
    e = ep("/shop/", "/items/{id}", "GET", "tools/show")
    assert (e.basepath, e.relpath, e.method) == ("/shop", "/items/{id}", "get")
    assert e.target == apigw.Target("guest", "tools", "show", "http")
    assert e.target.name == "/guest/tools/show"
    assert e.parameters == [apigw.default_path_parameter("id")]
    assert not e.by_name and ep("Book Club", "/x", "get", "a").by_name
    # Fully qualified names, another namespace, the "default" package.
    assert ep("/s", "/x", "get", "/alice/pkg/a").target == apigw.Target("alice", "pkg", "a", "http")
    assert ep("/s", "/x", "get", "/alice/a").target == apigw.Target("alice", "", "a", "http")
    assert ep("/s", "/x", "get", "default/a").target == apigw.Target("guest", "", "a", "http")
    with pytest.raises(BadRequest, match=r"response type of '\.http'"):
        ep("/s", "/x/{id}", "get", "a", rtype="json")


@pytest.mark.parametrize(
    "change,message",
    [
        ({"gatewayBasePath": None}, "missing the gatewayBasePath"),
        ({"gatewayPath": ""}, "missing the gatewayPath"),
        ({"gatewayMethod": None}, "missing the gatewayMethod"),
        ({"action": None}, "missing the action"),
        ({"gatewayBasePath": 7}, "must be a string"),
        ({"action": ["a"]}, "must be a JSON object"),
        ({"action": {"name": ""}}, "action.name"),
        ({"action": {"name": "a", "namespace": 3}}, "action.namespace"),
        ({"action": {"name": "/onlyns"}}, "not a valid entity name"),
        ({"action": {"name": "a/b/c"}}, "too many path segments"),
        ({"action": {"name": "bad!name"}}, "is not valid"),
        ({"pathParameters": [{"in": "path"}]}, "pathParameters"),
        ({"apiName": 5}, "apiName"),
    ],
)
def test_bad_endpoints_are_refused(change: dict[str, Any], message: str) -> None:
    doc = {
        "gatewayBasePath": "/s",
        "gatewayPath": "/x",
        "gatewayMethod": "get",
        "action": {"name": "a", "namespace": "_"},
        **change,
    }
    with pytest.raises(BadRequest, match=message):
        apigw.endpoint(doc, OWN, "json")


def test_endpoints_merge_into_one_api_per_base_path() -> None:
    swagger = api(
        ep("/club", "/books", "get", "list", "json"),
        ep("/club", "/books", "post", "add"),
        ep("/club", "/books/{isbn}", "get", "one"),
        title="Book Club",
    )
    assert swagger["info"] == {"title": "Book Club", "version": "1.0.0"}
    assert set(swagger["paths"]) == {"/books", "/books/{isbn}"}
    assert set(swagger["paths"]["/books"]) == {"get", "post"}
    get = swagger["paths"]["/books"]["get"]
    assert get["x-openwhisk"] == {
        "namespace": "guest",
        "package": "",
        "action": "list",
        "url": f"{ORIGIN}/api/v1/web/guest/default/list.json",
    }
    assert "parameters" not in get
    # The same path and verb again replaces the operation.
    again = apigw.add_endpoint(swagger, ep("/club", "/books", "get", "other"), ORIGIN)
    assert again["paths"]["/books"]["get"]["x-openwhisk"]["action"] == "other"
    assert swagger["paths"]["/books"]["get"]["x-openwhisk"]["action"] == "list"  # a copy
    assert {t.action for t in apigw.targets(swagger, OWN)} == {"list", "add", "one"}


def test_removing_operations_and_paths() -> None:
    swagger = api(
        ep("/c", "/b", "get", "x"), ep("/c", "/b", "post", "y"), ep("/c", "/d", "get", "z")
    )
    one = apigw.remove_endpoint(swagger, "/b", "post", "/c")
    assert set(one["paths"]) == {"/b", "/d"} and set(one["paths"]["/b"]) == {"get"}
    last = apigw.remove_endpoint(one, "/b", "get", "/c")
    assert set(last["paths"]) == {"/d"}  # a path without operations goes
    whole = apigw.remove_endpoint(swagger, "/b", None, "/c")
    assert set(whole["paths"]) == {"/d"}
    with pytest.raises(BadRequest, match="path '/e' does not exist in the API '/c'") as e:
        apigw.remove_endpoint(swagger, "/e", None, "/c")
    assert e.value.status == 404
    with pytest.raises(BadRequest, match="with operation 'put' does not exist"):
        apigw.remove_endpoint(swagger, "/b", "put", "/c")


def test_filters_keep_only_matching_operations() -> None:
    swagger = api(
        ep("/c", "/b", "get", "x"), ep("/c", "/b", "post", "y"), ep("/c", "/d", "get", "z")
    )
    assert apigw.filtered(swagger, None, None) is swagger

    def ops(s: dict[str, Any] | None) -> set[tuple[str, str]]:
        assert s is not None
        return {(p, m) for p, m, _ in apigw.operations(s)}

    assert ops(apigw.filtered(swagger, "/b", None)) == {("/b", "get"), ("/b", "post")}
    assert ops(apigw.filtered(swagger, None, "get")) == {("/b", "get"), ("/d", "get")}
    assert ops(apigw.filtered(swagger, "/b", "post")) == {("/b", "post")}
    assert apigw.filtered(swagger, "/d", "post") is None
    assert apigw.filtered(swagger, "/nothing", None) is None


def test_the_ret_api_shapes() -> None:
    swagger = api(ep("/c", "/b", "get", "x"))
    item = apigw.api_item("guest", "uuid-1", "https://other:9", swagger)
    assert item["id"] == "API:guest:/c" and item["key"] == "guest"
    value = item["value"]
    assert value["gwApiUrl"] == "https://other:9/api/uuid-1/c"
    assert value["namespace"] == "guest" and value["tenantId"] == "uuid-1"
    assert value["gwApiActivated"] is True
    # URLs follow the origin the caller used.
    url = value["apidoc"]["paths"]["/b"]["get"]["x-openwhisk"]["url"]
    assert url == "https://other:9/api/v1/web/guest/default/x.http"
    assert apigw.gateway_url("http://h", "u", "/") == "http://h/api/u"


def test_the_stored_document_is_invisible_to_stock_views() -> None:
    swagger = api(ep("/c", "/b/{id}", "get", "x"))
    doc = apigw.stored_document("guest", swagger, 123)
    assert doc["_id"] == "API:guest:/c" and doc["entityType"] == "api"
    assert doc["namespace"] == "guest" and doc["updated"] == 123
    assert not {"exec", "binding", "trigger", "parameters"} & set(doc)
    # No entity id (ns/name, ns/pkg/name: names have no ':') can be an API's id.
    assert ":" in doc["_id"].split("/")[0]
    big = apigw.add_endpoint(swagger, ep("/c", "/" + "x" * 1000, "get", "x"), "h" * 2_000_000)
    with pytest.raises(BadRequest) as e:
        apigw.stored_document("guest", big, 1)
    assert e.value.status == 413


def test_matching_a_request_to_an_operation() -> None:
    swagger = api(
        ep("/c", "/books", "get", "list"),
        ep("/c", "/books/{isbn}", "get", "one"),
        ep("/c", "/books/{isbn}", "delete", "drop"),
        ep("/c", "/books/new", "post", "add"),
        ep("/c", "/books/{isbn}/reviews/{n}", "put", "review"),
    )
    route = apigw.match(swagger, ["books", "978"], "GET", OWN)
    assert isinstance(route, apigw.Route)
    assert (route.relpath, route.method, route.target.action) == ("/books/{isbn}", "get", "one")
    assert route.parameters == {"isbn": "978"}
    # A literal segment wins; a parameter serves the verbs the literal path lacks.
    route = apigw.match(swagger, ["books", "new"], "post", OWN)
    assert isinstance(route, apigw.Route) and route.target.action == "add"
    route = apigw.match(swagger, ["books", "new"], "get", OWN)
    assert isinstance(route, apigw.Route) and route.parameters == {"isbn": "new"}
    route = apigw.match(swagger, ["books", "1", "reviews", "2"], "put", OWN)
    assert isinstance(route, apigw.Route) and route.parameters == {"isbn": "1", "n": "2"}
    assert apigw.match(swagger, ["books"], "post", OWN) == {"get"}
    assert apigw.match(swagger, ["books", "new"], "patch", OWN) == {"get", "delete", "post"}
    assert apigw.match(swagger, ["nothing"], "get", OWN) is None
    assert apigw.match(swagger, [], "get", OWN) is None
    root = api(ep("/", "/", "get", "home"))
    assert isinstance(apigw.match(root, [], "get", OWN), apigw.Route)


def test_base_path_candidates_longest_first() -> None:
    assert apigw.request_segments("/a//b/") == ["a", "b"]
    assert apigw.base_candidates(["a", "b"]) == [
        ("/a/b", []),
        ("/a", ["b"]),
        ("/", ["a", "b"]),
    ]


def test_swagger_documents_are_checked_and_normalized() -> None:
    doc = {
        "swagger": "2.0",
        "basePath": "/club/",
        "info": {"title": "Club"},
        "paths": {
            "/books/{isbn}/": {
                "parameters": [{"name": "isbn", "in": "path"}],
                "x-note": "kept",
                "GET": {
                    "x-openwhisk": {
                        "namespace": "_",
                        "package": "lib",
                        "action": "one",
                        "url": "https://elsewhere/api/v1/web/guest/lib/one.http",
                    },
                },
            }
        },
        "x-ibm-configuration": {"cors": {"enabled": False}},
    }
    swagger = apigw.normalize_swagger(doc, OWN, ORIGIN)
    assert swagger["basePath"] == "/club" and swagger["info"]["version"] == "1.0.0"
    item = swagger["paths"]["/books/{isbn}"]
    assert item["x-note"] == "kept" and set(item) == {"parameters", "x-note", "get"}
    op = item["get"]
    assert op["operationId"] == "getBooksIsbn" and op["responses"]
    assert op["x-openwhisk"] == {
        "namespace": "guest",
        "package": "lib",
        "action": "one",
        "url": f"{ORIGIN}/api/v1/web/guest/lib/one.http",
    }
    assert not apigw.cors_enabled(swagger)
    assert apigw.cors_enabled(apigw.new_swagger("/x", None))
    assert apigw.normalize_swagger(
        '{"basePath": "/s", "info": {}, "paths": {"/a": {"get": {"x-openwhisk": '
        '{"namespace": "_", "action": "a"}}}}}',
        OWN,
        ORIGIN,
    )["info"] == {"title": "/s", "version": "1.0.0"}


# -- hostile input: built or refused with a 4xx, nothing else --------------------------------


def corrupted(valid: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Well-formed objects (so that some are built), and the same with a field replaced by
    any JSON value or dropped."""

    @st.composite
    def draw(d: st.DrawFn) -> dict[str, Any]:
        doc = dict(d(valid))
        field = d(st.sampled_from([None, None, *doc]))
        if field is not None:
            if d(st.booleans()):
                doc[field] = d(json_values)
            else:
                del doc[field]
        return doc

    return draw()


good_bases = st.sampled_from(["/s", "/", "/a/b/"])
bases = st.one_of(good_bases, good_bases, good_bases, st.sampled_from(["a", "//", "/{x}", "/a b"]))
good_paths = st.sampled_from(["/s", "/", "/a/b/", "/x/{id}", "/{a}/{b}"])
paths = st.one_of(good_paths, good_paths, good_paths, st.sampled_from(["a", "//", "/a{b}"]))
apidocs = corrupted(
    st.fixed_dictionaries(
        {
            "gatewayBasePath": bases | st.just("Name"),
            "gatewayPath": paths,
            "gatewayMethod": st.sampled_from(["get", "POST", "delete"]),
            "action": corrupted(
                st.fixed_dictionaries(
                    {
                        "name": st.sampled_from(["a", "p/a", "/ns/p/a", "/ns/a"]),
                        "namespace": st.sampled_from(["_", "ns"]),
                    }
                )
            ),
            "pathParameters": st.just([{"name": "id", "in": "path"}]),
            "apiName": st.sampled_from(["Name", ""]),
        }
    )
)
operations = corrupted(
    st.fixed_dictionaries(
        {
            "x-openwhisk": corrupted(
                st.fixed_dictionaries(
                    {
                        "namespace": st.sampled_from(["_", "ns", "b!"]),
                        "package": st.sampled_from(["", "p", "default"]),
                        "action": st.sampled_from(["a", "p/a", ""]),
                        "url": st.sampled_from(["h/x.http", "h/x.json", "x", "x.zip"]),
                    }
                )
            ),
            "parameters": st.just([{"name": "id", "in": "path"}]),
            "operationId": st.sampled_from(["op", ""]),
        }
    )
)
swaggers = corrupted(
    st.fixed_dictionaries(
        {
            "swagger": st.just("2.0"),
            "basePath": bases,
            "info": st.fixed_dictionaries({}, optional={"title": st.sampled_from(["T", ""])}),
            "paths": st.dictionaries(
                paths,
                corrupted(
                    st.fixed_dictionaries(
                        {"get": operations},
                        optional={
                            "post": operations,
                            "x-a": json_values,
                            "parameters": st.just([{"name": "b"}]),
                        },
                    )
                ),
                min_size=1,
                max_size=3,
            ),
        }
    )
)


def refused_or_built(build: Any) -> Any:
    try:
        return build()
    except BadRequest as e:
        assert 400 <= e.status < 500 and str(e)
        return None


@settings(max_examples=400, deadline=None)
@given(apidocs, st.sampled_from(["json", "http"]))
def test_hostile_endpoints_are_built_or_refused(doc: dict[str, Any], rtype: str) -> None:
    built = refused_or_built(lambda: apigw.endpoint(doc, OWN, rtype))
    if built is not None and not built.by_name:
        swagger = apigw.add_endpoint(apigw.new_swagger(built.basepath, None), built, ORIGIN)
        route = apigw.match(swagger, apigw.request_segments(built.relpath), built.method, OWN)
        assert isinstance(route, apigw.Route) and route.target == built.target


@settings(max_examples=400, deadline=None)
@given(swaggers | json_values)
def test_hostile_swagger_documents_are_built_or_refused(doc: Any) -> None:
    swagger = refused_or_built(lambda: apigw.normalize_swagger(doc, OWN, ORIGIN))
    if swagger is not None:
        assert apigw.targets(swagger, OWN)
        assert apigw.presented(swagger, OWN, ORIGIN)["basePath"] == swagger["basePath"]
        refused_or_built(lambda: apigw.stored_document(OWN, swagger, 1))
