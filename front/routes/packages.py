"""``/namespaces/{ns}/packages``: packages and bindings. Another namespace's listing shows
the packages its owner shares (all of ``/whisk.system``'s)."""

from __future__ import annotations

from aiohttp import web

from front.entities import entity_view
from front.entitystore import Entities
from front.http import BadRequest, flag, json_response, listing, read_object
from front.names import valid_name
from front.packages import binding_of, new_package_document, package_summary, package_view
from front.resolve import SYSTEM_NAMESPACE
from front.routes.context import Context


class PackageRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def routes(self, ns: str) -> list[web.RouteDef]:
        return [
            web.get(f"{ns}/packages", self.index),
            web.get(f"{ns}/packages/{{name}}", self.get),
            web.put(f"{ns}/packages/{{name}}", self.put),
            web.delete(f"{ns}/packages/{{name}}", self.delete),
        ]

    @property
    def entities(self) -> Entities:
        return self.ctx.entities

    async def index(self, request: web.Request) -> web.Response:
        who = self.ctx.caller(request)
        ns = self.ctx.namespace(request, who)
        docs = await self.entities.list(ns, "package", nested=False)
        if ns != who.namespace:
            shared = ns == SYSTEM_NAMESPACE
            docs = [d for d in docs if binding_of(d) is None and (shared or d.get("publish"))]
        return listing(request, "packages", docs, package_summary)

    async def get(self, request: web.Request) -> web.Response:
        who = self.ctx.caller(request)
        ns = self.ctx.namespace(request, who)
        docid = f"{ns}/{valid_name(request.match_info['name'])}"
        pkg = await self.ctx.resolver.package(who, docid)
        real, _ = await self.ctx.resolver.unbound(who, pkg)
        actions = await self.entities.list(real["_id"], "action", nested=False)
        bound = real if real is not pkg else None
        return json_response(package_view(pkg, actions, bound))

    async def put(self, request: web.Request) -> web.Response:
        who, docid = self.ctx.own_entity(request)
        body = await read_object(request)
        old = await self.entities.existing(docid, "package", flag(request, "overwrite"))
        ns, name = docid.split("/", 1)
        doc = new_package_document(ns, name, body, now_ms=self.ctx.now_ms(), old=old)
        bound = binding_of(doc)
        if bound is not None and "binding" in body:
            await self.ctx.resolver.bindable(who, bound)
        await self.entities.put(doc, old)
        return json_response(entity_view(doc))

    async def delete(self, request: web.Request) -> web.Response:
        _, docid = self.ctx.own_entity(request)
        doc = await self.entities.get(docid, "package")
        if binding_of(doc) is None:
            inside = await self.entities.list(doc["_id"], "action", nested=False)
            if inside and not flag(request, "force"):
                what = "entity" if len(inside) == 1 else "entities"
                raise BadRequest(
                    f"Package not empty (contains {len(inside)} {what}). "
                    "Set force param or delete package contents.",
                    409,
                )
            for action in inside:
                await self.entities.delete(action)
        await self.entities.delete(doc)
        return json_response(entity_view(doc))
