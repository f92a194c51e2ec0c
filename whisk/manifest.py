"""The runtime manifest: which kinds exist, their defaults, and the image for each.

Mirrors the stock ``runtimes.json`` (nodejs:18, nodejs:20, python:3.10, python:3.11 with the
stock defaults nodejs:20 and python:3.10), plus a few python kinds of our own. Images can be
overridden per kind by configuration (``--runtime-image KIND=IMAGE``) or replaced wholesale
by a ``runtimes.json`` file in the stock format (``RUNTIMES_MANIFEST``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Runtime:
    kind: str
    family: str  # "python", "nodejs", ...
    image: str
    default: bool = False
    sentinelled_logs: bool = True
    stem_cells: tuple[tuple[int, int], ...] = ()  # (initial count, memory MB)


_STOCK: tuple[Runtime, ...] = (
    Runtime("nodejs:18", "nodejs", "openwhisk/action-nodejs-v18:nightly"),
    Runtime(
        "nodejs:20",
        "nodejs",
        "openwhisk/action-nodejs-v20:nightly",
        default=True,
        stem_cells=((2, 256),),
    ),
    # The stock manifest's python kinds (apache/openwhisk ansible/files/runtimes.json):
    # python:3.10 (its default) and python:3.11.
    Runtime("python:3.10", "python", "openwhisk/action-python-v3.10:nightly", default=True),
    Runtime("python:3.11", "python", "openwhisk/action-python-v3.11:nightly"),
    # Not in the stock manifest (a stock controller answers 400 for them): kept so that
    # actions created earlier through our own front still run; never use them for a
    # deployment with a stock controller.
    Runtime("python:3", "python", "openwhisk/action-python-v3.11:nightly"),
    Runtime("python:3.9", "python", "openwhisk/action-python-v3.9:nightly"),
    Runtime("python:3.12", "python", "openwhisk/action-python-v3.12:nightly"),
)

BLACKBOX = "blackbox"
# The stock manifest's ``blackboxes``: images the platform provides for blackbox actions.
_STOCK_BLACKBOXES = frozenset({"openwhisk/dockerskeleton:nightly"})


def _with_tag(image: str) -> str:
    """``image`` with its tag spelled out (none means ``latest``, as Docker and the stock
    ``ImageName`` equality have it)."""
    name = image.split("@", 1)[0]
    return image if ":" in name.rpartition("/")[2] else f"{image}:latest"


@dataclass(frozen=True)
class Manifest:
    """``blackboxes`` and ``bypass_pull_prefix``: the stock manifest's ``blackboxes`` and
    ``bypassPullForLocalImages``, which make a blackbox image "native" (:meth:`native`)."""

    runtimes: dict[str, Runtime] = field(default_factory=lambda: {r.kind: r for r in _STOCK})
    blackboxes: frozenset[str] = _STOCK_BLACKBOXES
    bypass_pull_prefix: str | None = None

    def native(self, image: str) -> bool:
        """Whether a blackbox image is one the platform provides (stock ``skipDockerPull``):
        the stock invoker treats it as a managed image, with sentinelled logs."""
        if _with_tag(image) in {_with_tag(b) for b in self.blackboxes}:
            return True
        prefix = image.rpartition("/")[0]
        return bool(prefix) and prefix == self.bypass_pull_prefix

    @property
    def defaults(self) -> dict[str, str]:
        """family -> default kind, used to resolve ``<family>:default``."""
        return {r.family: r.kind for r in self.runtimes.values() if r.default}

    def runtime(self, kind: str) -> Runtime | None:
        return self.runtimes.get(kind)

    def family(self, kind: str) -> str | None:
        if kind == BLACKBOX:
            return BLACKBOX
        r = self.runtimes.get(kind)
        return r.family if r else None

    def image(self, kind: str) -> str:
        r = self.runtimes.get(kind)
        if r is None:
            raise ValueError(f"kind {kind!r} is not in the runtime manifest")
        return r.image

    def with_images(self, overrides: dict[str, str]) -> Manifest:
        runtimes = dict(self.runtimes)
        for kind, image in overrides.items():
            base = runtimes.get(kind)
            if base is None:
                raise ValueError(f"cannot override the image of unknown kind {kind!r}")
            runtimes[kind] = Runtime(
                base.kind, base.family, image, base.default, base.sentinelled_logs, base.stem_cells
            )
        return replace(self, runtimes=runtimes)

    @classmethod
    def from_stock_json(cls, data: dict[str, Any]) -> Manifest:
        """Read the stock ``runtimes.json`` format."""
        runtimes: dict[str, Runtime] = {}
        for family, entries in data.get("runtimes", {}).items():
            for e in entries:
                img = e["image"]
                name = "/".join(p for p in (img.get("prefix"), img["name"]) if p)
                tag = img.get("tag")
                cells = tuple(
                    (int(c.get("initialCount", c.get("count", 0))), _memory_mb(c["memory"]))
                    for c in e.get("stemCells", [])
                )
                runtimes[e["kind"]] = Runtime(
                    e["kind"],
                    family,
                    f"{name}:{tag}" if tag else name,
                    bool(e.get("default")),
                    bool(e.get("sentinelledLogs", True)),
                    cells,
                )
        boxes = frozenset(
            "/".join(p.strip("/") for p in (b.get("registry"), b.get("prefix"), b["name"]) if p)
            + (f":{b['tag']}" if b.get("tag") else "")
            for b in data.get("blackboxes", [])
        )
        bypass = data.get("bypassPullForLocalImages")
        return cls(runtimes, boxes, bypass if isinstance(bypass, str) and bypass else None)

    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        return cls.from_stock_json(json.loads(Path(path).read_text()))

    @classmethod
    def from_setting(cls, text: str) -> Manifest:
        """``RUNTIMES_MANIFEST``: the manifest's JSON itself, as ansible (``runtimesManifest
        | to_json``) and the Helm chart pass it, or the path of a file holding it."""
        if text.lstrip().startswith("{"):
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("a runtimes manifest is a JSON object")
            return cls.from_stock_json(data)
        return cls.load(text)

    def with_registry(self, registry: str) -> Manifest:
        """Runtime images pulled from ``registry`` (the stock ``runtimesRegistry.url``,
        prefixed to each runtime image's name as ``docker pull`` takes it)."""
        prefix = registry.strip().rstrip("/")
        if not prefix:
            return self
        runtimes = {k: replace(r, image=f"{prefix}/{r.image}") for k, r in self.runtimes.items()}
        return replace(self, runtimes=runtimes)


def _memory_mb(text: str) -> int:
    value, _, unit = text.strip().partition(" ")
    factor = {"MB": 1, "M": 1, "GB": 1024, "G": 1024}.get(unit.strip().upper() or "MB")
    if factor is None:
        raise ValueError(f"bad memory size {text!r}")
    return int(value) * factor
