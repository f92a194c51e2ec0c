"""Which SeBS benchmarks we package, where their published files live, and what each needs.

Memory and timeout always come from the benchmark's own ``config.json``; everything else here is
what SeBS leaves to its Docker build (dependencies, resources, input sizes we replay).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SEBS_VERSION = "1.2.0"
INSTALL_HINT = f"pip install --no-deps serverless-benchmarks=={SEBS_VERSION}"


class SebsNotInstalled(RuntimeError):
    """The ``serverless-benchmarks`` distribution (the benchmark code) is missing."""


@dataclass(frozen=True)
class Benchmark:
    """One SeBS Python benchmark and how we run it.

    ``vendor`` lists distributions whose pure-Python files are copied into the zip when they
    are installed here and small; ``requires`` lists import names the action's interpreter must
    provide (binary wheels: the ``sebs`` extra). ``size`` is the SeBS input size used by
    default: the published sizes where they fit OpenWhisk's 1 MiB result limit and our 2-core
    machines.
    """

    id: str
    group: str
    size: str = "test"
    vendor: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    needs_storage: bool = False
    resources: tuple[str, ...] = ()
    extra_payload: tuple[str, ...] = ()
    notes: str = ""
    min_memory_mb: int = 0

    @property
    def number(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def short_name(self) -> str:
        return self.id.split(".", 1)[1]

    @property
    def action_name(self) -> str:
        """Action name without dots: ``<name>.json`` web URLs split on the last dot."""
        return f"sebs-{self.number}-{self.short_name}"

    @property
    def path(self) -> Path:
        return sebs_root() / "benchmarks" / self.group / self.id

    @property
    def code_dir(self) -> Path:
        return self.path / "python"

    def config(self) -> dict:
        return load_config(self.path / "config.json")

    @property
    def config_memory_mb(self) -> int:
        return int(self.config()["memory"])

    @property
    def memory_mb(self) -> int:
        """config.json's memory, raised to ``min_memory_mb`` where today's wheels need more."""
        return max(self.config_memory_mb, self.min_memory_mb)

    @property
    def timeout_ms(self) -> int:
        return int(self.config()["timeout"]) * 1000


# minio needs argon2-cffi and pycryptodome (binary), so the storage client is never vendored.
_STORAGE = ("minio",)

BENCHMARKS: dict[str, Benchmark] = {
    b.id: b
    for b in (
        Benchmark("010.sleep", "000.microbenchmarks", size="test"),
        Benchmark(
            "110.dynamic-html",
            "100.webapps",
            size="small",
            vendor=("jinja2", "markupsafe"),
            requires=("jinja2",),
            resources=("templates",),
            notes="size 'large' (100 000 numbers) renders > 1 MiB of HTML",
        ),
        Benchmark(
            "120.uploader",
            "100.webapps",
            requires=_STORAGE,
            needs_storage=True,
            notes="downloads from a loopback HTTP server instead of the public URL",
        ),
        Benchmark(
            "210.thumbnailer",
            "200.multimedia",
            requires=("PIL", *_STORAGE),
            needs_storage=True,
        ),
        Benchmark(
            "220.video-processing",
            "200.multimedia",
            requires=("imageio_ffmpeg", *_STORAGE),
            needs_storage=True,
            resources=("resources",),
            extra_payload=("ffmpeg",),
            notes="ffmpeg from imageio-ffmpeg (or PATH) via a launcher; synthetic testsrc2 video",
        ),
        Benchmark(
            "311.compression",
            "300.utilities",
            requires=_STORAGE,
            needs_storage=True,
        ),
        Benchmark(
            "411.image-recognition",
            "400.inference",
            requires=("torch", "PIL", *_STORAGE),
            needs_storage=True,
            resources=("imagenet_class_index.json",),
            extra_payload=("torchvision_fallback",),
            notes="ResNet-50 with random weights; plain-torch torchvision stand-in if needed",
            # config.json's 512 MB fitted torch 2.0 CPU; torch 2.x wheels + ResNet-50 peak at
            # ~930 MB RSS (measured), and cgroup v1 also charges the downloaded weights file
            min_memory_mb=1536,
        ),
        Benchmark(
            "501.graph-pagerank",
            "500.scientific",
            size="large",
            requires=("igraph",),
        ),
        Benchmark("502.graph-mst", "500.scientific", size="large", requires=("igraph",)),
        Benchmark(
            "503.graph-bfs",
            "500.scientific",
            size="small",
            requires=("igraph",),
            notes="size 'large' returns > 1 MiB (three 100 000-element lists)",
        ),
        Benchmark(
            "504.dna-visualisation",
            "500.scientific",
            vendor=("squiggle", "tqdm"),
            requires=("squiggle", "numpy", *_STORAGE),
            needs_storage=True,
            notes="synthetic FASTA; writes ~36 bytes of JSON per base to the object store",
        ),
    )
}

DEFAULT_BENCHMARKS: tuple[str, ...] = tuple(BENCHMARKS)
SHORT_BENCHMARKS: tuple[str, ...] = ("110.dynamic-html", "210.thumbnailer", "501.graph-pagerank")


@cache
def sebs_root() -> Path:
    """The installed ``sebs`` package directory, found without importing it."""
    spec = importlib.util.find_spec("sebs")
    if spec is None or not spec.submodule_search_locations:
        raise SebsNotInstalled(f"SeBS benchmark code not found; run: {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def sebs_available() -> bool:
    try:
        sebs_root()
    except SebsNotInstalled:
        return False
    return True


def wrapper_dir() -> Path:
    """SeBS's OpenWhisk Python wrapper (``__main__.py``, ``storage.py``)."""
    return sebs_root() / "benchmarks" / "wrappers" / "openwhisk" / "python"


@cache
def load_config(path: Path) -> dict:
    return json.loads(path.read_text())


def resolve(names: list[str] | tuple[str, ...] | None) -> list[Benchmark]:
    """Benchmarks named by full id (``110.dynamic-html``), number (``110``) or action name."""
    if not names:
        return [BENCHMARKS[b] for b in DEFAULT_BENCHMARKS]
    out: list[Benchmark] = []
    for name in names:
        for part in name.split(","):
            part = part.strip()
            if not part:
                continue
            match = [
                b
                for b in BENCHMARKS.values()
                if part in (b.id, b.number, b.short_name, b.action_name)
            ]
            if not match:
                known = ", ".join(BENCHMARKS)
                raise ValueError(f"unknown benchmark {part!r}; known: {known}")
            if match[0] not in out:
                out.append(match[0])
    return out


def by_action(action: str) -> Benchmark | None:
    return next((b for b in BENCHMARKS.values() if b.action_name == action), None)


def missing_requirements(bench: Benchmark) -> list[str]:
    """Import names this interpreter lacks for ``bench`` (what an action would fail on)."""
    return [m for m in bench.requires if importlib.util.find_spec(m) is None]
