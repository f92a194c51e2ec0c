"""The controller's open endpoints: API info, ``/ping``, ``/invokers``, ``/metrics``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from front.controller import Controller
from front.entities import Limits
from front.http import json_response
from whisk.manifest import Manifest

API_INFO = {
    "api_version": "1.0.0",
    "api_version_path": "v1",
    "build": "ow-invoker",
    "buildno": "0.1.0",
    "description": "OpenWhisk API",
    "swagger_paths": {"api-docs": "/api/v1/api-docs", "ui": "/api/v1/docs"},
}


MB = 1024 * 1024


def platform_info(manifest: Manifest, limits: Limits, sequence_max_length: int) -> dict[str, Any]:
    """What ``GET /`` tells clients as stock does: the API paths, the system limits and the
    runtimes by family (deployment tools check a manifest's kinds against it)."""
    runtimes: dict[str, list[dict[str, Any]]] = {}
    for r in manifest.runtimes.values():
        runtimes.setdefault(r.family, []).append(
            {
                "kind": r.kind,
                "image": r.image,
                "deprecated": False,
                "default": r.default,
                "attached": True,
                "requireMain": False,
            }
        )
    return {
        "description": "OpenWhisk",
        "support": {"github": "https://github.com/apache/openwhisk/issues"},
        "api_paths": ["/api/v1"],
        "limits": {
            "sequence_length": sequence_max_length,
            "min_action_duration": limits.min_timeout_ms,
            "max_action_duration": limits.max_timeout_ms,
            "min_action_memory": limits.min_memory_mb * MB,
            "max_action_memory": limits.max_memory_mb * MB,
            "min_action_logs": 0,
            "max_action_logs": limits.max_logs_mb * MB,
        },
        "runtimes": runtimes,
    }


class SystemRoutes:
    def __init__(
        self,
        controller: Controller,
        manifest: Manifest,
        limits: Limits,
        sequence_max_length: int,
    ) -> None:
        self.controller = controller
        self.info_body = platform_info(manifest, limits, sequence_max_length)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.root),
            web.get("/api/v1", self.info),
            web.get("/ping", self.ping),
            web.get("/invokers", self.invokers),
            web.get("/invokers/healthy/count", self.healthy_count),
            web.get("/metrics", self.metrics),
        ]

    async def root(self, request: web.Request) -> web.Response:
        return json_response(self.info_body)

    async def info(self, request: web.Request) -> web.Response:
        return json_response(API_INFO)

    async def ping(self, request: web.Request) -> web.Response:
        return json_response({"ok": True, "invokers": self.controller.balancer.states()})

    async def invokers(self, request: web.Request) -> web.Response:
        """The stock controller's ``GET /invokers``: ``{"invoker0/<uniqueName>": "up"}``
        (the id as stock prints it, with the displayed name when there is one)."""
        return json_response(self.controller.invoker_states())

    async def healthy_count(self, request: web.Request) -> web.Response:
        return json_response(self.controller.healthy_count())

    async def metrics(self, request: web.Request) -> web.Response:
        """Prometheus text, open like ``/ping``: what the front's consumers skipped."""
        return web.Response(
            body=self.controller.metrics.render(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )
