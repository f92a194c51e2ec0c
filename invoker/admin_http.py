"""The invoker's HTTP server (spec 4.6): ``/ping``, ``/health`` and ``/metrics`` open;
``/enable``, ``/disable``, ``/isEnabled`` (the stock invoker's three), ``/status``,
``/activations``, ``/pool`` and ``/scheduler`` behind basic auth; in the scheduler mode
``/pool`` is FPCInvokerServer's (the container counts) and ``/pool/count`` is added.
docs/operations.md documents them.

``/ping`` answers ``pong`` while the process serves HTTP, as the stock invoker's does;
``/health`` answers 200 only while the node can work (the same condition under which it
pings the controller) and 503 with the reasons otherwise.

The password is ``--admin-password`` (or ``CONFIG_whisk_invoker_password``) when given,
else a random one kept in ``<state-dir>/admin.password`` (0600): no fixed password that an
action or another local user could guess and ``POST /disable`` the node with."""

from __future__ import annotations

import base64
import hmac
import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from invoker import nodeview
from whisk.private import kept_secret

if TYPE_CHECKING:
    from invoker.config import InvokerConfig
    from invoker.service import Invoker

log = logging.getLogger(__name__)
PASSWORD_FILE = "admin.password"


def password_file(cfg: InvokerConfig) -> Path:
    """Where the generated admin password is kept when none is configured."""
    return Path(cfg.state_dir) / PASSWORD_FILE


def admin_credentials(cfg: InvokerConfig) -> tuple[str, str]:
    """(user, password) of the admin API: the configured password, else the kept random one."""
    if cfg.admin_password:
        return cfg.admin_user, cfg.admin_password
    return cfg.admin_user, kept_secret(password_file(cfg))


def authorized(header: str | None, user: str, password: str) -> bool:
    """Whether an ``Authorization`` header carries exactly ``user:password`` (basic)."""
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        given = base64.b64decode(encoded, validate=True)
    except ValueError:
        return False
    return hmac.compare_digest(given, f"{user}:{password}".encode())


CONTENT_TYPE_PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


def admin_app(invoker: Invoker) -> web.Application:
    user, password = admin_credentials(invoker.config)
    name = invoker.instance.label

    @web.middleware
    async def auth(request: web.Request, handler):
        if request.path not in ("/ping", "/health", "/metrics") and not authorized(
            request.headers.get("Authorization"), user, password
        ):
            return web.Response(
                status=401,
                text="Unauthorized",
                headers={"WWW-Authenticate": 'Basic realm="invoker"'},
            )
        return await handler(request)

    async def ping(_: web.Request) -> web.Response:
        return web.Response(text="pong")

    async def health(_: web.Request) -> web.Response:
        problems = invoker.health.problems
        if (tasks := invoker.supervisor.problem()) is not None:
            problems["tasks"] = tasks
        body = {"healthy": not problems, "enabled": invoker.enabled, "problems": problems}
        return web.json_response(body, status=503 if problems else 200)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=invoker.metrics.render(),
            content_type=None,
            headers={"Content-Type": CONTENT_TYPE_PROMETHEUS},
        )

    async def enable(_: web.Request) -> web.Response:
        changed = await invoker.set_enabled(True)
        return web.Response(text=f"{name} is {'now' if changed else 'already'} enabled.")

    async def disable(_: web.Request) -> web.Response:
        changed = await invoker.set_enabled(False)
        return web.Response(text=f"{name} is {'now' if changed else 'already'} disabled.")

    async def is_enabled(_: web.Request) -> web.Response:
        return web.json_response({"enabled": invoker.enabled})

    async def status(_: web.Request) -> web.Response:
        return web.json_response(invoker.status())

    def _limit(request: web.Request) -> int | None:
        try:
            limit = int(request.query.get("limit", "100"))
        except ValueError:
            return None
        return limit if limit >= 0 else None

    async def activations(request: web.Request) -> web.Response:
        if (limit := _limit(request)) is None:
            return web.json_response({"error": "limit must be a whole number >= 0"}, status=400)
        return web.json_response(nodeview.activations(invoker, limit))

    async def scheduler(request: web.Request) -> web.Response:
        if (limit := _limit(request)) is None:
            return web.json_response({"error": "limit must be a whole number >= 0"}, status=400)
        return web.json_response(nodeview.scheduler(invoker, limit))

    async def pool(_: web.Request) -> web.Response:
        if invoker.fpc is not None:  # FPCInvokerServer's: upstream's TotalContainerPoolState
            return web.json_response(invoker.fpc.pool_state())
        return web.json_response(nodeview.pool(invoker))

    async def pool_count(_: web.Request) -> web.Response:
        """FPCInvokerServer's: containers busy, paused and in progress, as a bare number."""
        if invoker.fpc is None:
            return web.Response(status=404, text="the scheduler mode's (--mode fpc)")
        return web.json_response(invoker.fpc.pool_count())

    app = web.Application(middlewares=[auth])
    app.add_routes(
        [
            web.get("/ping", ping),
            web.get("/health", health),
            web.get("/metrics", metrics),
            web.post("/enable", enable),
            web.post("/disable", disable),
            web.get("/isEnabled", is_enabled),
            web.get("/status", status),
            web.get("/activations", activations),
            web.get("/pool", pool),
            web.get("/pool/", pool),
            web.get("/pool/count", pool_count),
            web.get("/scheduler", scheduler),
        ]
    )
    return app


async def serve_admin(
    invoker: Invoker, host: str, port: int, ssl_context: ssl.SSLContext | None = None
) -> web.AppRunner:
    """``ssl_context``: https (the stock ``CONFIG_whisk_invoker_protocol``)."""
    runner = web.AppRunner(admin_app(invoker), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
    if not invoker.config.admin_password:
        log.info(
            "admin API on %s:%s: user %s, password in %s",
            host,
            port,
            invoker.config.admin_user,
            password_file(invoker.config),
        )
    return runner
