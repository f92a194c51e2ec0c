"""The pool's sockets: the one actions talk to (register a model file once, then send
inference inputs), and the operator's, for the kTask data layer.

Ops on the shared socket (``SHARED``: bound into every GPU action's sandbox), one frame in,
one frame out, per connection in order:
  ``hello``                               → policy, devices
  ``lookup {key}``                        → known, size
  ``register {key}`` + model file bytes   → size, kind (or an error such as ModelTooLarge)
  ``infer {key, batch, fn, ns}`` + input  → hit, device, timings + output bytes
  ``stats``                               → a snapshot of the pool
Ops on the operator socket (``OPERATOR``: in the pool's private directory, no sandbox gets it),
keys absolute (``alice/graph/A`` is what alice's kaas actions read as ``graph/A``):
  ``hello``
  ``put {key, dtype, shape}`` + bytes     → key, version (the kTask data layer)
  ``get {key}``                           → key, version, dtype, shape + bytes
  ``delete {key}``                        → ok
The shared socket refuses ``put``, ``get``, ``delete`` and ``ktask`` (``Forbidden``): it has no
caller identity, so it cannot tell one tenant's keys from another's; a tenant reaches the data
layer through a kaas action (``inputs``, ``fetch``), whose keys the invoker scopes to its
namespace. Errors come back as ``{"error": <class name>, "message": ...}``; the connection
stays usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any, Protocol

from gpu.dispatcher import InferenceResult
from gpu.hosttier import HostModel
from gpu.kaas.spec import DTYPES, KTaskError, TensorSpec
from gpu.kaas.store import StoredObject
from gpu.protocol import FrameError, parse_address, read_frame, write_frame

log = logging.getLogger(__name__)


class ServedPool(Protocol):
    """What the server needs of the pool; ``gpu.pool.GpuPool`` is the one implementation.

    Declared here, not imported, so the server does not depend on the pool that owns it.
    """

    @property
    def policy(self) -> str: ...

    @property
    def device_count(self) -> int: ...

    def lookup(self, key: str) -> HostModel | None:
        """The host tier's entry for ``key``, or None if its bytes must be sent."""
        ...

    async def register(self, key: str, data: bytes) -> HostModel: ...

    async def infer(
        self, key: str, payload: bytes, *, batch: int, function: str, namespace: str
    ) -> InferenceResult: ...

    def snapshot(self) -> dict[str, Any]: ...

    def put(self, key: str, data: bytes, spec: TensorSpec) -> StoredObject: ...

    def get(self, key: str) -> tuple[StoredObject, bytes]: ...

    def delete(self, key: str) -> None: ...


SHARED = "shared"
OPERATOR = "operator"
DATA_OPS = ("put", "get", "delete")
_OPERATOR_OPS = ("hello", *DATA_OPS)


def refusal(op: str) -> str:
    """Why the shared socket will not do a data-layer op."""
    return (
        f"op {op!r} is refused on this socket: it is shared by every tenant's GPU-action "
        "sandbox and carries no caller identity, so it cannot tell whose keys are whose. "
        "A kaas action reads and writes the data layer under its caller's namespace (its "
        "invocation's 'inputs', 'keys' and 'fetch'); the node's operator uses the pool's "
        "operator socket (GpuPool.data_address)"
    )


def _spec(h: dict[str, Any]) -> TensorSpec:
    """A put's dtype and shape, checked (the store checks the bytes against them)."""
    dtype, shape = h.get("dtype"), h.get("shape")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise KTaskError(f"put: unknown dtype {dtype!r}; one of {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        raise KTaskError(f"put: shape must be a list of non-negative integers, not {shape!r}")
    return TensorSpec(tuple(shape), dtype)


def _described(o: StoredObject) -> dict[str, Any]:
    return {"ok": True, "key": o.key, "version": o.version, "dtype": o.spec.dtype,
            "shape": list(o.spec.shape)}  # fmt: skip


class PoolServer:
    """``role``: ``SHARED`` (models; data ops refused) or ``OPERATOR`` (data ops only).
    ``mode``: the Unix socket's permissions (the operator's: 0600, its owner only)."""

    def __init__(
        self,
        pool: ServedPool,
        address: str,
        max_payload: int,
        *,
        role: str = SHARED,
        mode: int = 0o660,
    ) -> None:
        if role not in (SHARED, OPERATOR):
            raise ValueError(f"unknown socket role {role!r}")
        self.pool = pool
        self.address = address
        self.max_payload = max_payload
        self.role = role
        self.mode = mode
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        kind, target = parse_address(self.address)
        if kind == "unix":
            assert isinstance(target, str)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
            self._server = await asyncio.start_unix_server(self._serve, path=target)
            os.chmod(target, self.mode)
        else:
            assert not isinstance(target, str)
            host, port = target
            self._server = await asyncio.start_server(self._serve, host, port)
            port = self._server.sockets[0].getsockname()[1]
            self.address = f"tcp:{host}:{port}"
        return self.address

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):
            t.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        kind, target = parse_address(self.address)
        if kind == "unix":
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(target))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            while True:
                try:
                    h, payload = await read_frame(reader, self.max_payload)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                except FrameError as e:
                    await write_frame(writer, {"error": "FrameError", "message": str(e)})
                    return
                reply, body = await self._handle(h, payload)
                await write_frame(writer, reply, body)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._conns.discard(task)
            writer.close()

    async def _handle(self, h: dict[str, Any], payload: bytes) -> tuple[dict[str, Any], bytes]:
        op = h.get("op")
        pool = self.pool
        if self.role == SHARED and op in (*DATA_OPS, "ktask"):
            return {"error": "Forbidden", "message": refusal(str(op))}, b""
        if self.role == OPERATOR and op not in _OPERATOR_OPS:
            message = f"op {op!r}: the operator socket serves {', '.join(_OPERATOR_OPS)} only"
            return {"error": "BadOp", "message": message}, b""
        try:
            if op == "hello":
                return {"ok": True, "policy": pool.policy, "devices": pool.device_count}, b""
            if op == "lookup":
                m = pool.lookup(str(h["key"]))
                return {"known": m is not None, "size": m.size if m else 0}, b""
            if op == "register":
                m = await pool.register(str(h["key"]), payload)
                return {"ok": True, "size": m.size, "kind": m.kind}, b""
            if op == "infer":
                res = await pool.infer(
                    str(h["key"]),
                    payload,
                    batch=int(h.get("batch", 1)),
                    function=str(h.get("fn", "")),
                    namespace=str(h.get("ns", "")),
                )
                return {
                    "ok": True,
                    "hit": res.hit,
                    "device": res.device,
                    "queue_s": res.queue_s,
                    "upload_s": res.upload_s,
                    "infer_s": res.infer_s,
                    "latency_s": res.latency_s,
                }, res.output or b""
            if op == "stats":
                snap = pool.snapshot()
                if self.role == SHARED and isinstance(snap.get("kaas"), dict):
                    # stored keys name tenants and their keys: counts only for a sandbox
                    kaas = snap["kaas"]
                    kaas["constants"] = [len(held) for held in kaas.get("constants", [])]
                return snap, b""
            if op == "put":
                return _described(pool.put(str(h["key"]), payload, _spec(h))), b""
            if op == "get":
                o, data = pool.get(str(h["key"]))
                return _described(o), data
            if op == "delete":
                pool.delete(str(h["key"]))
                return {"ok": True}, b""
            return {"error": "BadOp", "message": f"unknown op {op!r}"}, b""
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if not isinstance(e, (KeyError, ValueError, RuntimeError)):
                log.exception("GPU pool request failed")
            msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            return {"error": type(e).__name__, "message": str(msg)}, b""
