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
        self._pins: dict[str, int] = {}
        self._replaced: dict[str, list[Path]] = {}
        self._staged = 0
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
        self._check(key, spec, len(data))
        path = self.staging_path(key)
        path.write_bytes(data)
        return self.adopt(key, spec, path)

    def staging_path(self, key: str) -> Path:
        """A fresh file name for the next value of ``key``, for a writer in another process
        (a device worker writing an output); ``adopt`` then makes it the key's next version."""
        self._staged += 1
        return self.dir / f"{_name(key)}.staged{self._staged}"

    def adopt(self, key: str, spec: TensorSpec, path: Path) -> StoredObject:
        """Make the file at ``path`` (``spec``'s elements) the next version of ``key``."""
        try:
            size = path.stat().st_size
            self._check(key, spec, size)
        except (OSError, KTaskError):
            _unlink(path)
            raise
        old = self._objects.pop(key, None)
        if old is not None:
            self.used -= old.nbytes
            self._drop(old)
        self._make_room(spec.nbytes)
        version = self._versions.get(key, 0) + 1
        self._versions[key] = version
        final = self.dir / f"{_name(key)}.v{version}"
        os.replace(path, final)
        o = StoredObject(key, version, spec, final)
        self._objects[key] = o
        self.used += o.nbytes
        return o

    def pin(self, key: str) -> None:
        """Keep ``key``'s current file while a device reads it (eviction skips pinned keys)."""
        self._pins[key] = self._pins.get(key, 0) + 1

    def unpin(self, key: str) -> None:
        n = self._pins.get(key, 0) - 1
        if n > 0:
            self._pins[key] = n
            return
        self._pins.pop(key, None)
        for path in self._replaced.pop(key, []):
            _unlink(path)

    def _drop(self, o: StoredObject) -> None:
        """A replaced version's file goes at once, or when the devices reading it are done."""
        if o.key in self._pins:
            self._replaced.setdefault(o.key, []).append(o.path)
        else:
            _unlink(o.path)

    def _check(self, key: str, spec: TensorSpec, size: int) -> None:
        if not isinstance(key, str) or not key:
            raise KTaskError("a data-layer key must be a non-empty string")
        if spec.dtype not in DTYPES:
            raise KTaskError(f"unknown dtype {spec.dtype!r}")
        if size != spec.nbytes:
            raise KTaskError(f"key {key!r}: {size} bytes do not make {spec} ({spec.nbytes})")
        if spec.nbytes > self.limit:
            raise KTaskError(
                f"key {key!r}: {mib(spec.nbytes)} is more than the data layer holds "
                f"({mib(self.limit)})"
            )

    def read(self, key: str) -> tuple[StoredObject, bytes]:
        o = self.get(key)
        if o is None:
            raise KTaskError(f"key {key!r} is not in the data layer")
        return o, o.path.read_bytes()

    def delete(self, key: str) -> None:
        o = self._objects.pop(key, None)
        if o is not None:
            self.used -= o.nbytes
            self._drop(o)

    def _make_room(self, need: int) -> None:
        """Evict least recently used keys, never a pinned one (a device is reading it); with
        only pinned keys left the store runs over its bound until they are released."""
        for key in list(self._objects):
            if self.used + need <= self.limit:
                return
            if key in self._pins:
                continue
            o = self._objects.pop(key)
            self.used -= o.nbytes
            self.evictions += 1
            _unlink(o.path)
            if self._on_evict is not None:
                self._on_evict(o)

    def close(self) -> None:
        for o in self._objects.values():
            _unlink(o.path)
        for paths in self._replaced.values():
            for path in paths:
                _unlink(path)
        self._objects.clear()
        self._replaced.clear()
        self.used = 0


def _name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
