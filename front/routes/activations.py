"""``/namespaces/{ns}/activations``: the caller's activation records, newest first, with
stock's filters (``name``, ``since``, ``upto`` in epoch ms, ``skip``, ``limit``, ``docs``,
``count``) — what ``wsk activation list`` and ``wsk activation poll`` read."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from front.entities import activation_summary, activation_view, annotation
from front.http import BadRequest, NotFound, flag, json_response, paging
from front.names import valid_name
from front.routes.context import Context

# Records read per store query while filtering by a packaged name.
_BATCH = 200


class ActivationRoutes:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def routes(self, ns: str) -> list[web.RouteDef]:
        return [
            web.get(f"{ns}/activations", self.index),
            web.get(f"{ns}/activations/{{aid}}", self.get),
            web.get(f"{ns}/activations/{{aid}}/result", self.result),
            web.get(f"{ns}/activations/{{aid}}/logs", self.logs),
        ]

    async def index(self, request: web.Request) -> web.Response:
        who = self.ctx.caller(request)
        ns = self.ctx.own_namespace(request, who)
        limit, skip = paging(request, "activations")
        docs, count = flag(request, "docs"), flag(request, "count")
        if docs and count:
            raise BadRequest("The parameter 'docs' is not permitted with 'count'.")
        selector: dict[str, Any] = {"namespace": ns, "start": _window(request)}
        package, name = _name_filter(request)
        if name is not None:
            selector["name"] = name
        if count:
            found = await self._find(selector, package, 0, None)
            return json_response({"activations": max(0, len(found) - skip)})
        found = await self._find(selector, package, skip, limit)
        view = activation_view if docs else activation_summary
        return json_response([view(d) for d in found])

    async def _find(
        self, selector: dict[str, Any], package: str | None, skip: int, limit: int | None
    ) -> list[dict[str, Any]]:
        """Records newest first; with a package in the name filter, only those whose
        ``path`` annotation names that package (read in batches, filtered here)."""
        sort = [{"namespace": "desc"}, {"start": "desc"}]
        if package is None and limit is not None:
            return await self.ctx.store.find(
                self.ctx.activations_db, selector, sort=sort, limit=limit, skip=skip
            )
        out: list[dict[str, Any]] = []
        offset = 0
        while limit is None or len(out) < skip + limit:
            batch = await self.ctx.store.find(
                self.ctx.activations_db, selector, sort=sort, limit=_BATCH, skip=offset
            )
            out.extend(d for d in batch if package is None or _in_package(d, package))
            if len(batch) < _BATCH:
                break
            offset += _BATCH
        return out[skip:] if limit is None else out[skip : skip + limit]

    async def _activation(self, request: web.Request) -> dict[str, Any]:
        who = self.ctx.caller(request)
        ns = self.ctx.own_namespace(request, who)
        aid = request.match_info["aid"]
        if not aid.isalnum() or len(aid) > 64:
            raise NotFound()
        doc = await self.ctx.store.get(self.ctx.activations_db, f"{ns}/{aid}")
        if doc is None:
            raise NotFound()
        return doc

    async def get(self, request: web.Request) -> web.Response:
        return json_response(activation_view(await self._activation(request)))

    async def result(self, request: web.Request) -> web.Response:
        return json_response(activation_view(await self._activation(request))["response"])

    async def logs(self, request: web.Request) -> web.Response:
        return json_response({"logs": (await self._activation(request)).get("logs", [])})


def _window(request: web.Request) -> dict[str, int]:
    """The ``start`` range of ``since``/``upto`` (epoch milliseconds, inclusive)."""
    window: dict[str, int] = {}
    for param, op in (("since", "$gte"), ("upto", "$lte")):
        if param in request.query:
            try:
                window[op] = int(request.query[param])
            except ValueError:
                raise BadRequest(
                    f"Parameter is not a valid value for epoch seconds: {request.query[param]}"
                ) from None
    return window or {"$gt": 0}


def _name_filter(request: web.Request) -> tuple[str | None, str | None]:
    """(package, name) of ``name=[pkg/]name`` (a leading namespace is ignored, as the CLI
    may send ``ns/pkg/name``)."""
    value = request.query.get("name")
    if not value:
        return None, None
    parts = value.strip("/").split("/")
    if len(parts) > 3:
        raise BadRequest(f"Parameter may be a 'simple' name or 'package-name/simple' name: {value}")
    for p in parts:
        valid_name(p)
    return (parts[-2] if len(parts) > 1 else None), parts[-1]


def _in_package(record: dict[str, Any], package: str) -> bool:
    path = annotation(record, "path")
    return isinstance(path, str) and path.split("/")[1:-1] == [package]
