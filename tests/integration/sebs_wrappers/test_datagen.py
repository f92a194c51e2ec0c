"""The synthetic input video (ffmpeg in a child process)."""

from __future__ import annotations

from pathlib import Path

from sebs_helpers import needs_modules

from sebs_wrappers import datagen


@needs_modules("imageio_ffmpeg")
def test_video(tmp_path: Path) -> None:
    path = datagen.make_video(tmp_path / "v.mp4", seconds=1, size="160x120")
    head = path.read_bytes()[:12]
    assert head[4:8] == b"ftyp"
