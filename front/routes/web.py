"""``/api/v1/web/{ns}/{pkg}/{action}[.ext]``: web actions, callable without credentials
unless annotated ``require-whisk-auth`` (:mod:`front.webauth`), run as the namespace's owner;
``default`` is the package of actions outside packages.

:func:`find_web_action` and :func:`serve_web_action` are shared with the API gateway
(:mod:`front.routes.apis`), which calls the same actions under its own URLs."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from front.entities import annotation
from front.http import (
    MAX_PAYLOAD,
    NOT_FOUND,
    BadRequest,
    NotFound,
    error,
    forwarded_headers,
    json_response,
)
from front.names import valid_name
from front.resolve import ResolvedAction
from front.routes.context import Context
from front.webauth import HEADER, UNAUTHORIZED, allowed
from whisk.protocol import QualifiedName, dumps, loads
from whisk.protocol.json import JSONDecodeError
from whisk.protocol.messages import Identity
from whisk.protocol.records import StatusCode

# Response types whose result field is sent as it is, and with which content type.
CONTENT_TYPES = {"html": "text/html", "svg": "image/svg+xml"}
# Headers of the message framing, which the server sets from the body it sends.
_FRAMING = ("content-length", "transfer-encoding", "connection")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP header name


def is_web_action(action: ResolvedAction) -> bool:
    return annotation(action.doc, "web-export") in (True, "true")


async def find_action(
    ctx: Context, namespace: str, package: str, name: str
) -> tuple[Identity, ResolvedAction]:
    """The action ``namespace/package/name`` (``package`` "" or ``default``: none) as its
    namespace's owner sees it, and that owner; NotFound (or another refusal) otherwise."""
    owner = ctx.identities.owner(namespace)
    if owner is None:
        raise NotFound()
    path = namespace if package in ("", "default") else f"{namespace}/{valid_name(package)}"
    action = await ctx.resolver.action(owner, QualifiedName(path, valid_name(name)), cached=True)
    return owner, action


async def find_web_action(
    ctx: Context, namespace: str, package: str, name: str
) -> tuple[Identity, ResolvedAction] | None:
    """The web-exported action and its owner; None when there is none by that name (as stock,
    a missing action and one that is not exported look the same)."""
    try:
        owner, action = await find_action(ctx, namespace, package, name)
    except BadRequest:
        return None
    return (owner, action) if is_web_action(action) else None


async def serve_web_action(
    ctx: Context,
    request: web.Request,
    owner: Identity,
    action: ResolvedAction,
    ext: str,
    ow_path: str = "",
) -> web.StreamResponse:
    """Run ``action`` for ``request`` (query and body as its parameters, with the request's
    ``__ow_method``, ``__ow_headers`` and ``__ow_path``) and answer as the response type
    ``ext`` asks: the result (json), the result's statusCode/headers/body (http), or one of
    its fields (text, html, svg). An action annotated ``require-whisk-auth`` runs only for
    the credentials it asks for (401 otherwise, as stock)."""
    caller = ctx.identities.authenticate(request.headers.get("Authorization"))
    custom_options = annotation(action.doc, "web-custom-options") in (True, "true")
    if not (request.method == "OPTIONS" and custom_options) and not allowed(
        action.doc.get("annotations") or [], request.headers.get(HEADER), caller is not None
    ):
        return error(401, UNAUTHORIZED, request)
    params: dict[str, Any] = dict(request.query)
    raw = await request.read()
    if len(raw) > MAX_PAYLOAD:
        return error(413, "The request content was too large.", request)
    if raw.strip():
        try:
            body = loads(raw)
        except (JSONDecodeError, UnicodeDecodeError):
            body = {"__ow_body": raw.decode("utf-8", "replace")}
        if isinstance(body, dict):
            params.update(body)
    params.update(
        __ow_method=request.method.lower(),
        __ow_headers=forwarded_headers(request),
        __ow_path=ow_path,
    )
    if caller is not None:  # as stock: the authenticated caller's namespace
        params["__ow_user"] = caller.namespace
    aid, record = await ctx.activator.invoke(
        owner, action, params, blocking=True, wait_s=ctx.blocking_wait_s
    )
    headers = {"x-openwhisk-activation-id": aid}
    if record is None:
        return json_response({"activationId": aid}, 202, headers)
    code, result = record.response.status_code, record.response.result
    if code != StatusCode.SUCCESS:
        status = 500 if code == StatusCode.WHISK_ERROR else 400
        message = result.get("error") if isinstance(result, dict) else result
        return error(status, str(message) if message else code.status)
    if ext == "json":
        return json_response(result, headers=headers)
    if ext == "http" and isinstance(result, dict):
        response = http_response(result, headers)
        if response is None:
            return error(400, "The action did not produce a valid response.", request)
        return response
    text = result.get(ext, "") if isinstance(result, dict) else ""
    return web.Response(
        text=str(text), headers=headers, content_type=CONTENT_TYPES.get(ext, "text/plain")
    )


def http_response(result: dict[str, Any], headers: dict[str, str]) -> web.Response | None:
    """The response an http action asks for (``statusCode``, ``headers``, ``body``; its own
    Content-Type wins), or None when it is not one that can be sent."""
    status = result.get("statusCode", 200)
    given = result.get("headers") or {}
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        return None
    if not isinstance(given, dict):
        return None
    hdrs = dict(headers)
    for key, value in given.items():
        text = value if isinstance(value, str) else dumps(value).decode()
        if not _TOKEN.fullmatch(key) or "\r" in text or "\n" in text:
            return None
        if key.lower() not in _FRAMING:
            hdrs[key] = text
    body = result.get("body", "")
    if isinstance(body, dict | list):
        payload, kind = dumps(body), "application/json"
    else:
        payload, kind = str(body).encode(), "text/plain; charset=utf-8"
    if not any(k.lower() == "content-type" for k in hdrs):
        hdrs["Content-Type"] = kind
    return web.Response(body=payload, status=status, headers=hdrs)


class WebRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def routes(self) -> list[web.RouteDef]:
        return [web.route("*", "/api/v1/web/{ns}/{pkg}/{action:.+}", self.invoke)]

    async def invoke(self, request: web.Request) -> web.StreamResponse:
        ns, pkg = request.match_info["ns"], request.match_info["pkg"]
        name, _, ext = request.match_info["action"].rpartition(".")
        if not name:
            name, ext = request.match_info["action"], "http"
        found = await find_web_action(self.ctx, ns, pkg, name)
        if found is None:
            return error(404, NOT_FOUND, request)
        return await serve_web_action(self.ctx, request, *found, ext)
