"""``wsk api``: the API gateway, served by the front itself.

- Management, where clients look for stock's routemgmt web actions:
  ``GET|POST|DELETE /api/v1/web/whisk.system/apimgmt/{getApi,createApi,deleteApi}[.http]``,
  called with the user's key (basic auth; the ``accesstoken``/``spaceguid`` the CLI also sends
  are not needed and ignored). Each caller sees and changes only its own namespace's APIs.
- The gateway: ``/api/{namespace uuid or name}/{base path}/{relative path}`` runs the web
  action of the operation the path and method match, as ``/api/v1/web`` would (the same
  code, :func:`front.routes.web.serve_web_action`), with CORS unless the API turns it off.

An API (one swagger document per namespace and base path, :mod:`front.apigw`) is stored in
the whisks database as ``API:{namespace}:{base path}``, ``entityType: "api"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from front import apigw
from front.entitystore import ConcurrentChange
from front.http import NOT_FOUND, BadRequest, NotFound, error, json_response, paging, read_object
from front.routes.context import Context
from front.routes.web import find_action, find_web_action, is_web_action, serve_web_action
from whisk.protocol.messages import Identity

MGMT = "/api/v1/web/whisk.system/apimgmt"
METHODS = {"getApi": "GET", "createApi": "POST", "deleteApi": "DELETE"}
# Concurrent changes to one API (e.g. a deployment tool adding its routes in parallel) are
# merged by reading it again; this many tries.
TRIES = 8
MAX_SEGMENTS = 64

Change = Callable[[dict[str, Any] | None], dict[str, Any] | None]


def origin(request: web.Request) -> str:
    """This front as the caller reached it (the Host it used): the base of the URLs given
    back."""
    return f"{request.scheme}://{request.host}"


class ApiRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def routes(self) -> list[web.RouteDef]:
        ops = "|".join(METHODS)
        return [
            web.route("*", MGMT + "/{op:(?:" + ops + r")(?:\.http|\.json)?}", self.manage),
            # Not /api/v1/...: the REST API's own paths keep their 404s and 405s.
            web.route("*", r"/api/{ns:(?!v1(?:/|$))[^/]+}{path:(?:/.*)?}", self.gateway),
        ]

    # -- management ---------------------------------------------------------------------------

    async def manage(self, request: web.Request) -> web.StreamResponse:
        op = request.match_info["op"].partition(".")[0]
        if request.method != METHODS[op]:
            raise web.HTTPMethodNotAllowed(request.method, [METHODS[op]])
        who = self.ctx.caller(request)
        if op == "createApi":
            return await self.create(request, who)
        if op == "deleteApi":
            return await self.delete(request, who)
        return await self.get(request, who)

    async def create(self, request: web.Request, who: Identity) -> web.Response:
        """Add one operation to an API (created on first use), or with ``apidoc.swagger``
        replace a whole API; answers the API (``RetApi``)."""
        body = await read_object(request)
        if body.get("apidoc") in (None, ""):
            raise BadRequest("apidoc is required.")
        apidoc = apigw.parse_json_field(body["apidoc"], "apidoc")
        rtype = apigw.response_type(request.query.get("responsetype", body.get("responsetype")))
        ns, base = who.namespace, origin(request)
        swagger_doc = apidoc.get("swagger")
        if swagger_doc not in (None, ""):
            if apidoc.get("gatewayBasePath"):
                raise BadRequest(
                    "swagger and gatewayBasePath are mutually exclusive and cannot be specified "
                    "together."
                )
            whole = apigw.normalize_swagger(swagger_doc, ns, base)
            await self._check_targets(who, apigw.targets(whole, ns))
            basepath = whole["basePath"]
            await self._check_title(ns, whole["info"]["title"], basepath)
            saved = await self._update(ns, basepath, lambda _old: whole)
        else:
            ep = apigw.endpoint(apidoc, ns, rtype)
            await self._check_targets(who, [ep.target])
            if ep.by_name:
                named = await self._find(ns, ep.basepath)
                if named is None:
                    raise NotFound(
                        f"API '{ep.basepath}' does not exist: create it with a base path "
                        "(starting with '/') first."
                    )
                basepath = named["basePath"]
            else:
                basepath = ep.basepath
                if await self.ctx.entities.find(apigw.api_id(ns, basepath)) is None:
                    await self._check_title(ns, ep.api_name or basepath, basepath)

            def add(old: dict[str, Any] | None) -> dict[str, Any]:
                start = old if old is not None else apigw.new_swagger(basepath, ep.api_name)
                return apigw.add_endpoint(start, ep, base)

            saved = await self._update(ns, basepath, add)
        assert saved is not None
        return json_response(apigw.ret_api(ns, who.namespace_uuid, base, saved))

    async def get(self, request: web.Request, who: Identity) -> web.Response:
        """The caller's APIs (``{"apis": [...]}``, by base path), or the one ``basepath``
        names (a base path or an API name); ``relpath`` and ``operation`` keep only the
        matching operations. An unknown API is an empty list, as stock (the CLI says so)."""
        ns, base = who.namespace, origin(request)
        wanted = request.query.get("basepath") or None
        relpath, method = self._filters(request)
        limit, skip = paging(request, "apis")
        if wanted is not None:
            found = await self._find(ns, wanted)
            docs = [found] if found is not None else []
        else:
            docs = await self._all(ns)
        items = []
        for doc in docs:
            swagger = apigw.filtered(doc["apidoc"], relpath, method)
            if swagger is not None:
                items.append(apigw.api_item(ns, who.namespace_uuid, base, swagger))
        return json_response({"apis": items[skip : skip + limit]})

    async def delete(self, request: web.Request, who: Identity) -> web.Response:
        """Delete an API, one of its paths, or one operation; an API left without operations
        is deleted."""
        ns = who.namespace
        wanted = request.query.get("basepath")
        if not wanted:
            raise BadRequest("basepath is required.")
        relpath, method = self._filters(request)
        if method is not None and relpath is None:
            raise BadRequest("When specifying an operation, the path is required.")
        found = await self._find(ns, wanted)
        if found is None:
            raise NotFound(f"API '{wanted}' does not exist.")
        basepath = found["basePath"]

        def remove(old: dict[str, Any] | None) -> dict[str, Any] | None:
            if old is None:
                raise NotFound(f"API '{wanted}' does not exist.")
            if relpath is None:
                return None
            left = apigw.remove_endpoint(old, relpath, method, basepath)
            return left if any(True for _ in apigw.operations(left)) else None

        await self._update(ns, basepath, remove)
        return json_response({})

    @staticmethod
    def _filters(request: web.Request) -> tuple[str | None, str | None]:
        relpath = request.query.get("relpath") or None
        method = request.query.get("operation") or None
        return (
            apigw.relative_path(relpath) if relpath is not None else None,
            apigw.verb(method) if method is not None else None,
        )

    async def _all(self, namespace: str) -> list[dict[str, Any]]:
        docs = await self.ctx.entities.list(namespace, apigw.KIND, nested=False)
        return sorted(docs, key=lambda d: str(d.get("basePath")))

    async def _find(self, namespace: str, wanted: str) -> dict[str, Any] | None:
        """The API a base path (``/...``) or an API name (its title) means."""
        if wanted.startswith("/"):
            doc = await self.ctx.entities.find(apigw.api_id(namespace, apigw.base_path(wanted)))
            return doc if doc is not None and doc.get("entityType") == apigw.KIND else None
        for doc in await self._all(namespace):
            if doc["apidoc"].get("info", {}).get("title") == wanted:
                return doc
        return None

    async def _check_title(self, namespace: str, title: str, basepath: str) -> None:
        """API names are unique in a namespace (an API may be named instead of its base
        path)."""
        for doc in await self._all(namespace):
            if doc["basePath"] != basepath and doc["apidoc"].get("info", {}).get("title") == title:
                raise BadRequest(
                    f"The API name '{title}' is already used by the API '{doc['basePath']}'.", 409
                )

    async def _check_targets(self, who: Identity, targets: list[apigw.Target]) -> None:
        """Every operation must run a web action (as the CLI checks before it asks)."""
        for t in targets:
            missing = NotFound(
                f"Unable to get action '{t.name}': The requested resource does not exist."
            )
            try:
                _, action = await find_action(self.ctx, t.namespace, t.package, t.action)
            except BadRequest:
                raise missing from None
            if not is_web_action(action):
                if t.namespace != who.namespace:
                    raise missing  # another namespace's private action: do not tell
                raise BadRequest(
                    f"Action '{t.name}' is not a web action. Issue 'wsk action update "
                    f'"{t.name}" --web true\' to convert the action to a web action.'
                )

    async def _update(self, namespace: str, basepath: str, change: Change) -> dict[str, Any] | None:
        """Apply ``change`` to the stored swagger of ``basepath`` (None: the API is new) and
        store what it gives (None: delete the API); again on a concurrent change."""
        docid = apigw.api_id(namespace, basepath)
        for _ in range(TRIES):
            old = await self.ctx.entities.find(docid)
            if old is not None and old.get("entityType") != apigw.KIND:
                raise BadRequest("The API's document is not an API.", 409)
            new = change(old["apidoc"] if old is not None else None)
            try:
                if new is None:
                    if old is not None:
                        await self.ctx.entities.delete(old)
                    return None
                doc = apigw.stored_document(namespace, new, self.ctx.now_ms())
                await self.ctx.entities.put(doc, old)
                return new
            except ConcurrentChange:
                continue
        raise ConcurrentChange()

    # -- the gateway --------------------------------------------------------------------------

    async def gateway(self, request: web.Request) -> web.StreamResponse:
        """Run the operation this URL and method mean."""
        key = request.match_info["ns"]
        owner = self.ctx.identities.owner_by_uuid(key) or self.ctx.identities.owner(key)
        segments = apigw.request_segments(request.match_info["path"])
        if owner is None or len(segments) > MAX_SEGMENTS:
            return error(404, NOT_FOUND, request)
        allowed: set[str] = set()
        cors = False
        for basepath, rest in apigw.base_candidates(segments):
            doc = await self.ctx.entities.find(apigw.api_id(owner.namespace, basepath), True)
            if doc is None or doc.get("entityType") != apigw.KIND:
                continue
            swagger = doc["apidoc"]
            found = apigw.match(swagger, rest, request.method, owner.namespace)
            if isinstance(found, apigw.Route):
                return await self._run(request, found, segments, apigw.cors_enabled(swagger))
            if found:
                allowed |= found
                cors = cors or apigw.cors_enabled(swagger)
        if not allowed:
            return error(404, NOT_FOUND, request)
        methods = ", ".join(sorted(m.upper() for m in allowed | {"options"}))
        if request.method == "OPTIONS" and cors:
            return web.Response(status=204, headers=self._preflight(request, methods))
        response = error(405, "The requested method is not allowed.", request)
        response.headers["Allow"] = methods
        return response

    async def _run(
        self, request: web.Request, route: apigw.Route, segments: list[str], cors: bool
    ) -> web.StreamResponse:
        t = route.target
        found = await find_web_action(self.ctx, t.namespace, t.package, t.action)
        if found is None:
            return error(404, NOT_FOUND, request)
        # As stock's gateway: an http action sees the path below the namespace (base path and
        # relative path with its parameters' values); the others see none.
        ow_path = "/" + "/".join(segments) if t.response_type == "http" else ""
        response = await serve_web_action(
            self.ctx, request, *found, t.response_type, ow_path=ow_path
        )
        if cors:
            response.headers.setdefault("Access-Control-Allow-Origin", "*")
        return response

    @staticmethod
    def _preflight(request: web.Request, methods: str) -> dict[str, str]:
        asked = request.headers.get("Access-Control-Request-Headers")
        return {
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Allow-Methods": methods,
            "Access-Control-Allow-Headers": asked or "Authorization, Content-Type",
        }
