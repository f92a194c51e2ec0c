"""``/api/v1/web/{ns}/{pkg}/{action}[.ext]``: web actions, callable without credentials,
run as the namespace's owner; ``default`` is the package of actions outside packages."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from front.entities import annotation
from front.http import MAX_PAYLOAD, NOT_FOUND, BadRequest, error, json_response
from front.names import valid_name
from front.routes.context import Context
from whisk.protocol import QualifiedName, loads
from whisk.protocol.json import JSONDecodeError
from whisk.protocol.records import StatusCode


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
        owner = next((i for i in self.ctx.identities.by_key.values() if i.namespace == ns), None)
        try:
            if owner is None:
                raise BadRequest(NOT_FOUND, 404)
            path = ns if pkg == "default" else f"{ns}/{valid_name(pkg)}"
            action = await self.ctx.resolver.action(
                owner, QualifiedName(path, valid_name(name)), cached=True
            )
        except BadRequest:
            return error(404, NOT_FOUND, request)
        if annotation(action.doc, "web-export") not in (True, "true"):
            return error(404, NOT_FOUND, request)
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
            __ow_headers={
                k.lower(): v for k, v in request.headers.items() if k.lower() != "authorization"
            },
            __ow_path="",
        )
        aid, record = await self.ctx.activator.invoke(
            owner, action, params, blocking=True, wait_s=self.ctx.blocking_wait_s
        )
        headers = {"x-openwhisk-activation-id": aid}
        if record is None:
            return json_response({"activationId": aid}, 202, headers)
        code = StatusCode(record["response"]["statusCode"])
        result = record["response"].get("result")
        if code != StatusCode.SUCCESS:
            status = 500 if code == StatusCode.WHISK_ERROR else 400
            message = result.get("error") if isinstance(result, dict) else result
            return error(status, str(message) if message else code.status)
        if ext == "json":
            return json_response(result, headers=headers)
        if ext == "http" and isinstance(result, dict):
            status = result.get("statusCode", 200)
            body = result.get("body", "")
            hdrs = {**headers, **{k: str(v) for k, v in (result.get("headers") or {}).items()}}
            if isinstance(body, dict | list):
                return json_response(body, status, hdrs)
            return web.Response(text=str(body), status=status, headers=hdrs)
        text = result.get(ext, "") if isinstance(result, dict) else ""
        return web.Response(
            text=str(text),
            headers=headers,
            content_type="text/html" if ext == "html" else "text/plain",
        )
