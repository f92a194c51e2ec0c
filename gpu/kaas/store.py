"""The kTask data layer: named objects in host memory, by key, each put a new version.

It lives beside the pool's model host tier and works the same way: files on the pool's tmpfs
state directory (``/dev/shm/owgpu-*``), bounded, least recently used evicted first. Host memory
on the invoker node is where a device copy starts anyway, a worker process can map the file
as the model path does, and nothing crosses a network (an S3 store or CouchDB attachments
would add a round trip and a copy per input on every request). Each put of a key gets the
next version, never reused even after eviction or deletion, so a device cache keyed by
(key, version) cannot serve a stale constant. Synchronous and small: call it from a thread or
a worker process in asyncio code (it is tmpfs, not a disk).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpu.kaas.spec import DTYPES, KTaskError, TensorSpec, mib


@dataclass(frozen=True)
class StoredObject:
    key: str
    version: int
    spec: TensorSpec
    path: Path

    @property
    def nbytes(self) -> int:
        return self.spec.nbytes


class DataStore:
    """Keyed, versioned, bounded host-memory objects (the data layer of kTasks)."""

    def __init__(
        self,
        directory: Path,
        limit_bytes: int,
        *,
        on_evict: Callable[[StoredObject], None] | None = None,
    ) -> None:
        if limit_bytes <= 0:
            raise ValueError("the data layer's bound must be positive")
        self.dir = directory
        self.limit = limit_bytes
        self._on_evict = on_evict
        self._objects: OrderedDict[str, StoredObject] = OrderedDict()
        self._versions: dict[str, int] = {}
        self.used = 0
        self.evictions = 0

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def __len__(self) -> int:
        return len(self._objects)

    def get(self, key: str) -> StoredObject | None:
        """The object's metadata (marking it used), or None when the key holds nothing."""
        o = self._objects.get(key)
        if o is not None:
            self._objects.move_to_end(key)
        return o

    def put(self, key: str, data: bytes | memoryview, spec: TensorSpec) -> StoredObject:
        """Store ``data`` (``spec``'s elements, C order) under ``key`` as its next version."""
        if not isinstance(key, str) or not key:
            raise KTaskError("a data-layer key must be a non-empty string")
        if spec.dtype not in DTYPES:
            raise KTaskError(f"unknown dtype {spec.dtype!r}")
        if len(data) != spec.nbytes:
            raise KTaskError(f"key {key!r}: {len(data)} bytes do not make {spec} ({spec.nbytes})")
        if spec.nbytes > self.limit:
            raise KTaskError(
                f"key {key!r}: {mib(spec.nbytes)} is more than the data layer holds "
                f"({mib(self.limit)})"
            )
        old = self._objects.pop(key, None)
        if old is not None:
            self.used -= old.nbytes
            _unlink(old.path)
        self._make_room(spec.nbytes)
        version = self._versions.get(key, 0) + 1
        self._versions[key] = version
        path = self.dir / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.v{version}"
        path.write_bytes(data)
        o = StoredObject(key, version, spec, path)
        self._objects[key] = o
        self.used += o.nbytes
        return o

    def read(self, key: str) -> tuple[StoredObject, bytes]:
        o = self.get(key)
        if o is None:
            raise KTaskError(f"key {key!r} is not in the data layer")
        return o, o.path.read_bytes()

    def delete(self, key: str) -> None:
        o = self._objects.pop(key, None)
        if o is not None:
            self.used -= o.nbytes
            _unlink(o.path)

    def _make_room(self, need: int) -> None:
        while self.used + need > self.limit and self._objects:
            _, o = self._objects.popitem(last=False)
            self.used -= o.nbytes
            self.evictions += 1
            _unlink(o.path)
            if self._on_evict is not None:
                self._on_evict(o)

    def close(self) -> None:
        for o in self._objects.values():
            _unlink(o.path)
        self._objects.clear()
        self.used = 0


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
