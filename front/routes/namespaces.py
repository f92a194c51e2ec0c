"""``/namespaces``: the caller's namespace, everything in it at once (what ``wsk list`` and
``wsk namespace get`` show) and its limits."""

from __future__ import annotations

from aiohttp import web

from front.entities import action_summary
from front.http import json_response
from front.packages import package_summary
from front.routes.context import Context
from front.triggers import rule_view, trigger_view


class NamespaceRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def routes(self, ns: str) -> list[web.RouteDef]:
        return [
            web.get("/api/v1/namespaces", self.index),
            web.get(ns, self.get),
            web.get(f"{ns}/", self.get),
            web.get(f"{ns}/limits", self.limits),
        ]

    async def index(self, request: web.Request) -> web.Response:
        return json_response([self.ctx.caller(request).namespace])

    async def get(self, request: web.Request) -> web.Response:
        """Every entity of the namespace by kind, newest first (the default package's
        actions and those in packages)."""
        who = self.ctx.caller(request)
        ns = self.ctx.own_namespace(request, who)
        entities = self.ctx.entities
        return json_response(
            {
                "actions": [action_summary(d) for d in await entities.list(ns, "action")],
                "packages": [
                    package_summary(d) for d in await entities.list(ns, "package", nested=False)
                ],
                "triggers": [
                    trigger_view(d) for d in await entities.list(ns, "trigger", nested=False)
                ],
                "rules": [rule_view(d) for d in await entities.list(ns, "rule", nested=False)],
            }
        )

    async def limits(self, request: web.Request) -> web.Response:
        """The namespace's own limits (none unless its identity sets them, as stock)."""
        who = self.ctx.caller(request)
        self.ctx.own_namespace(request, who)
        return json_response(who.limits)
