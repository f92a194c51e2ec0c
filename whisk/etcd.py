"""A small async etcd v3 client over etcd's own JSON gRPC gateway (``POST /v3/...``).

etcd 3.4 serves its v3 API as JSON on the client port beside gRPC: keys and values in
base64, 64-bit integers as strings. The invoker and the front in the scheduler mode need only
keys, prefixes and leases, so this speaks that gateway through aiohttp (already a
dependency) rather than adding a gRPC etcd client: no new dependency, and the gateway is
etcd's own API, not a proxy of ours.

Every call has a timeout. ``hosts`` is ``CONFIG_whisk_etcd_hosts``' form, ``host:port[,...]``:
a call tries them in turn, starting with the one that last answered; an answer from etcd
(a key or lease that does not exist, a bad request) ends it, only an unreachable or unready
member moves on to the next. Failures raise :class:`EtcdError`, naming the endpoint and what
failed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import aiohttp

GRPC_NOT_FOUND = 5
# The answers that say "this member cannot serve now" (no leader, shutting down): try the next.
_RETRY_STATUSES = frozenset({502, 503, 504})


class EtcdError(RuntimeError):
    """A call to etcd failed: ``endpoint`` (the last one tried) and ``what`` (the call),
    ``code`` the gRPC status etcd answered with, None when none answered."""

    def __init__(self, endpoint: str, what: str, detail: str, code: int | None = None) -> None:
        super().__init__(f"etcd {endpoint}: {what} failed: {detail}")
        self.endpoint = endpoint
        self.what = what
        self.code = code

    @property
    def not_found(self) -> bool:
        return self.code == GRPC_NOT_FOUND


def parse_hosts(hosts: str | Sequence[str]) -> list[str]:
    """``"h1:2379,h2:2379"`` (or a list of them) -> base URLs; a scheme may be given."""
    items = hosts.split(",") if isinstance(hosts, str) else list(hosts)
    urls = []
    for item in (h.strip() for h in items):
        if not item:
            continue
        url = item if "://" in item else f"http://{item}"
        urls.append(url.rstrip("/"))
    if not urls:
        raise ValueError(f"no etcd host in {hosts!r}")
    return urls


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(data: str | None) -> str:
    return base64.b64decode(data or "").decode()


def prefix_end(prefix: str) -> str:
    """The ``range_end`` that makes a range cover every key starting with ``prefix``."""
    raw = bytearray(prefix.encode())
    while raw:
        if raw[-1] < 0xFF:
            raw[-1] += 1
            return _b64_bytes(bytes(raw))
        raw.pop()
    return _b64_bytes(b"\0")  # every key


def _b64_bytes(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


class EtcdClient:
    """Keys, prefixes and leases of one etcd cluster (its members in ``hosts``)."""

    def __init__(self, hosts: str | Sequence[str], *, timeout_s: float = 3.0) -> None:
        self.endpoints = parse_hosts(hosts)
        self.timeout_s = timeout_s
        self._first = 0  # the endpoint that answered last
        self._http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- keys --

    async def put(self, key: str, value: str, lease: int = 0) -> None:
        body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        await self._call("/v3/kv/put", body, f"put {key}")

    async def get(self, key: str) -> str | None:
        answer = await self._call("/v3/kv/range", {"key": _b64(key)}, f"get {key}")
        kvs = answer.get("kvs") or []
        return _unb64(kvs[0].get("value")) if kvs else None

    async def get_prefix(self, prefix: str) -> dict[str, str]:
        body = {"key": _b64(prefix), "range_end": prefix_end(prefix)}
        answer = await self._call("/v3/kv/range", body, f"get prefix {prefix}")
        return {_unb64(kv["key"]): _unb64(kv.get("value")) for kv in answer.get("kvs") or []}

    async def delete(self, key: str) -> int:
        """How many keys were deleted (0 or 1)."""
        answer = await self._call("/v3/kv/deleterange", {"key": _b64(key)}, f"delete {key}")
        return int(answer.get("deleted", 0))

    async def delete_prefix(self, prefix: str) -> int:
        body = {"key": _b64(prefix), "range_end": prefix_end(prefix)}
        answer = await self._call("/v3/kv/deleterange", body, f"delete prefix {prefix}")
        return int(answer.get("deleted", 0))

    # -- leases --

    async def lease_grant(self, ttl_s: int) -> int:
        answer = await self._call(
            "/v3/lease/grant", {"TTL": str(ttl_s)}, f"grant a {ttl_s} s lease"
        )
        if answer.get("error"):
            raise EtcdError(self._endpoint, "lease grant", str(answer["error"]))
        return int(answer["ID"])

    async def lease_keepalive(self, lease: int) -> int:
        """One keep-alive: the lease's renewed TTL, 0 when it no longer exists (expired or
        revoked: etcd then answers without a TTL)."""
        answer = await self._call("/v3/lease/keepalive", {"ID": str(lease)}, f"keep-alive {lease}")
        result = answer.get("result", answer)
        return int(result.get("TTL", 0))

    async def lease_revoke(self, lease: int) -> bool:
        """Revoke it (its keys go with it); False when it did not exist."""
        try:
            await self._call("/v3/lease/revoke", {"ID": str(lease)}, f"revoke {lease}")
        except EtcdError as e:
            if e.not_found:
                return False
            raise
        return True

    async def lease_ttl(self, lease: int) -> int:
        """Its remaining TTL in seconds (0 in its last second, until etcd revokes it), -1
        when it does not exist."""
        answer = await self._call("/v3/lease/timetolive", {"ID": str(lease)}, f"TTL of {lease}")
        return int(answer.get("TTL", 0))

    # -- transport --

    @property
    def _endpoint(self) -> str:
        return self.endpoints[self._first]

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        return self._http

    async def _call(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        """POST to the first endpoint that answers; etcd's error answers raise at once."""
        failures = []
        n = len(self.endpoints)
        for i in range(n):
            index = (self._first + i) % n
            endpoint = self.endpoints[index]
            # A pooled connection that a restarted member closed fails once: try it again.
            for attempt in range(2):
                try:
                    answer = await self._post(endpoint, path, body, what)
                except aiohttp.ServerDisconnectedError as e:
                    if attempt == 0:
                        continue
                    failures.append(f"{endpoint}: {type(e).__name__}: {e}")
                except (aiohttp.ClientError, TimeoutError, OSError) as e:
                    detail = (
                        f"timed out after {self.timeout_s:g} s"
                        if isinstance(e, TimeoutError)
                        else f"{type(e).__name__}: {e}"
                    )
                    failures.append(f"{endpoint}: {detail}")
                except _Unready as e:
                    failures.append(f"{endpoint}: {e}")
                else:
                    self._first = index
                    return answer
                break
        raise EtcdError(", ".join(self.endpoints), what, "; ".join(failures))

    async def _post(
        self, endpoint: str, path: str, body: dict[str, Any], what: str
    ) -> dict[str, Any]:
        async with self._session().post(endpoint + path, json=body) as response:
            text = await response.text()
        # The keep-alive stream answers one JSON object a line; one request, one line.
        line = text.strip().splitlines()[0] if text.strip() else "{}"
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if response.status in _RETRY_STATUSES:
            raise _Unready(f"HTTP {response.status} {text[:200]}")
        if not isinstance(answer, dict):
            raise EtcdError(endpoint, what, f"HTTP {response.status}, not JSON: {text[:200]!r}")
        # An error: a 4xx/5xx answer {"error": "...", "code": N}, or, in a stream (the
        # keep-alive's), a 200 with {"error": {"grpc_code": N, "message": "..."}}.
        error = answer.get("error")
        if isinstance(error, dict):
            code, message = error.get("grpc_code", error.get("code")), error.get("message")
        elif response.status >= 400:
            code, message = answer.get("code"), error or answer.get("message") or text[:200]
        else:
            return answer
        raise EtcdError(endpoint, what, f"HTTP {response.status}: {message}", code)


class _Unready(Exception):
    """The member answered that it cannot serve now: try the next one."""
