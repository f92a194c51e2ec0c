"""Copy the pure-Python files of installed distributions into an action zip.

Vendoring makes a zip run on a stock Python runtime that lacks the package; compiled
extensions are left out (packages like markupsafe fall back to their pure-Python code), and
anything binary-only or large is declared in the ``sebs`` extra instead.
"""

from __future__ import annotations

import importlib.metadata as md
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MAX_VENDOR_BYTES = 8 * 1024 * 1024
_SKIP_SUFFIXES = (".so", ".pyd", ".dylib", ".pyc", ".pyi", ".c", ".h")


@dataclass(frozen=True)
class VendoredFile:
    source: Path
    arcname: str


def distribution_files(name: str) -> list[VendoredFile]:
    """Files of distribution ``name`` worth shipping (no metadata, caches or binaries).

    Returns ``[]`` when the distribution is not installed: vendoring is best effort and the
    action then relies on its interpreter's packages.
    """
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return []
    out: list[VendoredFile] = []
    for f in dist.files or ():
        rel = PurePosixPath(str(f))
        if rel.parts[0].endswith((".dist-info", ".egg-info", ".data")) or rel.parts[0] == "..":
            continue
        if "__pycache__" in rel.parts or rel.name.endswith(_SKIP_SUFFIXES):
            continue
        if rel.parts[0] == "bin":
            continue
        src = Path(str(dist.locate_file(f)))
        if src.is_file():
            out.append(VendoredFile(src, str(rel)))
    return out


def collect(
    names: tuple[str, ...] | list[str], limit: int = MAX_VENDOR_BYTES
) -> list[VendoredFile]:
    """Files of every named distribution, or ``[]`` if together they exceed ``limit`` bytes."""
    files = [vf for name in names for vf in distribution_files(name)]
    total = sum(vf.source.stat().st_size for vf in files)
    return files if total <= limit else []
