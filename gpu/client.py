"""Inside a GPU action: plain torch idioms, served by the invoker's GPU pool.

The action runtime calls ``install(address)`` at /init when the init environment holds
``__OW_GPU_POOL``. From then on ``torch.load(path)`` of a pickled ``nn.Module`` and
``torch.jit.load(path)`` send the file's bytes to the pool once (keyed by their SHA-256, so two
actions shipping the same file share one resident copy) and return a ``RemoteModule``;
``model(x)`` sends ``x`` to the pool's scheduler and returns the output tensor. Loading
anything that is not a module (tensors, state dicts) behaves exactly as before.

    model = torch.load("model.pt", weights_only=False)   # unchanged action code
    y = model(x)

A module built from code plus weights uses ``load_module(factory, weights_path)``. The
module's classes must be importable by the pool's workers (torch.nn, torchvision, installed
packages); TorchScript carries its own code.
"""

from __future__ import annotations

import hashlib
import io
import os
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpu.protocol import connect_sync, read_frame_sync, write_frame_sync

ENV_VAR = "__OW_GPU_POOL"


class GpuPoolError(RuntimeError):
    """The pool refused a model or a request; ``kind`` is its error class name."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class PoolConnection:
    """One socket to the pool, shared by the action's threads (calls are serialised)."""

    def __init__(self, address: str, timeout: float | None = 600.0) -> None:
        self.address = address
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def call(self, header: dict[str, Any], payload: bytes = b"") -> tuple[dict[str, Any], bytes]:
        with self._lock:
            for attempt in (0, 1):
                try:
                    if self._sock is None:
                        self._sock = connect_sync(self.address, self.timeout)
                    write_frame_sync(self._sock, header, payload)
                    return read_frame_sync(self._sock)
                except (OSError, EOFError):
                    self.close_locked()
                    if attempt:
                        raise
            raise AssertionError("unreachable")

    def checked(self, header: dict[str, Any], payload: bytes = b"") -> tuple[dict, bytes]:
        h, body = self.call(header, payload)
        if "error" in h:
            raise GpuPoolError(str(h["error"]), str(h.get("message", "")))
        return h, body

    def close_locked(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def close(self) -> None:
        with self._lock:
            self.close_locked()


def _torch() -> Any:
    import torch

    return torch


class RemoteModule(_torch().nn.Module):  # type: ignore[misc]
    """Stands in for a model resident in the GPU pool: calling it runs inference there."""

    def __init__(self, conn: PoolConnection, key: str, size: int, source: Callable[[], bytes]):
        super().__init__()
        self._conn = conn
        self.key = key
        self.size = size
        self._source = source
        self.last: dict[str, Any] = {}  # timings of the last call (hit, device, upload_s, ...)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        torch = _torch()
        buf = io.BytesIO()
        torch.save({"args": _cpu(torch, args), "kwargs": _cpu(torch, kwargs)}, buf)
        header = {
            "op": "infer",
            "key": self.key,
            "batch": _batch(torch, args),
            "fn": os.environ.get("__OW_ACTION_NAME", ""),
            "ns": os.environ.get("__OW_NAMESPACE", ""),
        }
        h, body = self._conn.call(header, buf.getvalue())
        if h.get("error") == "UnknownModel":  # the pool dropped it: send it again, once
            _register(self._conn, self.key, self._source())
            h, body = self._conn.call(header, buf.getvalue())
        if "error" in h:
            raise GpuPoolError(str(h["error"]), str(h.get("message", "")))
        self.last = h
        return torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)

    # The weights live in the pool: moving or casting the proxy is a no-op.
    def to(self, *args: Any, **kwargs: Any) -> RemoteModule:
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> RemoteModule:
        return self

    def cpu(self) -> RemoteModule:
        return self

    def extra_repr(self) -> str:
        return f"key={self.key[:12]}, size={self.size}"


_lock = threading.Lock()
_state: dict[str, Any] = {}


def install(address: str | None = None) -> None:
    """Patch ``torch.load`` and ``torch.jit.load`` in this process to use the pool."""
    address = address or os.environ[ENV_VAR]
    torch = _torch()
    with _lock:
        if "conn" in _state:
            _state["conn"].close()
        _state["conn"] = PoolConnection(address)
        if "load" not in _state:
            _state["load"] = torch.load
            _state["jit_load"] = torch.jit.load
            torch.load = _patched_load
            torch.jit.load = _patched_jit_load


def uninstall() -> None:
    torch = _torch()
    with _lock:
        if "load" in _state:
            torch.load = _state.pop("load")
            torch.jit.load = _state.pop("jit_load")
        if "conn" in _state:
            _state.pop("conn").close()


def installed() -> bool:
    return "conn" in _state


def load_module(factory: Callable[[], Any], weights: str | os.PathLike | Mapping | None = None):
    """Build ``factory()`` (on ``meta`` when weights are given); serve it from the pool."""
    torch = _torch()
    if weights is None:
        m = factory()
    else:
        with torch.device("meta"):
            m = factory()
        sd = weights if isinstance(weights, Mapping) else _orig_load()(weights, map_location="cpu")
        m.load_state_dict(sd, assign=True)
    buf = io.BytesIO()
    torch.save(m, buf)
    data = buf.getvalue()
    return _remote(data, lambda: data)


def _conn() -> PoolConnection:
    conn = _state.get("conn")
    if conn is None:
        raise RuntimeError("gpu.client.install(address) has not been called")
    return conn


def _orig_load() -> Callable[..., Any]:
    return _state.get("load") or _torch().load


def _register(conn: PoolConnection, key: str, data: bytes) -> int:
    h, _ = conn.checked({"op": "lookup", "key": key})
    if h.get("known"):
        return int(h["size"])
    h, _ = conn.checked({"op": "register", "key": key}, data)
    return int(h["size"])


def _remote(data: bytes, source: Callable[[], bytes]) -> RemoteModule:
    key = hashlib.sha256(data).hexdigest()
    conn = _conn()
    size = _register(conn, key, data)
    return RemoteModule(conn, key, size, source)


def _read(f: Any) -> tuple[bytes, Callable[[], bytes]] | None:
    """The bytes of a path or readable file, and how to get them again; None otherwise."""
    if isinstance(f, (str, os.PathLike)):
        p = Path(f)
        return p.read_bytes(), p.read_bytes
    if hasattr(f, "read") and hasattr(f, "seek"):
        data = f.read()
        return data, lambda: data
    return None


def _patched_load(f: Any, *args: Any, **kwargs: Any) -> Any:
    got = _read(f)
    if got is None:
        return _state["load"](f, *args, **kwargs)
    data, source = got
    obj = _state["load"](io.BytesIO(data), *args, **kwargs)
    if not isinstance(obj, _torch().nn.Module) or isinstance(obj, RemoteModule):
        return obj
    del obj  # the pool holds the weights from now on
    return _remote(data, source)


def _patched_jit_load(f: Any, map_location: Any = None, _extra_files: Any = None, **kw: Any):
    got = _read(f)
    if got is None or _extra_files:
        return _state["jit_load"](f, map_location, _extra_files, **kw)
    data, source = got
    return _remote(data, source)


def _cpu(torch: Any, obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu(torch, o) for o in obj)
    if isinstance(obj, dict):
        return {k: _cpu(torch, v) for k, v in obj.items()}
    return obj


def _batch(torch: Any, args: tuple) -> int:
    for a in args:
        if isinstance(a, torch.Tensor):
            return int(a.shape[0]) if a.dim() > 0 else 1
    return 1
