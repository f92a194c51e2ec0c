"""The kTask data layer and runs over the pool's socket, for clients (stdlib only, no torch).

An action with ``__OW_GPU_POOL`` in its environment, a process on the invoker node, or a test
reaches the pool's socket (``unix:/path`` or ``tcp:127.0.0.1:PORT``) and puts its inputs by key
before invoking a ``kaas`` action, then reads the outputs its reply names:

    c = KaasClient(os.environ["__OW_GPU_POOL"])
    c.put("graph/A", a.tobytes(), "float32", a.shape)     # -> {"key", "version", ...}
    meta, data = c.get("knn/visited")                     # numpy.frombuffer(data, meta["dtype"])
    c.run(knn_doc, {"fetch": True})                       # a kTask without an action

Bytes are the elements in C order, native byte order (``numpy.ndarray.tobytes()``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpu.protocol import connect_sync, read_frame_sync, write_frame_sync


class KaasClientError(RuntimeError):
    """The pool refused the request; ``kind`` is its error class (``KTaskError``: yours)."""

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

    def run(
        self, task: Mapping[str, Any] | str, params: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        h, _ = self._call({"op": "ktask", "task": task, "params": dict(params or {})})
        return h
