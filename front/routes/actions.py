"""``/namespaces/{ns}/actions``: create, update, get, delete, list and invoke actions and
sequences, in the default package (``name``) or a package (``pkg/name``); ``pkg/`` lists a
package's actions."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from front.entities import (
    SEQUENCE,
    action_summary,
    action_view,
    activation_view,
    new_action_document,
)
from front.http import (
    MAX_PAYLOAD,
    BadRequest,
    NotFound,
    flag,
    json_response,
    listing,
    read_json,
    read_object,
)
from front.names import parse_name, qualified, valid_name
from front.packages import binding_of
from front.resolve import ResolvedAction
from front.routes.context import Context
from front.sequences import COMPONENT_MISSING, TOO_LONG
from whisk.protocol import ProtocolError, QualifiedName, action_from_document
from whisk.protocol.messages import Identity
from whisk.protocol.records import ActivationRecord, StatusCode

NOT_ON_BINDING = "Operation not permitted on package binding."


class ActionRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def routes(self, ns: str) -> list[web.RouteDef]:
        return [
            web.get(f"{ns}/actions", self.index),
            web.get(f"{ns}/actions/{{name:.+}}", self.get),
            web.put(f"{ns}/actions/{{name:.+}}", self.put),
            web.delete(f"{ns}/actions/{{name:.+}}", self.delete),
            web.post(f"{ns}/actions/{{name:.+}}", self.invoke),
        ]

    def _name(self, request: web.Request, ns: str) -> QualifiedName:
        text = unquote(request.match_info["name"])
        parts = text.split("/")
        if len(parts) > 2:
            raise BadRequest(f"The name '{text}' is not valid.")
        for p in parts:
            valid_name(p)
        return QualifiedName("/".join([ns, *parts[:-1]]), parts[-1])

    async def _code(self, doc: dict[str, Any]) -> str | None:
        try:
            action = action_from_document(doc, self.ctx.kind_defaults)
        except ProtocolError:
            return None
        if action.code_attachment is not None:
            data = await self.ctx.store.get_attachment(
                self.ctx.entities.db, doc["_id"], action.code_attachment
            )
            return action.with_attachment(data).code if data is not None else None
        return action.code

    async def _writable_package(self, who: Identity, name: QualifiedName) -> None:
        """A packaged action may be written only in an existing package of the caller's,
        not in a binding."""
        if name.package is not None:
            pkg = await self.ctx.resolver.package(who, name.path)
            if binding_of(pkg) is not None:
                raise BadRequest(NOT_ON_BINDING)

    # -- reading --

    async def index(self, request: web.Request) -> web.Response:
        who = self.ctx.caller(request)
        ns = self.ctx.own_namespace(request, who)
        return await self._list(request, ns)

    async def _list(self, request: web.Request, path: str) -> web.Response:
        docs = await self.ctx.entities.list(path, "action", nested="/" not in path)
        return listing(request, "actions", docs, action_summary)

    async def get(self, request: web.Request) -> web.Response:
        who = self.ctx.caller(request)
        ns = self.ctx.namespace(request, who)
        raw = request.match_info["name"]
        if raw.endswith("/"):  # GET .../actions/pkg/: the package's actions
            pkg = await self.ctx.resolver.package(who, f"{ns}/{valid_name(unquote(raw[:-1]))}")
            real, _ = await self.ctx.resolver.unbound(who, pkg)
            return await self._list(request, real["_id"])
        action = await self.ctx.resolver.action(who, self._name(request, ns))
        doc = action.doc | {"parameters": action.parameters}
        code = await self._code(doc) if flag(request, "code", True) else None
        return json_response(action_view(doc, code))

    # -- writing --

    async def put(self, request: web.Request) -> web.Response:
        who = self.ctx.caller(request)
        ns = self.ctx.own_namespace(request, who)
        name = self._name(request, ns)
        await self._writable_package(who, name)
        body = await read_object(request)
        old = await self.ctx.entities.existing(name.docid, "action", flag(request, "overwrite"))
        old_code = None
        if old is not None and body.get("exec") is None:
            stored = await self._code(old)
            if stored is not None:
                binary = old["exec"].get("binary", False)
                old_code = base64.b64decode(stored) if binary else stored.encode()
        exec_ = body.get("exec")
        components = None
        if isinstance(exec_, dict) and exec_.get("kind") == SEQUENCE:
            components = await self._components(who, name, exec_.get("components"))
        doc, code = new_action_document(
            name.namespace,
            name.name if name.package is None else f"{name.package}/{name.name}",
            body,
            kinds=self.ctx.kinds,
            kind_defaults=self.ctx.kind_defaults,
            limits=self.ctx.limits,
            now_ms=self.ctx.now_ms(),
            old=old,
            old_code=old_code,
            components=components,
        )
        rev = await self.ctx.entities.put(doc, old)
        att = doc["exec"].get("code", {})
        att_name = att.get("attachmentName", "") if isinstance(att, dict) else ""
        if att_name.startswith("couch:") and code is not None:
            await self.ctx.store.put_attachment(
                self.ctx.entities.db,
                doc["_id"],
                rev,
                att_name[len("couch:") :],
                code,
                att["attachmentType"],
            )
        return json_response(action_view(doc, None))

    async def _components(self, who: Identity, sequence: QualifiedName, given: Any) -> list[str]:
        """A new sequence's components, fully qualified: each must exist and be readable,
        none may lead back to the sequence, and at most the maximum length of atomic actions
        may run (nested sequences inlined), as stock checks on create and update."""
        if not isinstance(given, list) or not given:
            raise BadRequest("No component specified for the sequence.")
        limit = self.ctx.activator.sequences.max_length
        if len(given) > limit:
            raise BadRequest(TOO_LONG)
        names = [parse_name(c, who.namespace, "component") for c in given]
        itself = await self._resolved_name(who, sequence)
        await self._count_atomic(who, itself, names, limit)
        return [qualified(n) for n in names]

    async def _resolved_name(self, who: Identity, name: QualifiedName) -> str:
        """``name``'s docid with its package binding resolved (when there is one)."""
        if name.package is None:
            return name.docid
        try:
            pkg = await self.ctx.resolver.package(who, name.path)
            real, _ = await self.ctx.resolver.unbound(who, pkg)
        except NotFound:
            return name.docid
        return f"{real['_id']}/{name.name}"

    async def _count_atomic(
        self, who: Identity, itself: str, names: list[QualifiedName], limit: int, depth: int = 0
    ) -> int:
        if depth > self.ctx.activator.sequences.max_length:  # a cycle among older sequences
            raise BadRequest(TOO_LONG)
        count = 0
        for n in names:
            try:
                action: ResolvedAction = await self.ctx.resolver.action(who, n)
            except NotFound:
                raise BadRequest(COMPONENT_MISSING) from None
            if action.doc["_id"] == itself:
                raise BadRequest("Sequence may not refer to itself.")
            if action.is_sequence:
                inner = [parse_name(c, who.namespace) for c in action.components]
                count += await self._count_atomic(who, itself, inner, limit - count, depth + 1)
            else:
                count += 1
            if count > limit:
                raise BadRequest(TOO_LONG)
        return count

    async def delete(self, request: web.Request) -> web.Response:
        who = self.ctx.caller(request)
        ns = self.ctx.own_namespace(request, who)
        name = self._name(request, ns)
        await self._writable_package(who, name)
        doc = await self.ctx.entities.get(name.docid, "action")
        await self.ctx.entities.delete(doc)
        return json_response(action_view(doc, None))

    # -- invoking --

    async def invoke(self, request: web.Request) -> web.StreamResponse:
        who = self.ctx.caller(request)
        ns = self.ctx.namespace(request, who)
        action = await self.ctx.resolver.action(who, self._name(request, ns), cached=True)
        raw = await request.read()
        if len(raw) > MAX_PAYLOAD:
            raise BadRequest(f"The request content was too large: {len(raw)} > {MAX_PAYLOAD}.", 413)
        payload = await read_json(request, {})
        if not isinstance(payload, dict):
            raise BadRequest("The request content was malformed: expected a JSON object.")
        blocking = flag(request, "blocking")
        wait_s = self.ctx.blocking_wait_s
        if "timeout" in request.query:
            try:
                wait_s = min(float(request.query["timeout"]) / 1000, wait_s)
            except ValueError:
                raise BadRequest("The timeout parameter is not a number.") from None
        aid, record = await self.ctx.activator.invoke(
            who, action, payload, blocking=blocking, wait_s=wait_s
        )
        headers = {"x-openwhisk-activation-id": aid}
        if not blocking or record is None:
            return json_response({"activationId": aid}, 202, headers)
        return blocking_response(record, flag(request, "result"), headers)


def blocking_response(
    record: ActivationRecord, result_only: bool, headers: dict[str, str]
) -> web.Response:
    """A finished blocking invoke: 200 on success, 502 for an application or developer
    error, 500 for a system error (the result alone with ``result=true``)."""
    code = record.response.status_code
    status = {StatusCode.SUCCESS: 200, StatusCode.WHISK_ERROR: 500}.get(code, 502)
    view = activation_view(record.to_json())
    body = view["response"].get("result") if result_only else view
    return json_response(body, status, headers)
