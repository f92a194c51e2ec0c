"""A small asyncio client for the standard OpenWhisk REST API (what ``wsk`` speaks).

Only the calls the benchmarks need: create/get/delete/list actions, invoke (REST or web
action) and read activation records. It works against stock OpenWhisk and ``ow-invoker
standalone`` alike, since both serve ``/api/v1``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp

GUEST_AUTH = (
    "23bc46b1-71f6-4ed5-8c54-816aa4f8c502:"
    "123zO3xZCLrMN6v2BKK1dXYFpXlPkccOFqm12CdAsMgRU4VrNZ9lyGVCGuMDGIwP"
)
DEFAULT_APIHOST = "http://127.0.0.1:3233"


def default_apihost() -> str:
    host = os.environ.get("OW_APIHOST") or os.environ.get("__OW_API_HOST") or DEFAULT_APIHOST
    return host if "://" in host else f"http://{host}"


def default_auth() -> str:
    return os.environ.get("OW_AUTH") or GUEST_AUTH


class OpenWhiskError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


@dataclass
class InvokeReply:
    """A raw invoke reply: status, parsed JSON body (or None) and the activation id if known."""

    status: int
    body: Any
    activation_id: str
    text: str = ""

    @property
    def record(self) -> dict | None:
        """The activation record, when the reply carries one (``blocking=true&result=false``)."""
        if isinstance(self.body, dict) and "response" in self.body and "activationId" in self.body:
            return self.body
        return None


@dataclass
class OpenWhisk:
    """One namespace on one API host. Use as ``async with OpenWhisk(...) as ow``."""

    apihost: str = field(default_factory=default_apihost)
    auth: str = field(default_factory=default_auth)
    namespace: str = "_"
    timeout_s: float = 600.0
    web_namespace: str = "guest"
    _session: aiohttp.ClientSession | None = field(default=None, init=False, repr=False)

    async def __aenter__(self) -> OpenWhisk:
        basic = base64.b64encode(self.auth.encode()).decode()
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            # open-loop load keeps many blocking invokes in flight: no connection cap
            connector=aiohttp.TCPConnector(limit=0),
            headers={"Accept": "application/json", "Authorization": f"Basic {basic}"},
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("use 'async with OpenWhisk(...)'")
        return self._session

    def url(self, *parts: str) -> str:
        base = self.apihost.rstrip("/")
        ns = quote(self.namespace, safe="")
        return f"{base}/api/v1/namespaces/{ns}/" + "/".join(quote(p, safe="") for p in parts)

    def web_url(self, action: str, package: str = "default") -> str:
        return f"{self.apihost.rstrip('/')}/api/v1/web/{self.web_namespace}/{package}/{action}.json"

    async def _json(self, method: str, url: str, **kw: Any) -> Any:
        async with self.session.request(method, url, **kw) as resp:
            text = await resp.text()
            if resp.status >= 400:
                raise OpenWhiskError(resp.status, _error_text(text))
            return json.loads(text) if text else None

    # --- actions -------------------------------------------------------------------------

    async def put_action(
        self,
        name: str,
        zip_bytes: bytes,
        *,
        kind: str = "python:3.11",
        image: str | None = None,
        memory_mb: int = 256,
        timeout_ms: int = 60_000,
        parameters: dict[str, Any] | None = None,
        web: bool = True,
    ) -> dict:
        """Create or replace a zip action (``wsk action update NAME f.zip --kind K --web true``).

        With ``image`` the action is a blackbox one (``--docker IMAGE``), as SeBS deploys to
        stock OpenWhisk with an image holding the dependencies; the zip then carries the code.
        """
        code = base64.b64encode(zip_bytes).decode()
        exec_ = {"kind": kind, "code": code, "binary": True, "main": "main"}
        if image:
            exec_ = {
                "kind": "blackbox",
                "image": image,
                "code": code,
                "binary": True,
                "main": "main",
            }
        body = {
            "exec": exec_,
            "limits": {"memory": memory_mb, "timeout": timeout_ms, "logs": 10, "concurrency": 1},
            "parameters": [{"key": k, "value": v} for k, v in (parameters or {}).items()],
            "annotations": [
                {"key": "web-export", "value": web},
                {"key": "raw-http", "value": False},
                {"key": "final", "value": True},
                {"key": "provide-api-key", "value": False},
            ],
        }
        return await self._json(
            "PUT", self.url("actions", name), params={"overwrite": "true"}, json=body
        )

    async def get_action(self, name: str, code: bool = False) -> dict:
        return await self._json(
            "GET", self.url("actions", name), params={"code": str(code).lower()}
        )

    async def delete_action(self, name: str) -> None:
        try:
            await self._json("DELETE", self.url("actions", name))
        except OpenWhiskError as e:
            if e.status != 404:
                raise

    async def list_actions(self, limit: int = 200) -> list[dict]:
        return await self._json("GET", self.url("actions"), params={"limit": str(limit)}) or []

    # --- invocations -----------------------------------------------------------------------

    async def invoke(
        self,
        action: str,
        params: dict[str, Any] | None = None,
        *,
        blocking: bool = True,
        result: bool = False,
        web: bool = False,
    ) -> InvokeReply:
        """POST one invocation; never raises on HTTP errors (load tests count them)."""
        if web:
            url, query = self.web_url(action), {}
        else:
            url = self.url("actions", action)
            query = {"blocking": str(blocking).lower(), "result": str(result).lower()}
        async with self.session.post(url, params=query, json=params or {}) as resp:
            text = await resp.text()
            try:
                body = json.loads(text) if text else None
            except ValueError:
                body = None
            aid = resp.headers.get("x-openwhisk-activation-id", "")
            if not aid and isinstance(body, dict):
                aid = str(body.get("activationId", ""))
            return InvokeReply(resp.status, body, aid, text if body is None else "")

    async def activation(self, activation_id: str) -> dict | None:
        """The activation record, or None while it is not (yet) stored."""
        try:
            return await self._json("GET", self.url("activations", activation_id))
        except OpenWhiskError as e:
            if e.status == 404:
                return None
            raise

    async def wait_activation(
        self,
        activation_id: str,
        timeout_s: float = 60.0,
        every_s: float = 0.5,
        max_every_s: float = 5.0,
    ) -> dict | None:
        """Poll until the record exists (records are written after the reply is sent).

        The interval grows from ``every_s`` to ``max_every_s``: hundreds of calls past a
        controller's blocking wait would otherwise poll the platform they are measuring.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            record = await self.activation(activation_id)
            if record is not None or loop.time() >= deadline:
                return record
            await asyncio.sleep(min(every_s, max(0.0, deadline - loop.time())))
            every_s = min(max_every_s, every_s * 1.5)

    async def ready(self) -> bool:
        """True when the API answers an authenticated list (used to wait for a platform)."""
        try:
            await self._json("GET", self.url("actions"), params={"limit": "1"})
        except (TimeoutError, aiohttp.ClientError, OpenWhiskError, ValueError):
            return False
        return True

    async def invokers_ready(self) -> bool:
        """Is an invoker healthy? Reads ``/ping`` (ow-invoker's front) or ``/invokers`` (stock
        controller); True when neither exists, since then only an invoke can tell."""
        base = self.apihost.rstrip("/")
        for path, key in (("/ping", "invokers"), ("/invokers", None)):
            try:
                async with self.session.get(base + path) as resp:
                    if resp.status == 404:
                        continue
                    body = await resp.json(content_type=None)
            except (TimeoutError, aiohttp.ClientError, ValueError):
                continue
            states = body.get(key) if key else body
            if isinstance(states, dict):
                return any(str(v).lower() in ("healthy", "up") for v in states.values())
        return True

    async def wait_invokers(self, timeout_s: float = 120.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not await self.invokers_ready():
            if loop.time() >= deadline:
                raise TimeoutError(f"no healthy invoker behind {self.apihost} after {timeout_s} s")
            await asyncio.sleep(0.5)


def annotation(record: dict, key: str, default: Any = None) -> Any:
    for a in record.get("annotations") or ():
        if a.get("key") == key:
            return a.get("value")
    return default


def _error_text(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])
    return text[:300]
