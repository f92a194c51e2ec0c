"""A stub of the OpenWhisk REST API for testing the load generator and runner mechanics.

It stores actions, and answers invokes after a per-action delay on ``cores`` slots (so calls
queue and get a ``waitTime``), with records shaped like OpenWhisk's and results shaped like the
SeBS wrapper's. It runs no code: end-to-end tests use the real platform.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from aiohttp import web

# The kinds of apache/openwhisk's stock runtimes manifest (ansible/files/runtimes.json) a
# runner may use, plus blackbox; a stock controller answers 400 for any other (python:3).
STOCK_KINDS = {"nodejs:18", "nodejs:20", "python:3.10", "python:3.11", "blackbox"}


class StubOpenWhisk:
    def __init__(
        self,
        cores: int = 2,
        delays: dict[str, float] | None = None,
        default_delay: float = 0.01,
        accept_after_s: float | None = None,
    ) -> None:
        self.cores = cores
        self.delays = delays or {}
        self.default_delay = default_delay
        self.accept_after_s = accept_after_s  # answer 202 like stock OW past its blocking wait
        self.actions: dict[str, dict] = {}
        self.records: dict[str, dict] = {}
        self.arrivals: list[tuple[float, str]] = []  # (monotonic time, action)
        self.warm: set[str] = set()
        self._sem: asyncio.Semaphore | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    def app(self) -> web.Application:
        app = web.Application()
        ns = "/api/v1/namespaces/{ns}"
        app.router.add_get(ns + "/actions", self.list_actions)
        app.router.add_put(ns + "/actions/{name}", self.put_action)
        app.router.add_get(ns + "/actions/{name}", self.get_action)
        app.router.add_delete(ns + "/actions/{name}", self.delete_action)
        app.router.add_post(ns + "/actions/{name}", self.invoke)
        app.router.add_get(ns + "/activations/{aid}", self.get_activation)
        app.router.add_post("/api/v1/web/{ns}/{pkg}/{name}.json", self.invoke)
        return app

    async def start(self) -> str:
        self._sem = asyncio.Semaphore(self.cores)
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def list_actions(self, request: web.Request) -> web.Response:
        return web.json_response([{"name": n, "namespace": "guest"} for n in self.actions])

    async def put_action(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = request.match_info["name"]
        kind = body.get("exec", {}).get("kind")
        if kind not in STOCK_KINDS:
            return web.json_response({"error": f"kind '{kind}' not in the manifest"}, status=400)
        self.actions[name] = {"name": name, "namespace": "guest", **body}
        return web.json_response({k: v for k, v in self.actions[name].items() if k != "exec"})

    async def get_action(self, request: web.Request) -> web.Response:
        action = self.actions.get(request.match_info["name"])
        if action is None:
            return web.json_response(
                {"error": "The requested resource does not exist."}, status=404
            )
        return web.json_response(action)

    async def delete_action(self, request: web.Request) -> web.Response:
        if self.actions.pop(request.match_info["name"], None) is None:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response({})

    async def get_activation(self, request: web.Request) -> web.Response:
        record = self.records.get(request.match_info["aid"])
        if record is None:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response(record)

    async def invoke(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.arrivals.append((time.monotonic(), name))
        if name not in self.actions:
            return web.json_response(
                {"error": "The requested resource does not exist."}, status=404
            )
        params = await request.json() if request.can_read_body else {}
        aid = uuid.uuid4().hex
        task = asyncio.ensure_future(self._run(name, aid, params))
        if self.accept_after_s is not None:
            done, _ = await asyncio.wait({task}, timeout=self.accept_after_s)
            if not done:
                return web.json_response({"activationId": aid}, status=202)
        record = await task
        headers = {"x-openwhisk-activation-id": aid}
        if request.query.get("result") == "true" or "/web/" in request.path:
            return web.json_response(record["response"]["result"], headers=headers)
        return web.json_response(record, headers=headers)

    async def _run(self, name: str, aid: str, params: dict[str, Any]) -> dict:
        arrival = time.time()
        assert self._sem is not None
        async with self._sem:
            start = time.time()
            cold = name not in self.warm
            self.warm.add(name)
            delay = self.delays.get(name, self.default_delay)
            await asyncio.sleep(delay)
            end = time.time()
        result = {
            "begin": f"{start:.6f}",
            "end": f"{end:.6f}",
            "request_id": aid,
            "results_time": (end - start) * 1e6,
            "is_cold": cold,
            "result": {"result": params.get("echo", 1)},
        }
        annotations = [
            {"key": "path", "value": f"guest/{name}"},
            {"key": "kind", "value": self.actions.get(name, {}).get("exec", {}).get("kind")},
            {"key": "waitTime", "value": int((start - arrival) * 1e3)},
        ]
        if cold:
            annotations.append({"key": "initTime", "value": 5})
        record = {
            "activationId": aid,
            "name": name,
            "namespace": "guest",
            "start": int(start * 1e3),
            "end": int(end * 1e3),
            "duration": int((end - start) * 1e3),
            "annotations": annotations,
            "response": {"status": "success", "statusCode": 0, "success": True, "result": result},
        }
        self.records[aid] = record
        return record
