"""The host-memory tier: every registered model, keyed by the hash of its file's bytes.

A model file is sent once; the tier keeps the original bytes (the cold-start path of the
Exclusive policy) and the loader worker's flat tensor file plus ``meta`` skeleton (the copy
path of a device miss) under a tmpfs directory, so a miss never reads a disk or unpickles
weights. Registration is single-flight per key; the tier is bounded and evicts least recently
used models, preferring those resident on no device.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class RegistrationError(ValueError):
    """The model file was refused (not a module, corrupt, hash mismatch, too large)."""


@dataclass
class HostModel:
    key: str
    kind: str  # "module" (skeleton + flat tensors) or "jit" (TorchScript archive)
    size: int  # bytes it occupies on a device (parameters + buffers)
    host_bytes: int  # what it costs the host tier
    file: Path
    bin: Path | None = None
    skel: Path | None = None
    manifest: Path | None = None


def content_key(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


Ingest = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class HostTier:
    def __init__(
        self,
        directory: Path,
        limit_bytes: int,
        ingest: Ingest,
        *,
        is_resident: Callable[[str], bool] = lambda key: False,
        check_size: Callable[[str, int], None] = lambda key, size: None,
        on_evict: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.dir = directory
        self.limit = limit_bytes
        self._ingest = ingest
        self._is_resident = is_resident
        self._check_size = check_size
        self._on_evict = on_evict
        self._models: OrderedDict[str, HostModel] = OrderedDict()
        self._pending: dict[str, asyncio.Future[HostModel]] = {}
        self.used = 0
        self.evictions = 0

    def __contains__(self, key: object) -> bool:
        return key in self._models

    def __len__(self) -> int:
        return len(self._models)

    def get(self, key: str) -> HostModel | None:
        m = self._models.get(key)
        if m is not None:
            self._models.move_to_end(key)
        return m

    async def register(self, key: str, data: bytes) -> HostModel:
        """Add a model file (once per key, however many callers race)."""
        m = self.get(key)
        if m is not None:
            return m
        fut = self._pending.get(key)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = asyncio.get_running_loop().create_future()
        self._pending[key] = fut
        try:
            m = await self._add(key, data)
            fut.set_result(m)
            return m
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # mark retrieved: racing callers get it through their await
            raise
        finally:
            del self._pending[key]

    async def _add(self, key: str, data: bytes) -> HostModel:
        if content_key(data) != key:
            raise RegistrationError("model bytes do not match their content key")
        base = self.dir / key
        file = base.with_suffix(".pt")
        file.write_bytes(data)
        spec = {
            "op": "ingest",
            "path": str(file),
            "bin": str(base.with_suffix(".bin")),
            "skel": str(base.with_suffix(".skel")),
            "manifest": str(base.with_suffix(".json")),
        }
        try:
            info = await self._ingest(spec)
            if "error" in info:
                raise RegistrationError(f"{info['error']}: {info.get('message', '')}")
            self._check_size(key, int(info["size"]))
        except BaseException:
            _unlink(file, base)
            raise
        if info["kind"] == "module":
            m = HostModel(
                key,
                "module",
                int(info["size"]),
                0,
                file,
                Path(spec["bin"]),
                Path(spec["skel"]),
                Path(spec["manifest"]),
            )
        else:
            m = HostModel(key, "jit", int(info["size"]), 0, file)
        m.host_bytes = sum(p.stat().st_size for p in (m.file, m.bin, m.skel) if p is not None)
        await self._make_room(m.host_bytes)
        self._models[key] = m
        self.used += m.host_bytes
        return m

    async def _make_room(self, need: int) -> None:
        for prefer_unused in (True, False):
            for key in list(self._models):
                if self.used + need <= self.limit:
                    return
                if prefer_unused and self._is_resident(key):
                    continue
                await self.evict(key)

    async def evict(self, key: str) -> None:
        m = self._models.pop(key)
        self.used -= m.host_bytes
        self.evictions += 1
        _unlink(m.file, self.dir / key)
        if self._on_evict is not None:
            await self._on_evict(key)

    def load_spec(self, key: str, *, cold: bool = False) -> dict[str, Any]:
        """What a worker needs to load ``key``: the copy path, or the full file for a cold start."""
        m = self._models.get(key)
        if m is None:
            raise KeyError(key)
        if cold:
            return {"kind": "file", "key": key, "file": str(m.file)}
        if m.kind == "jit":
            return {"kind": "jit", "key": key, "file": str(m.file)}
        return {
            "kind": "module",
            "key": key,
            "bin": str(m.bin),
            "skel": str(m.skel),
            "manifest": str(m.manifest),
        }

    def close(self) -> None:
        for key, m in list(self._models.items()):
            _unlink(m.file, self.dir / key)
        self._models.clear()
        self.used = 0


def _unlink(file: Path, base: Path) -> None:
    for p in (file, base.with_suffix(".bin"), base.with_suffix(".skel"), base.with_suffix(".json")):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
