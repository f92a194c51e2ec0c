"""The live console's routes, mounted on the front's app at ``/console``.

The page (``static/``) uses the REST API for actions like any client, with basic auth. The
scheduler view comes from a callable the embedding process passes (the standalone passes
the invoker's snapshot, :func:`invoker.nodeview.scheduler`); the front never imports the
invoker. A user's key shows only that namespace's functions (the node's core loads aside);
the operator's credentials (the invoker's admin user) show every namespace. Chart.js is
served from ``.cache/console/node_modules`` (``scripts/install.sh console``): no CDN is
reachable, and the page must work offline.

No key is ever handed out here: any process on the machine (an action too) can ask from a
loopback address. The standalone prints the console's address with the guest key in the
URL's fragment (``/console#auth=UUID:KEY``), which the browser keeps and never sends.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from front.identities import Identities

# The node's scheduler, at most ``limit`` queued calls listed, only the functions of the
# namespace given (None: every one) (invoker.nodeview.scheduler).
NodeView = Callable[[int, str | None], Mapping[str, Any]]
# Whether an Authorization header carries the operator's (admin) credentials.
Operator = Callable[[str | None], bool]

STATIC = Path(__file__).resolve().parent / "static"
INSTALL_HINT = "scripts/install.sh console"
# What the page loads from the installed npm packages, by the name it asks for.
LIBRARIES = {"chart.umd.min.js": Path("chart.js") / "dist" / "chart.umd.min.js"}
NO_VIEW = (
    "The scheduler view needs an invoker in this process (ow-invoker standalone). This front "
    "has none: each invoker serves its own at GET /scheduler on its admin port (basic auth "
    "with the admin user, --admin-port)."
)


def node_modules() -> Path:
    """Where ``scripts/install.sh console`` puts the console's npm packages
    (``$OW_CACHE_DIR/console``, by default the checkout's ``.cache/console``)."""
    cache = os.environ.get("OW_CACHE_DIR")
    base = Path(cache) if cache else Path(__file__).resolve().parents[2] / ".cache"
    return base / "console" / "node_modules"


def mount_console(
    app: web.Application,
    *,
    identities: Identities,
    kinds: Iterable[str],
    node_view: NodeView | None = None,
    operator: Operator | None = None,
) -> None:
    """Add ``/console`` (the page), ``/console/static/`` (its code), ``/console/lib/``
    (Chart.js) and ``/console/api/{config,scheduler}`` to ``app``."""
    index = STATIC / "index.html"
    kind_list = sorted(kinds)

    async def page(_: web.Request) -> web.FileResponse:
        return web.FileResponse(index, headers={"Cache-Control": "no-cache"})

    async def library(request: web.Request) -> web.StreamResponse:
        relative = LIBRARIES.get(request.match_info["name"])
        if relative is None:
            raise web.HTTPNotFound()
        path = node_modules() / relative
        if not path.is_file():
            return web.Response(
                status=404,
                text=f"// {relative} is not installed: run `{INSTALL_HINT}`\n",
                content_type="application/javascript",
            )
        return web.FileResponse(path)

    async def config(_: web.Request) -> web.Response:
        charts = (node_modules() / LIBRARIES["chart.umd.min.js"]).is_file()
        return web.json_response(
            {
                "kinds": kind_list,
                "scheduler": node_view is not None,
                "charts": charts,
                "chartsHint": None
                if charts
                else f"Charts need Chart.js: run `{INSTALL_HINT}` (npm; installs it in "
                f"{node_modules()}) and reload.",
            }
        )

    async def scheduler(request: web.Request) -> web.Response:
        header = request.headers.get("Authorization")
        everyone = operator is not None and operator(header)
        who = None if everyone else identities.authenticate(header)
        if who is None and not everyone:
            return web.json_response(
                {"error": "The supplied authentication is invalid."}, status=401
            )
        if node_view is None:
            return web.json_response({"available": False, "error": NO_VIEW}, status=404)
        try:
            limit = int(request.query.get("limit", "50"))
        except ValueError:
            limit = -1
        if limit < 0:
            return web.json_response({"error": "limit must be a whole number >= 0"}, status=400)
        namespace = None if who is None else who.namespace
        view = node_view(limit, namespace)
        return web.json_response({"available": True, "namespace": namespace, **view})

    app.add_routes(
        [
            web.get("/console", page),
            web.get("/console/", page),
            web.get("/console/lib/{name}", library),
            web.get("/console/api/config", config),
            web.get("/console/api/scheduler", scheduler),
            web.static("/console/static", STATIC, append_version=False),
        ]
    )
