"""Build one OpenWhisk zip action per SeBS benchmark, laid out as SeBS's OpenWhisk image is.

Layout (``from function import function`` in the wrapper must resolve)::

    __main__.py                 SeBS OpenWhisk wrapper, verbatim
    function/__init__.py        our bootstrap (one thread per call, private temp dir, ffmpeg/torch)
    function/function.py        the benchmark, with its fixed /tmp paths made per-container
    function/storage.py         SeBS's minio storage client (benchmarks that use storage)
    function/<resources>        templates, watermark, ImageNet class index ...
    function/PACKAGING.json     what was packaged and patched
    <vendored packages>         pure-Python files of small dependencies

Zips are byte-for-byte reproducible (sorted entries, fixed timestamps), so a redeploy of an
unchanged benchmark uploads the same code.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from sebs_wrappers import vendor
from sebs_wrappers.catalog import SEBS_VERSION, Benchmark, wrapper_dir

PAYLOAD = Path(__file__).with_name("payload")
_EPOCH = (1980, 1, 1, 0, 0, 0)
# '/tmp/...' and '/tmp' string literals in single or double quotes
_TMP_PREFIX = re.compile(r"""(['"])/tmp/""")
_TMP_EXACT = re.compile(r"""(['"])/tmp\1""")
_TMPDIR_EXPR = "__import__('tempfile').gettempdir()"


@dataclass(frozen=True)
class Package:
    benchmark: Benchmark
    path: Path
    entries: tuple[str, ...]
    tmp_rewrites: int

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def rewrite_tmp_paths(source: str) -> tuple[str, int]:
    """Point fixed ``/tmp`` literals at ``tempfile.gettempdir()``.

    Several benchmarks download to ``/tmp/<key>``; two containers of one function running at
    once would then overwrite each other's input (and 411 would load a half-written model). The
    bootstrap gives each container its own temp dir; this makes the code use it.
    """
    source, n1 = _TMP_EXACT.subn(_TMPDIR_EXPR, source)
    source, n2 = _TMP_PREFIX.subn(lambda m: f"{_TMPDIR_EXPR} + {m.group(1)}/", source)
    return source, n1 + n2


# SeBS's OpenWhisk storage client gives the object store 1 s to answer. Our loopback S3 store
# (moto) takes longer for 504's 149 MB upload on a loaded 2-core machine, so the packaged copy
# waits longer; the benchmark's own code is unchanged.
STORAGE_TIMEOUT_S = 120
_STORAGE_TIMEOUT = re.compile(r"timedelta\(seconds=1\)")


def storage_with_timeout(source: str, seconds: int) -> tuple[str, int | None]:
    """SeBS's storage wrapper with its 1 s connect/read timeout raised to ``seconds``."""
    patched, n = _STORAGE_TIMEOUT.subn(f"timedelta(seconds={seconds})", source)
    return patched, seconds if n else None


def _resource(bench: Benchmark, name: str) -> Path:
    for base in (bench.code_dir, bench.path):
        if (base / name).exists():
            return base / name
    raise FileNotFoundError(f"{bench.id}: resource {name!r} not found under {bench.path}")


def _files_under(root: Path, arc_prefix: str) -> list[tuple[Path, str]]:
    if root.is_file():
        return [(root, arc_prefix)]
    return [
        (p, f"{arc_prefix}/{p.relative_to(root).as_posix()}")
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    ]


def _write(zf: zipfile.ZipFile, arcname: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build(bench: Benchmark, out_dir: Path, *, rewrite_tmp: bool = True) -> Package:
    """Write ``<out_dir>/<action name>.zip`` for ``bench`` and describe it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    entries: dict[str, tuple[bytes, int]] = {}

    entries["__main__.py"] = ((wrapper_dir() / "__main__.py").read_bytes(), 0o644)
    entries["function/__init__.py"] = ((PAYLOAD / "bootstrap.py").read_bytes(), 0o644)

    source = (bench.code_dir / "function.py").read_text()
    rewrites = 0
    if rewrite_tmp:
        source, rewrites = rewrite_tmp_paths(source)
    entries["function/function.py"] = (source.encode(), 0o644)
    storage_timeout = None
    if bench.needs_storage:
        storage, storage_timeout = storage_with_timeout(
            (wrapper_dir() / "storage.py").read_text(), STORAGE_TIMEOUT_S
        )
        entries["function/storage.py"] = (storage.encode(), 0o644)

    for name in bench.resources:
        for src, arc in _files_under(_resource(bench, name), f"function/{name}"):
            entries[arc] = (src.read_bytes(), 0o644)
    if "ffmpeg" in bench.extra_payload:
        entries["function/ffmpeg/ffmpeg"] = ((PAYLOAD / "ffmpeg.sh").read_bytes(), 0o755)
    if "torchvision_fallback" in bench.extra_payload:
        root = PAYLOAD / "torchvision_fallback"
        for src, arc in _files_under(root, "function/torchvision_fallback"):
            entries[arc] = (src.read_bytes(), 0o644)

    vendored = vendor.collect(bench.vendor)
    for vf in vendored:
        entries.setdefault(vf.arcname, (vf.source.read_bytes(), 0o644))

    manifest = {
        "benchmark": bench.id,
        "sebs_version": SEBS_VERSION,
        "memory_mb": bench.memory_mb,
        "timeout_ms": bench.timeout_ms,
        "tmp_rewrites": rewrites,
        "storage_timeout_s": storage_timeout,
        "vendored": sorted({vf.arcname.split("/", 1)[0] for vf in vendored}),
        "requires": list(bench.requires),
    }
    entries["function/PACKAGING.json"] = (json.dumps(manifest, indent=1).encode(), 0o644)

    path = out_dir / f"{bench.action_name}.zip"
    tmp = path.with_suffix(".zip.part")
    with zipfile.ZipFile(tmp, "w") as zf:
        for arcname in sorted(entries):
            data, mode = entries[arcname]
            _write(zf, arcname, data, mode)
    tmp.replace(path)
    return Package(bench, path, tuple(sorted(entries)), rewrites)


def build_all(benches: list[Benchmark], out_dir: Path) -> list[Package]:
    return [build(b, out_dir) for b in benches]
