"""The API gateway's documents, without I/O: one swagger 2.0 document per namespace and base
path, each operation naming the web action it runs in an ``x-openwhisk`` extension (the
shape ``wsk api`` and the ``openwhisk`` npm client read and write), and matching a request's
path and method to an operation.

Base paths and relative paths are kept normalized (``/a/b``, no trailing ``/``) so that one
URL means one operation; a relative path's segment may be a whole ``{parameter}``. Refusals
are :class:`~front.http.BadRequest` with a message that says what to change.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from front.http import BadRequest, NotFound
from front.names import valid_name
from whisk.protocol import dumps, loads
from whisk.protocol.json import JSONDecodeError

VERBS = ("get", "put", "post", "delete", "patch", "head", "options")
RESPONSE_TYPES = ("json", "http", "text", "html", "svg")
DEFAULT_RESPONSE_TYPE = "json"
KIND = "api"  # entityType of a stored API
# ``API:`` and the ``:`` after the namespace cannot occur in an entity id (``ns/name``,
# ``ns/pkg/name``: names have no ``:``), so an API's id never clashes with an entity's.
ID_PREFIX = "API:"
MAX_PATH_CHARS = 1024
MAX_APIDOC_BYTES = 1024 * 1024
PATH_PARAMETERS_NEED_HTTP = (
    "The action must use a response type of '.http' in order to receive the path parameters."
)

# A path segment: RFC 3986 pchar without percent-encoding (so a decoded request path
# compares as it is), or a whole ``{name}`` parameter (relative paths only).
_SEGMENT = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@]+")
_PARAMETER = re.compile(r"\{([A-Za-z0-9_.\-]+)\}")
_WORD_SPLIT = re.compile(r"[^0-9A-Za-z_\-]+")
_URL_EXTENSION = re.compile(r"\.([A-Za-z0-9]+)(?:[?#].*)?$")


def api_id(namespace: str, basepath: str) -> str:
    """The stored API's document id (``basepath`` normalized)."""
    return f"{ID_PREFIX}{namespace}:{basepath}"


def _segments(value: Any, what: str, parameters: bool) -> list[str]:
    if not isinstance(value, str) or not value.startswith("/"):
        raise BadRequest(f"The {what} '{value}' must begin with '/'.")
    if len(value) > MAX_PATH_CHARS:
        raise BadRequest(f"The {what} is longer than {MAX_PATH_CHARS} characters.")
    parts = value[1:].split("/")
    if parts and parts[-1] == "":
        parts.pop()  # one trailing '/'
    for part in parts:
        if _SEGMENT.fullmatch(part):
            continue
        if parameters and _PARAMETER.fullmatch(part):
            continue
        if "{" in part or "}" in part:
            if not parameters:
                raise BadRequest(
                    f"The base path '{value}' cannot have parameters. Only the relative path "
                    "supports path parameters."
                )
            raise BadRequest(
                f"The {what} '{value}' has a malformed parameter '{part}': a parameter is a "
                "whole segment, '{name}' with letters, digits, '_', '.' or '-'."
            )
        raise BadRequest(
            f"The {what} '{value}' has an empty segment or a character that is not allowed "
            "in a URL path without encoding."
        )
    return parts


def base_path(value: Any) -> str:
    """A base path as stored: ``/`` or ``/a/b``; no parameters."""
    return "/" + "/".join(_segments(value, "base path", parameters=False))


def relative_path(value: Any) -> str:
    """A relative path as stored: ``/`` or ``/a/{b}``."""
    return "/" + "/".join(_segments(value, "relative path", parameters=True))


def path_parameters(relpath: str) -> list[str]:
    """The names of ``relpath``'s ``{parameter}`` segments, in order, each once."""
    names: list[str] = []
    for part in relpath.split("/"):
        m = _PARAMETER.fullmatch(part)
        if m and m.group(1) not in names:
            names.append(m.group(1))
    return names


def verb(value: Any) -> str:
    """An HTTP method as swagger keys it (lower case)."""
    if isinstance(value, str) and value.lower() in VERBS:
        return value.lower()
    valid = ", ".join(v.upper() for v in VERBS)
    raise BadRequest(f"'{value}' is not a valid API verb. Valid values are: {valid}.")


def response_type(value: Any) -> str:
    if value is None or value == "":
        return DEFAULT_RESPONSE_TYPE
    if isinstance(value, str) and value.lower() in RESPONSE_TYPES:
        return value.lower()
    valid = ", ".join(RESPONSE_TYPES)
    raise BadRequest(f"'{value}' is not a valid response type. Valid values are: {valid}.")


def operation_id(method: str, relpath: str) -> str:
    """``get`` + ``/books/{isbn}`` -> ``getBooksIsbn``: the method, then each word of the path
    capitalized (stock's convention, so ids read the same)."""
    words = [w for w in _WORD_SPLIT.split(relpath) if w]
    return method.lower() + "".join(w[0].upper() + w[1:].lower() for w in words)


def default_path_parameter(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "description": f"Default description for '{name}'",
        "required": True,
        "type": "string",
    }


@dataclass(frozen=True)
class Target:
    """The web action an operation runs, and the response type it is called with."""

    namespace: str
    package: str  # "" outside packages
    action: str
    response_type: str

    @property
    def name(self) -> str:
        """Fully qualified, as wsk prints it."""
        inner = f"{self.package}/{self.action}" if self.package else self.action
        return f"/{self.namespace}/{inner}"

    def web_path(self) -> str:
        return (
            f"/api/v1/web/{self.namespace}/{self.package or 'default'}/"
            f"{self.action}.{self.response_type}"
        )

    def extension(self, origin: str) -> dict[str, str]:
        """The ``x-openwhisk`` object of an operation that runs this action."""
        return {
            "namespace": self.namespace,
            "package": self.package,
            "action": self.action,
            "url": origin + self.web_path(),
        }


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{what} must be a non-empty string.")
    return value


def action_target(namespace: Any, name: Any, own: str, rtype: str) -> Target:
    """The action ``name`` (``a``, ``pkg/a`` or ``/ns[/pkg]/a``) in ``namespace`` (``_``: the
    caller's ``own``)."""
    text = _text(name, "action.name")
    ns = _text(namespace if namespace is not None else "_", "action.namespace")
    parts = text.split("/")
    if text.startswith("/"):
        if len(parts) not in (3, 4):
            raise BadRequest(f"The action name '{text}' is not a valid entity name.")
        ns, parts = parts[1], parts[2:]
    if len(parts) > 2:
        raise BadRequest(f"The action name '{text}' has too many path segments.")
    ns = own if ns == "_" else valid_name(ns, "namespace")
    package = valid_name(parts[0], "package") if len(parts) == 2 else ""
    return Target(ns, "" if package == "default" else package, valid_name(parts[-1]), rtype)


def extension_target(xow: Any, own: str, where: str) -> Target:
    """The target of a swagger operation's ``x-openwhisk`` (``url``'s extension is the
    response type, json when it has none)."""
    if not isinstance(xow, dict):
        raise BadRequest(
            f"The operation {where} has no x-openwhisk object naming its action: this gateway "
            "only routes to web actions."
        )
    package = xow.get("package") or ""
    if not isinstance(package, str):
        raise BadRequest(f"x-openwhisk.package of {where} must be a string.")
    action = _text(xow.get("action"), f"x-openwhisk.action of {where}")
    url = xow.get("url")
    if url is None:
        rtype = DEFAULT_RESPONSE_TYPE
    else:
        m = _URL_EXTENSION.search(url) if isinstance(url, str) else None
        if m is None:
            raise BadRequest(
                f"x-openwhisk.url of {where} must end in the response type "
                f"(.{', .'.join(RESPONSE_TYPES)})."
            )
        rtype = response_type(m.group(1))
    name = f"{package}/{action}" if package else action
    return action_target(xow.get("namespace"), name, own, rtype)


@dataclass(frozen=True)
class Endpoint:
    """One operation of a ``wsk api create BASE PATH VERB ACTION``."""

    basepath: str  # normalized, or an API name (no leading '/') naming an existing API
    relpath: str
    method: str
    target: Target
    api_name: str | None
    parameters: list[dict[str, Any]]

    @property
    def by_name(self) -> bool:
        return not self.basepath.startswith("/")


def parse_json_field(value: Any, what: str) -> Any:
    """An object, or a JSON string of one (the CLI sends a swagger file as a string)."""
    if isinstance(value, str):
        try:
            value = loads(value)
        except (JSONDecodeError, UnicodeDecodeError):
            raise BadRequest(f"{what} field cannot be parsed. Ensure it is valid JSON.") from None
    if not isinstance(value, dict):
        raise BadRequest(f"{what} must be a JSON object.")
    return value


def endpoint(apidoc: dict[str, Any], own: str, rtype: str) -> Endpoint:
    """The operation a CLI-style apidoc (``gatewayBasePath``, ``gatewayPath``,
    ``gatewayMethod``, ``action``) adds."""
    for field in ("gatewayBasePath", "gatewayPath", "gatewayMethod", "action"):
        if apidoc.get(field) in (None, ""):
            raise BadRequest(f"apidoc is missing the {field} field.")
    raw_base = apidoc["gatewayBasePath"]
    if not isinstance(raw_base, str):
        raise BadRequest("apidoc.gatewayBasePath must be a string.")
    basepath = base_path(raw_base) if raw_base.startswith("/") else raw_base
    relpath = relative_path(apidoc["gatewayPath"])
    method = verb(apidoc["gatewayMethod"])
    action = apidoc["action"]
    if not isinstance(action, dict):
        raise BadRequest("apidoc.action must be a JSON object.")
    target = action_target(action.get("namespace"), action.get("name"), own, rtype)
    names = path_parameters(relpath)
    if names and rtype != "http":
        raise BadRequest(PATH_PARAMETERS_NEED_HTTP)
    given = apidoc.get("pathParameters")
    if given is not None and not _parameter_list(given):
        raise BadRequest("apidoc.pathParameters must be a list of objects with a name.")
    declared = {p["name"] for p in given or []}
    parameters = list(given or []) + [default_path_parameter(n) for n in names if n not in declared]
    api_name = apidoc.get("apiName")
    if api_name is not None and not isinstance(api_name, str):
        raise BadRequest("apidoc.apiName must be a string.")
    return Endpoint(basepath, relpath, method, target, api_name or None, parameters)


def _parameter_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(p, dict) and isinstance(p.get("name"), str) for p in value
    )


def new_swagger(basepath: str, title: str | None) -> dict[str, Any]:
    """An API with no operations yet; CORS on, as stock creates them."""
    return {
        "swagger": "2.0",
        "info": {"title": title or basepath, "version": "1.0.0"},
        "basePath": basepath,
        "paths": {},
        "x-ibm-configuration": {"cors": {"enabled": True}},
    }


def add_endpoint(swagger: dict[str, Any], ep: Endpoint, origin: str) -> dict[str, Any]:
    """``swagger`` with ``ep``'s operation added (replacing one on the same path and verb)."""
    out = copy.deepcopy(swagger)
    operation: dict[str, Any] = {"operationId": operation_id(ep.method, ep.relpath)}
    if ep.parameters:
        operation["parameters"] = ep.parameters
    operation["x-openwhisk"] = ep.target.extension(origin)
    operation["responses"] = {"default": {"description": "Default response"}}
    out.setdefault("paths", {}).setdefault(ep.relpath, {})[ep.method] = operation
    return out


def normalize_swagger(swagger: Any, own: str, origin: str) -> dict[str, Any]:
    """A whole API from a swagger document (``wsk api create --config-file``): checked, paths
    normalized, every operation's ``x-openwhisk`` naming a web action."""
    doc = copy.deepcopy(parse_json_field(swagger, "swagger"))
    for field in ("basePath", "paths", "info"):
        if field not in doc:
            raise BadRequest(f"swagger is missing the {field} field.")
    if doc.get("swagger", "2.0") != "2.0":
        raise BadRequest("Only swagger 2.0 documents are supported (swagger: '2.0').")
    doc["swagger"] = "2.0"
    doc["basePath"] = base_path(doc["basePath"])
    info = doc["info"]
    if not isinstance(info, dict):
        raise BadRequest("swagger.info must be a JSON object.")
    title = info.get("title", doc["basePath"])
    if not isinstance(title, str) or not title:
        raise BadRequest("swagger.info.title must be a non-empty string.")
    info["title"] = title
    info.setdefault("version", "1.0.0")
    paths = doc["paths"]
    if not isinstance(paths, dict) or not paths:
        raise BadRequest("swagger.paths must be a JSON object with at least one path.")
    normalized: dict[str, Any] = {}
    for raw, item in paths.items():
        relpath = relative_path(raw)
        if relpath in normalized:
            raise BadRequest(f"swagger.paths has '{relpath}' more than once.")
        normalized[relpath] = _path_item(relpath, item, own, origin)
    doc["paths"] = normalized
    return doc


def _path_item(relpath: str, item: Any, own: str, origin: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise BadRequest(f"swagger.paths['{relpath}'] must be a JSON object.")
    shared = item.get("parameters", [])
    if not _parameter_list(shared):
        raise BadRequest(f"swagger.paths['{relpath}'].parameters must be a list of parameters.")
    out: dict[str, Any] = {}
    for key, op in item.items():
        if key == "parameters" or key.startswith("x-"):
            out[key] = op
            continue
        method = verb(key)
        if method in out:
            raise BadRequest(f"swagger.paths['{relpath}'] has the verb '{method}' twice.")
        where = f"'{method} {relpath}'"
        if not isinstance(op, dict):
            raise BadRequest(f"The operation {where} must be a JSON object.")
        target = extension_target(op.get("x-openwhisk"), own, where)
        own_params = op.get("parameters", [])
        if not _parameter_list(own_params):
            raise BadRequest(f"The parameters of {where} must be a list of parameters.")
        names = path_parameters(relpath)
        if names and target.response_type != "http":
            raise BadRequest(PATH_PARAMETERS_NEED_HTTP)
        declared = {p["name"] for p in [*shared, *own_params]}
        for name in names:
            if name not in declared:
                raise BadRequest(
                    f"The parameter '{name}' defined in path '{relpath}' does not match any of "
                    "the parameters defined for the path in the swagger file."
                )
        op = dict(op)
        op["operationId"] = op.get("operationId") or operation_id(method, relpath)
        if not isinstance(op["operationId"], str):
            raise BadRequest(f"The operationId of {where} must be a string.")
        op["x-openwhisk"] = target.extension(origin)
        op.setdefault("responses", {"default": {"description": "Default response"}})
        out[method] = op
    if not any(k in VERBS for k in out):
        raise BadRequest(f"swagger.paths['{relpath}'] has no operations.")
    return out


def operations(swagger: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(relative path, verb, operation) of every operation."""
    for relpath, item in (swagger.get("paths") or {}).items():
        if isinstance(item, dict):
            for method, op in item.items():
                if method in VERBS and isinstance(op, dict):
                    yield relpath, method, op


def targets(swagger: dict[str, Any], own: str) -> list[Target]:
    """Each distinct action the API's operations run."""
    seen: dict[Target, None] = {}
    for relpath, method, op in operations(swagger):
        seen[extension_target(op.get("x-openwhisk"), own, f"'{method} {relpath}'")] = None
    return list(seen)


def remove_endpoint(
    swagger: dict[str, Any], relpath: str, method: str | None, basepath: str
) -> dict[str, Any]:
    """``swagger`` without ``relpath`` (every verb, or just ``method``); 404 when absent."""
    out = copy.deepcopy(swagger)
    paths = out.get("paths") or {}
    item = paths.get(relpath)
    if not isinstance(item, dict):
        raise NotFound(f"path '{relpath}' does not exist in the API '{basepath}'.")
    if method is None:
        del paths[relpath]
        return out
    if method not in item:
        raise NotFound(
            f"path '{relpath}' with operation '{method}' does not exist in the API '{basepath}'."
        )
    del item[method]
    if not any(k in VERBS for k in item):
        del paths[relpath]
    return out


def filtered(
    swagger: dict[str, Any], relpath: str | None, method: str | None
) -> dict[str, Any] | None:
    """``swagger`` with only the operations on ``relpath`` and/or ``method``; None when none
    is left (the API is not in a filtered listing)."""
    if relpath is None and method is None:
        return swagger
    out = copy.deepcopy(swagger)
    kept: dict[str, Any] = {}
    for path, item in (out.get("paths") or {}).items():
        if (relpath is not None and path != relpath) or not isinstance(item, dict):
            continue
        ops = {k: v for k, v in item.items() if k not in VERBS or method in (None, k)}
        if any(k in VERBS for k in ops):
            kept[path] = ops
    if not kept:
        return None
    out["paths"] = kept
    return out


def presented(swagger: dict[str, Any], own: str, origin: str) -> dict[str, Any]:
    """The stored API as clients see it: each ``x-openwhisk.url`` on this front's origin."""
    out = copy.deepcopy(swagger)
    for relpath, method, op in operations(out):
        try:
            target = extension_target(op.get("x-openwhisk"), own, f"'{method} {relpath}'")
        except BadRequest:
            continue  # not written by this module; shown as stored
        op["x-openwhisk"] = target.extension(origin)
    return out


def gateway_url(origin: str, namespace_uuid: str, basepath: str) -> str:
    """The API's URL on this front: ``{origin}/api/{uuid}{basepath}`` (clients append the
    relative path)."""
    return f"{origin}/api/{namespace_uuid}{'' if basepath == '/' else basepath}"


def ret_api(
    namespace: str, namespace_uuid: str, origin: str, swagger: dict[str, Any]
) -> dict[str, Any]:
    """What createApi answers (the client library's ``RetApi``)."""
    return {
        "namespace": namespace,
        "gwApiActivated": True,
        "tenantId": namespace_uuid,
        "gwApiUrl": gateway_url(origin, namespace_uuid, swagger["basePath"]),
        "apidoc": presented(swagger, namespace, origin),
    }


def api_item(
    namespace: str, namespace_uuid: str, origin: str, swagger: dict[str, Any]
) -> dict[str, Any]:
    """One entry of getApi's ``{"apis": [...]}`` (``ApiItem``)."""
    return {
        "id": api_id(namespace, swagger["basePath"]),
        "key": namespace,
        "value": ret_api(namespace, namespace_uuid, origin, swagger),
    }


def stored_document(namespace: str, swagger: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The whisks-database document of an API. No top-level ``exec``, ``binding``,
    ``trigger`` or ``parameters``: the stock controller's views do not see it."""
    size = len(dumps(swagger))
    if size > MAX_APIDOC_BYTES:
        raise BadRequest(
            f"The API document is {size} bytes; at most {MAX_APIDOC_BYTES} are allowed.", 413
        )
    basepath = swagger["basePath"]
    return {
        "_id": api_id(namespace, basepath),
        "entityType": KIND,
        "namespace": namespace,
        "basePath": basepath,
        "apidoc": swagger,
        "updated": now_ms,
    }


def request_segments(path: str) -> list[str]:
    """A request path's segments (empty ones dropped)."""
    return [s for s in path.split("/") if s]


def base_candidates(segments: list[str]) -> list[tuple[str, list[str]]]:
    """(base path, the rest) for every base path a request path could be under, longest
    first."""
    return [("/" + "/".join(segments[:k]), segments[k:]) for k in range(len(segments), -1, -1)]


@dataclass(frozen=True)
class Route:
    relpath: str
    method: str
    target: Target
    parameters: dict[str, str]


def match(
    swagger: dict[str, Any], rest: list[str], method: str, own: str
) -> Route | set[str] | None:
    """The operation serving ``method`` on the segments ``rest`` (below the base path): a
    Route; the verbs the matching paths have when none has ``method``; None when no path
    matches. A literal segment wins over a parameter at the same place."""
    method = method.lower()
    found: list[tuple[tuple[bool, ...], str, dict[str, Any], dict[str, str]]] = []
    for relpath, item in (swagger.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        template = request_segments(relpath)
        if len(template) != len(rest):
            continue
        values: dict[str, str] = {}
        rank: list[bool] = []
        for want, got in zip(template, rest, strict=True):
            m = _PARAMETER.fullmatch(want)
            if m:
                values[m.group(1)] = got
            elif want != got:
                break
            rank.append(bool(m))
        else:
            found.append((tuple(rank), relpath, item, values))
    if not found:
        return None
    found.sort(key=lambda f: f[0])
    for _, relpath, item, values in found:
        op = item.get(method)
        if isinstance(op, dict):
            target = extension_target(op.get("x-openwhisk"), own, f"'{method} {relpath}'")
            return Route(relpath, method, target, values)
    return {k for _, _, item, _ in found for k in item if k in VERBS}


def cors_enabled(swagger: dict[str, Any]) -> bool:
    """CORS is on unless the API turns it off (``x-ibm-configuration.cors.enabled``)."""
    config = swagger.get("x-ibm-configuration")
    cors = config.get("cors") if isinstance(config, dict) else None
    return not (isinstance(cors, dict) and cors.get("enabled") is False)
