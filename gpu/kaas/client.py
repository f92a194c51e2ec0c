"""The kTask data layer over the pool's operator socket, for the node's operator (stdlib only).

The operator socket (``GpuPool.data_address``, ``unix:/path`` in the pool's private state
directory, 0600) is the node's operator's: keys on it are absolute, a tenant's kaas actions
reading and writing under ``<namespace>/`` (alice's ``graph/A`` is ``alice/graph/A`` here).
The socket actions get in ``__OW_GPU_POOL`` refuses these ops (it has no caller identity);
tenants pass inputs inline (``inputs``) and read outputs with ``fetch``.

    c = KaasClient(pool.data_address)
    c.put("alice/graph/A", a.tobytes(), "float32", a.shape)   # -> {"key", "version", ...}
    meta, data = c.get("alice/knn/visited")                   # numpy.frombuffer(data, dtype)

Bytes are the elements in C order, native byte order (``numpy.ndarray.tobytes()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpu.protocol import connect_sync, read_frame_sync, write_frame_sync


class KaasClientError(RuntimeError):
    """The pool refused the request; ``kind`` is its error class (``KTaskError``: yours;
    ``Forbidden``: a data op on the shared socket)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class KaasClient:
    """One connection per call: simple, and safe from any thread."""

    def __init__(self, address: str, timeout: float | None = 600.0) -> None:
        self.address = address
        self.timeout = timeout

    def _call(self, header: dict[str, Any], payload: bytes = b"") -> tuple[dict[str, Any], bytes]:
        with connect_sync(self.address, self.timeout) as sock:
            write_frame_sync(sock, header, payload)
            h, body = read_frame_sync(sock)
        if "error" in h:
            raise KaasClientError(str(h["error"]), str(h.get("message", "")))
        return h, body

    def put(self, key: str, data: bytes, dtype: str, shape: Sequence[int]) -> dict[str, Any]:
        h, _ = self._call(
            {"op": "put", "key": key, "dtype": dtype, "shape": [int(n) for n in shape]}, data
        )
        return h

    def get(self, key: str) -> tuple[dict[str, Any], bytes]:
        return self._call({"op": "get", "key": key})

    def delete(self, key: str) -> None:
        self._call({"op": "delete", "key": key})
