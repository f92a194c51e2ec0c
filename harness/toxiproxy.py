"""Toxiproxy's HTTP API (Shopify's TCP fault proxy), for the chaos tests: proxies between the
invoker and its services, and the faults ("toxics") put on them.

A toxic acts on one direction of a proxy's connections: ``downstream`` (from the service to
the client, the default) or ``upstream``. The ones the tests use: ``latency`` (``latency``
ms, ``jitter``), ``timeout`` (data held; with ``timeout=0`` the connection stays open and
silent: a half-open link), ``bandwidth`` (``rate`` KB/s), ``reset_peer``. A disabled proxy
closes its connections and refuses new ones: a cut link.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp


class ToxiproxyError(RuntimeError):
    """Toxiproxy refused a request; the message carries its answer."""


class Toxiproxy:
    """A client of one Toxiproxy server's API (``http://127.0.0.1:8474``)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Toxiproxy:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        if self._http is None:
            # A connection per request: a kept-alive one that the server has closed while
            # a fault lasted failed the request that lifts it (ServerDisconnectedError).
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=10),
                connector=aiohttp.TCPConnector(force_close=True),
            )
        async with self._http.request(method, self.url + path, json=body) as r:
            text = await r.text()
            if r.status >= 300 and not (method == "DELETE" and r.status == 404):
                raise ToxiproxyError(f"{method} {path}: {r.status} {text[:300]}")
            return await r.json(content_type=None) if text else None

    async def proxy(self, name: str, listen: str, upstream: str) -> Proxy:
        """A fresh proxy (one of that name is replaced): ``listen`` and ``upstream`` are
        ``host:port``."""
        await self.request("DELETE", f"/proxies/{name}")
        body = {"name": name, "listen": listen, "upstream": upstream, "enabled": True}
        await self.request("POST", "/proxies", body)
        return Proxy(self, name, listen)

    async def reset(self) -> None:
        """Every proxy enabled and without toxics."""
        await self.request("POST", "/reset")


@dataclass(frozen=True)
class Proxy:
    api: Toxiproxy
    name: str
    listen: str

    async def add(
        self, kind: str, stream: str = "downstream", toxicity: float = 1.0, **attributes: Any
    ) -> str:
        """Put a toxic on the proxy; returns its name (for :meth:`remove`)."""
        name = f"{kind}_{stream}"
        body = {
            "name": name,
            "type": kind,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": attributes,
        }
        await self.api.request("POST", f"/proxies/{self.name}/toxics", body)
        return name

    async def remove(self, toxic: str) -> None:
        await self.api.request("DELETE", f"/proxies/{self.name}/toxics/{toxic}")

    async def enabled(self, on: bool) -> None:
        await self.api.request("POST", f"/proxies/{self.name}", {"enabled": on})

    @asynccontextmanager
    async def toxic(
        self, kind: str, *, both_ways: bool = False, **attributes: Any
    ) -> AsyncIterator[None]:
        """The toxic while the block runs (downstream, or both ways)."""
        streams = ("downstream", "upstream") if both_ways else ("downstream",)
        names = [await self.add(kind, s, **attributes) for s in streams]
        try:
            yield
        finally:
            for name in names:
                await self.remove(name)

    @asynccontextmanager
    async def cut(self) -> AsyncIterator[None]:
        """The link down while the block runs: connections closed, new ones refused."""
        await self.enabled(False)
        try:
            yield
        finally:
            await self.enabled(True)
