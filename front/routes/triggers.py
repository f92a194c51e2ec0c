"""``/namespaces/{ns}/triggers`` and ``/namespaces/{ns}/rules``: triggers (fired with a POST)
and the rules that link them to actions (enabled and disabled with a POST of a status)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from front.entitystore import Entities
from front.http import BadRequest, flag, forwarded_headers, json_response, listing, read_object
from front.names import parse_name, qualified
from front.routes.context import Context
from front.triggers import (
    ACTIVE,
    INACTIVE,
    link_rule,
    new_rule_document,
    new_trigger_document,
    rule_status,
    rule_view,
    trigger_view,
    unlink_rule,
)
from whisk.protocol import QualifiedName
from whisk.protocol.messages import Identity


class TriggerRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def routes(self, ns: str) -> list[web.RouteDef]:
        return [
            web.get(f"{ns}/triggers", self.index),
            web.get(f"{ns}/triggers/{{name}}", self.get),
            web.put(f"{ns}/triggers/{{name}}", self.put),
            web.delete(f"{ns}/triggers/{{name}}", self.delete),
            web.post(f"{ns}/triggers/{{name}}", self.fire),
        ]

    async def index(self, request: web.Request) -> web.Response:
        who = self.ctx.caller(request)
        ns = self.ctx.own_namespace(request, who)
        docs = await self.ctx.entities.list(ns, "trigger", nested=False)
        return listing(request, "triggers", docs, trigger_view)

    async def get(self, request: web.Request) -> web.Response:
        _, docid = self.ctx.own_entity(request)
        return json_response(trigger_view(await self.ctx.entities.get(docid, "trigger")))

    async def put(self, request: web.Request) -> web.Response:
        _, docid = self.ctx.own_entity(request)
        body = await read_object(request)
        old = await self.ctx.entities.existing(docid, "trigger", flag(request, "overwrite"))
        ns, name = docid.split("/", 1)
        doc = new_trigger_document(ns, name, body, now_ms=self.ctx.now_ms(), old=old)
        await self.ctx.entities.put(doc, old)
        return json_response(trigger_view(doc))

    async def delete(self, request: web.Request) -> web.Response:
        _, docid = self.ctx.own_entity(request)
        doc = await self.ctx.entities.get(docid, "trigger")
        await self.ctx.entities.delete(doc)
        return json_response(trigger_view(doc))

    async def fire(self, request: web.Request) -> web.Response:
        who, docid = self.ctx.own_entity(request)
        trigger = await self.ctx.entities.get(docid, "trigger", cached=True)
        payload = await read_object(request)
        aid = await self.ctx.activator.fire(who, trigger, payload, forwarded_headers(request))
        if aid is None:  # no active rule: nothing runs and no record is kept, as stock
            return web.Response(status=204)
        return json_response({"activationId": aid}, 202, {"x-openwhisk-activation-id": aid})


class RuleRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def routes(self, ns: str) -> list[web.RouteDef]:
        return [
            web.get(f"{ns}/rules", self.index),
            web.get(f"{ns}/rules/{{name}}", self.get),
            web.put(f"{ns}/rules/{{name}}", self.put),
            web.delete(f"{ns}/rules/{{name}}", self.delete),
            web.post(f"{ns}/rules/{{name}}", self.set_status),
        ]

    @property
    def entities(self) -> Entities:
        return self.ctx.entities

    async def _trigger_of(self, rule: dict[str, Any]) -> dict[str, Any] | None:
        """The rule's trigger, or None when it is gone (the rule is then inactive)."""
        t = rule.get("trigger") or {}
        doc = await self.entities.find(f"{t.get('path')}/{t.get('name')}")
        return doc if doc is not None and doc.get("entityType") == "trigger" else None

    async def index(self, request: web.Request) -> web.Response:
        who = self.ctx.caller(request)
        ns = self.ctx.own_namespace(request, who)
        docs = await self.entities.list(ns, "rule", nested=False)
        return listing(request, "rules", docs, rule_view)

    async def get(self, request: web.Request) -> web.Response:
        _, docid = self.ctx.own_entity(request)
        rule = await self.entities.get(docid, "rule")
        return json_response(rule_view(rule, rule_status(await self._trigger_of(rule), docid)))

    async def put(self, request: web.Request) -> web.Response:
        who, docid = self.ctx.own_entity(request)
        body = await read_object(request)
        old = await self.entities.existing(docid, "rule", flag(request, "overwrite"))
        given = {k: body.get(k) or (old or {}).get(k) for k in ("trigger", "action")}
        if given["trigger"] is None or given["action"] is None:
            raise BadRequest("rule requires a valid trigger and a valid action")
        trigger_name = parse_name(given["trigger"], who.namespace, "trigger")
        action_name = parse_name(given["action"], who.namespace, "action")
        trigger = await self._existing_trigger(who, trigger_name)
        await self._existing_action(who, action_name)
        status = ACTIVE
        if old is not None:
            old_trigger = await self._trigger_of(old)
            status = rule_status(old_trigger, docid)
            if old_trigger is not None and old_trigger["_id"] != trigger["_id"]:
                await self.entities.put(unlink_rule(old_trigger, docid), old_trigger)
        ns, name = docid.split("/", 1)
        rule = new_rule_document(
            ns, name, body, trigger_name, action_name, now_ms=self.ctx.now_ms(), old=old
        )
        await self.entities.put(link_rule(trigger, docid, action_name, status), trigger)
        await self.entities.put(rule, old)
        return json_response(rule_view(rule, status))

    async def _existing_trigger(self, who: Identity, name: QualifiedName) -> dict[str, Any]:
        self.ctx.resolver.require_owner(who, name.namespace)
        doc = await self.entities.find(name.docid)
        if doc is None or doc.get("entityType") != "trigger":
            raise BadRequest(f"trigger {qualified(name)} does not exist")
        return doc

    async def _existing_action(self, who: Identity, name: QualifiedName) -> None:
        try:
            await self.ctx.resolver.action(who, name)
        except BadRequest as e:
            if e.status == 403:
                raise
            raise BadRequest(f"action {qualified(name)} does not exist") from None

    async def delete(self, request: web.Request) -> web.Response:
        _, docid = self.ctx.own_entity(request)
        rule = await self.entities.get(docid, "rule")
        trigger = await self._trigger_of(rule)
        if trigger is not None and docid in (trigger.get("rules") or {}):
            await self.entities.put(unlink_rule(trigger, docid), trigger)
        await self.entities.delete(rule)
        return json_response(rule_view(rule, INACTIVE))

    async def set_status(self, request: web.Request) -> web.Response:
        """POST ``{"status": "active"|"inactive"}``: enable or disable the rule."""
        _, docid = self.ctx.own_entity(request)
        body = await read_object(request)
        wanted = body.get("status")
        if wanted not in (ACTIVE, INACTIVE):
            raise BadRequest(
                f"'{wanted}' is not a recognized rule state, must be one of "
                f"['{ACTIVE}', '{INACTIVE}']"
            )
        rule = await self.entities.get(docid, "rule")
        trigger = await self._trigger_of(rule)
        if trigger is None:
            raise BadRequest("Only rules with existing triggers can be activated", 404)
        if rule_status(trigger, docid) != wanted:
            action = parse_name(rule["action"], rule["namespace"])
            await self.entities.put(link_rule(trigger, docid, action, wanted), trigger)
        return web.Response(status=200)
