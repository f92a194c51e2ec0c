"""The REST subset of OpenWhisk's API that ``wsk`` and the ``openwhisk`` JS client use:
actions, activations, web actions, namespaces. Status codes and error bodies as the stock
controller's (``{"error": ..., "code": <transaction id>}``)."""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from front.cache import DocumentCache
from front.controller import Controller, NoInvokers
from front.entities import (
    BadRequest,
    Limits,
    action_summary,
    action_view,
    activation_summary,
    activation_view,
    annotation,
    new_action_document,
    valid_name,
)
from front.identities import Identities
from whisk.protocol import ProtocolError, QualifiedName, action_from_document, dumps, loads
from whisk.protocol.json import JSONDecodeError
from whisk.protocol.messages import Identity
from whisk.protocol.records import StatusCode
from whisk.store import Conflict, Store, StoreError

log = logging.getLogger(__name__)

MAX_PAYLOAD = 1024 * 1024
MAX_BODY = 50 * 1024 * 1024  # action code up to 48 MB, base64 included
API_INFO = {
    "api_version": "1.0.0",
    "api_version_path": "v1",
    "build": "ow-invoker",
    "buildno": "0.1.0",
    "description": "OpenWhisk API",
    "swagger_paths": {"api-docs": "/api/v1/api-docs", "ui": "/api/v1/docs"},
}

TRANSID = web.RequestKey("transid", str)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error(status: int, message: str, request: web.Request | None = None) -> web.Response:
    code = request.get(TRANSID) if request is not None else None
    return web.json_response(
        {"error": message, "code": code or secrets.token_hex(16)}, status=status
    )


class Api:
    def __init__(
        self,
        controller: Controller,
        store: Store,
        identities: Identities,
        kinds: set[str],
        kind_defaults: dict[str, str],
        limits: Limits = Limits(),
        blocking_wait_s: float = 60.0,
    ) -> None:
        self.controller = controller
        self.store = store
        self.identities = identities
        self.kinds = kinds
        self.kind_defaults = kind_defaults
        self.limits = limits
        self.blocking_wait_s = blocking_wait_s
        self.whisks = controller.whisks_db
        self.activations = controller.activations_db
        self.documents = DocumentCache(
            lambda docid: store.get(self.whisks, docid), controller.clock
        )

    # -- plumbing --

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors], client_max_size=MAX_BODY)
        ns = "/api/v1/namespaces/{ns}"
        app.add_routes(
            [
                web.get("/", self.root),
                web.get("/api/v1", self.info),
                web.get("/ping", self.ping),
                web.get("/invokers", self.invokers),
                web.get("/invokers/healthy/count", self.healthy_count),
                web.get("/metrics", self.metrics),
                web.get("/api/v1/namespaces", self.namespaces),
                web.get(f"{ns}/actions", self.list_actions),
                web.get(f"{ns}/actions/{{name:.+}}", self.get_action),
                web.put(f"{ns}/actions/{{name:.+}}", self.put_action),
                web.delete(f"{ns}/actions/{{name:.+}}", self.delete_action),
                web.post(f"{ns}/actions/{{name:.+}}", self.invoke),
                web.get(f"{ns}/activations", self.list_activations),
                web.get(f"{ns}/activations/{{aid}}", self.get_activation),
                web.get(f"{ns}/activations/{{aid}}/result", self.activation_result),
                web.get(f"{ns}/activations/{{aid}}/logs", self.activation_logs),
                web.route("*", "/api/v1/web/{ns}/{pkg}/{action:.+}", self.web_action),
            ]
        )
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        request[TRANSID] = secrets.token_hex(16)
        try:
            return await handler(request)
        except BadRequest as e:
            return error(e.status, str(e), request)
        except web.HTTPRequestEntityTooLarge:
            return error(413, "The request content was too large.", request)
        except web.HTTPException as e:
            if e.status == 404:
                return error(404, "The requested resource does not exist.", request)
            if e.status == 405:
                return error(405, "The requested method is not allowed.", request)
            raise
        except NoInvokers:
            return error(503, "No invokers available.", request)
        except StoreError as e:
            log.error("store error on %s %s: %s", request.method, request.path, e)
            return error(
                500, "The server encountered an unexpected error with the database.", request
            )
        except Exception:
            log.exception("internal error on %s %s", request.method, request.path)
            return error(500, "An internal error occurred.", request)

    def _auth(self, request: web.Request) -> Identity:
        who = self.identities.authenticate(request.headers.get("Authorization"))
        if who is None:
            raise _Unauthorized()
        return who

    def _namespace(self, request: web.Request, who: Identity) -> str:
        ns = request.match_info["ns"]
        if ns == "_":
            return who.namespace
        if ns != who.namespace:
            raise BadRequest(
                "The supplied authentication is not authorized to access this resource.", 403
            )
        return ns

    async def _json(self, request: web.Request, default: Any = None) -> Any:
        raw = await request.read()
        if not raw.strip():
            return default
        try:
            return loads(raw)
        except (JSONDecodeError, UnicodeDecodeError):
            raise BadRequest("The request content was malformed.") from None

    def _docid(self, ns: str, name: str) -> str:
        name = unquote(name)
        parts = name.split("/")
        if len(parts) > 2:
            raise BadRequest(f"The name '{name}' is not valid.")
        for p in parts:
            valid_name(p)
        return f"{ns}/{name}"

    async def _action_doc(self, docid: str, cached: bool = False) -> dict[str, Any]:
        """The action document; ``cached`` (the invoke paths) may be up to a TTL old."""
        if cached:
            doc = await self.documents.get(docid)
        else:
            doc = await self.store.get(self.whisks, docid)
        if doc is None or doc.get("entityType") != "action":
            raise web.HTTPNotFound()
        return doc

    async def _code(self, doc: dict[str, Any]) -> str | None:
        try:
            action = action_from_document(doc, self.kind_defaults)
        except ProtocolError:
            return None
        if action.code_attachment is not None:
            data = await self.store.get_attachment(self.whisks, doc["_id"], action.code_attachment)
            return action.with_attachment(data).code if data is not None else None
        return action.code

    # -- simple routes --

    async def root(self, request: web.Request) -> web.Response:
        return web.json_response({"description": "OpenWhisk", "api_paths": ["/api/v1"]})

    async def info(self, request: web.Request) -> web.Response:
        return web.json_response(API_INFO)

    async def ping(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "invokers": self.controller.balancer.states()})

    async def invokers(self, request: web.Request) -> web.Response:
        """The stock controller's ``GET /invokers``: ``{"invoker0/<uniqueName>": "up"}``
        (the id as stock prints it, with the displayed name when there is one)."""
        names = ("uniqueName", "displayedName")
        return web.json_response(
            {
                "/".join(
                    [f"invoker{n}", *filter(None, (r.instance_json.get(k) for k in names))]
                ): r.state.value
                for n, r in sorted(self.controller.balancer.invokers.items())
            }
        )

    async def healthy_count(self, request: web.Request) -> web.Response:
        return web.json_response(len(self.controller.balancer.healthy()))

    async def metrics(self, request: web.Request) -> web.Response:
        """Prometheus text, open like ``/ping``: what the front's consumers skipped."""
        return web.Response(
            body=self.controller.metrics.render(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def namespaces(self, request: web.Request) -> web.Response:
        return web.json_response([self._auth(request).namespace])

    # -- actions --

    async def list_actions(self, request: web.Request) -> web.Response:
        ns = self._namespace(request, self._auth(request))
        limit, skip = _paging(request)
        docs = await self.store.find(
            self.whisks, {"namespace": ns, "entityType": "action"}, limit=limit or 200, skip=skip
        )
        return web.json_response([action_summary(d) for d in docs])

    async def get_action(self, request: web.Request) -> web.Response:
        ns = self._namespace(request, self._auth(request))
        doc = await self._action_doc(self._docid(ns, request.match_info["name"]))
        with_code = request.query.get("code", "true") != "false"
        return web.json_response(action_view(doc, await self._code(doc) if with_code else None))

    async def put_action(self, request: web.Request) -> web.Response:
        ns = self._namespace(request, self._auth(request))
        name = unquote(request.match_info["name"])
        docid = self._docid(ns, name)
        body = await self._json(request, {})
        old = await self.store.get(self.whisks, docid)
        if old is not None and old.get("entityType") != "action":
            raise BadRequest("Resource by this name exists but is not in this collection.", 409)
        overwrite = request.query.get("overwrite", "false") == "true"
        if old is not None and not overwrite:
            return error(409, "resource already exists", request)
        old_code = None
        if old is not None and body.get("exec") is None:
            stored = await self._code(old)
            if stored is not None:
                binary = old["exec"].get("binary", False)
                old_code = base64.b64decode(stored) if binary else stored.encode()
        doc, code = new_action_document(
            ns,
            name,
            body,
            kinds=self.kinds,
            kind_defaults=self.kind_defaults,
            limits=self.limits,
            now_ms=self.controller.clock.epoch_ms(),
            old=old,
            old_code=old_code,
        )
        if old is not None:
            doc["_rev"] = old["_rev"]
        self.documents.invalidate(docid)
        try:
            rev = await self.store.put(self.whisks, doc)
            att = doc["exec"].get("code", {}).get("attachmentName", "")
            if att.startswith("couch:") and code is not None:
                rev = await self.store.put_attachment(
                    self.whisks,
                    docid,
                    rev,
                    att[len("couch:") :],
                    code,
                    doc["exec"]["code"]["attachmentType"],
                )
        except Conflict:
            return error(409, "Concurrent modification to resource detected.", request)
        view = action_view(doc, None)
        return web.json_response(view)

    async def delete_action(self, request: web.Request) -> web.Response:
        ns = self._namespace(request, self._auth(request))
        docid = self._docid(ns, request.match_info["name"])
        doc = await self._action_doc(docid)
        self.documents.invalidate(docid)
        await self.store.delete(self.whisks, docid, doc["_rev"])
        return web.json_response(action_view(doc, None))

    async def invoke(self, request: web.Request) -> web.StreamResponse:
        who = self._auth(request)
        ns = self._namespace(request, who)
        doc = await self._action_doc(self._docid(ns, request.match_info["name"]), cached=True)
        raw = await request.read()
        if len(raw) > MAX_PAYLOAD:
            return error(
                413, f"The request content was too large: {len(raw)} > {MAX_PAYLOAD}.", request
            )
        payload = await self._json(request, {})
        if not isinstance(payload, dict):
            raise BadRequest("The request content was malformed: expected a JSON object.")
        blocking = request.query.get("blocking", "false") == "true"
        result_only = request.query.get("result", "false") == "true"
        wait_s = self.blocking_wait_s
        if "timeout" in request.query:
            try:
                wait_s = min(float(request.query["timeout"]) / 1000, self.blocking_wait_s)
            except ValueError:
                raise BadRequest("The timeout parameter is not a number.") from None
        aid, record = await self._activate(who, doc, payload, blocking, wait_s)
        headers = {"x-openwhisk-activation-id": aid}
        if not blocking or record is None:
            return web.json_response({"activationId": aid}, status=202, headers=headers)
        return _blocking_response(record, result_only, headers)

    async def _activate(
        self,
        who: Identity,
        doc: dict[str, Any],
        payload: dict[str, Any],
        blocking: bool,
        wait_s: float,
    ) -> tuple[str, dict[str, Any] | None]:
        params = {p["key"]: p.get("value") for p in doc.get("parameters", [])}
        final = annotation(doc, "final", False)
        for key, value in payload.items():
            if final and key in params:
                raise BadRequest(
                    "Request defines parameters that are not allowed (e.g., "
                    "reserved properties or already defined by admin)."
                )
            params[key] = value
        init_args = tuple(p["key"] for p in doc.get("parameters", []) if p.get("init"))
        limits = doc.get("limits", {})
        path, _, name = doc["_id"].rpartition("/")
        return await self.controller.invoke(
            who,
            QualifiedName(path, name, doc.get("version")),
            doc.get("_rev"),
            limits.get("memory", 256),
            limits.get("timeout", 60_000),
            params,
            blocking=blocking,
            wait_s=wait_s,
            init_args=init_args,
        )

    # -- activations --

    async def list_activations(self, request: web.Request) -> web.Response:
        ns = self._namespace(request, self._auth(request))
        limit, skip = _paging(request)
        selector: dict[str, Any] = {"namespace": ns}
        start: dict[str, int] = {}
        for param, op in (("since", "$gte"), ("upto", "$lte")):
            if param in request.query:
                try:
                    start[op] = int(request.query[param])
                except ValueError:
                    raise BadRequest(f"The {param} parameter is not a number.") from None
        selector["start"] = start or {"$gt": 0}
        if "name" in request.query:
            selector["name"] = request.query["name"].rsplit("/", 1)[-1]
        docs = await self.store.find(
            self.activations,
            selector,
            sort=[{"namespace": "desc"}, {"start": "desc"}],
            limit=limit or 30,
            skip=skip,
        )
        full = request.query.get("docs", "false") == "true"
        return web.json_response(
            [activation_view(d) if full else activation_summary(d) for d in docs]
        )

    async def _activation(self, request: web.Request) -> dict[str, Any]:
        ns = self._namespace(request, self._auth(request))
        aid = request.match_info["aid"]
        if not aid.isalnum() or len(aid) > 64:
            raise web.HTTPNotFound()
        doc = await self.store.get(self.activations, f"{ns}/{aid}")
        if doc is None:
            raise web.HTTPNotFound()
        return doc

    async def get_activation(self, request: web.Request) -> web.Response:
        return web.json_response(activation_view(await self._activation(request)))

    async def activation_result(self, request: web.Request) -> web.Response:
        return web.json_response(activation_view(await self._activation(request))["response"])

    async def activation_logs(self, request: web.Request) -> web.Response:
        return web.json_response({"logs": (await self._activation(request)).get("logs", [])})

    # -- web actions --

    async def web_action(self, request: web.Request) -> web.StreamResponse:
        ns, pkg = request.match_info["ns"], request.match_info["pkg"]
        name, _, ext = request.match_info["action"].rpartition(".")
        if not name:
            name, ext = request.match_info["action"], "http"
        try:
            doc = await self._action_doc(
                self._docid(ns, name if pkg == "default" else f"{pkg}/{name}"), cached=True
            )
        except (web.HTTPNotFound, BadRequest):
            return error(404, "The requested resource does not exist.", request)
        if annotation(doc, "web-export") not in (True, "true"):
            return error(404, "The requested resource does not exist.", request)
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
        owner = next((i for i in self.identities.by_key.values() if i.namespace == ns), None)
        if owner is None:
            return error(404, "The requested resource does not exist.", request)
        aid, record = await self._activate(owner, doc, params, True, self.blocking_wait_s)
        headers = {"x-openwhisk-activation-id": aid}
        if record is None:
            return web.json_response({"activationId": aid}, status=202, headers=headers)
        code = StatusCode(record["response"]["statusCode"])
        result = record["response"].get("result")
        if code != StatusCode.SUCCESS:
            status = 500 if code == StatusCode.WHISK_ERROR else 400
            message = result.get("error") if isinstance(result, dict) else result
            return error(status, str(message) if message else code.status)
        if ext == "json":
            return web.json_response(result, headers=headers)
        if ext == "http" and isinstance(result, dict):
            status = result.get("statusCode", 200)
            body = result.get("body", "")
            hdrs = {**headers, **{k: str(v) for k, v in (result.get("headers") or {}).items()}}
            if isinstance(body, dict | list):
                return web.json_response(body, status=status, headers=hdrs)
            return web.Response(text=str(body), status=status, headers=hdrs)
        text = result.get(ext, "") if isinstance(result, dict) else ""
        return web.Response(
            text=str(text),
            headers=headers,
            content_type="text/html" if ext == "html" else "text/plain",
        )


class _Unauthorized(BadRequest):
    def __init__(self) -> None:
        super().__init__("The supplied authentication is invalid.", 401)


def _paging(request: web.Request) -> tuple[int, int]:
    try:
        limit = int(request.query.get("limit", 0))
        skip = int(request.query.get("skip", 0))
    except ValueError:
        raise BadRequest("The limit and skip parameters must be numbers.") from None
    if limit < 0 or limit > 200 or skip < 0:
        raise BadRequest("The limit must be between 0 and 200, and skip non-negative.")
    return limit, skip


def _blocking_response(
    record: dict[str, Any], result_only: bool, headers: dict[str, str]
) -> web.Response:
    code = StatusCode(record["response"]["statusCode"])
    status = {StatusCode.SUCCESS: 200, StatusCode.WHISK_ERROR: 500}.get(code, 502)
    view = activation_view(record)
    body = view["response"].get("result") if result_only else view
    return web.Response(
        body=dumps(body), status=status, headers=headers, content_type="application/json"
    )
