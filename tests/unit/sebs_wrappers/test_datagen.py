"""The synthetic input data: images, trees and FASTA."""

from __future__ import annotations

import os
from pathlib import Path

from sebs_helpers import needs_modules

from sebs_wrappers import datagen


@needs_modules("PIL")
def test_images(tmp_path: Path) -> None:
    from PIL import Image

    path = datagen.make_image(tmp_path / "a.jpg", size=(320, 200), seed=1)
    with Image.open(path) as img:
        assert img.format == "JPEG" and img.size == (320, 200)
    mtime = path.stat().st_mtime_ns
    datagen.make_image(tmp_path / "a.jpg", size=(320, 200), seed=1)
    assert path.stat().st_mtime_ns == mtime  # cached
    datagen.make_image(tmp_path / "a.jpg", size=(160, 100), seed=1)
    with Image.open(path) as img:
        assert img.size == (160, 100)  # regenerated with new parameters


def test_tree_and_fasta(tmp_path: Path) -> None:
    tree = datagen.make_tree(tmp_path / "data" / "tree", files=10, total_bytes=50_000)
    files = [p for p in tree.rglob("*") if p.is_file() and p.name != ".params.json"]
    assert len(files) == 10
    assert os.listdir(tmp_path / "data") == ["tree"]  # nothing else for input.py to list
    fasta = datagen.make_fasta(tmp_path / "g.fasta", bases=1000, seed=3)
    lines = fasta.read_text().splitlines()
    assert lines[0].startswith(">")
    seq = "".join(lines[1:])
    assert len(seq) == 1000 and set(seq) <= set("ACGT")
    assert (
        datagen.make_fasta(tmp_path / "h.fasta", bases=1000, seed=3).read_text()
        == fasta.read_text()
    )
