"""Object store and file server lifecycle, and the synthetic input data."""

from __future__ import annotations

import io
import os
import urllib.request
from pathlib import Path

from sebs_helpers import needs_modules

from sebs_wrappers import datagen
from sebs_wrappers.objstore import LocalServices, ObjectStore, Services, saved_alive, stop_saved


@needs_modules("moto", "minio", "flask")
def test_store_start_put_get_delete_stop() -> None:
    store = ObjectStore()
    endpoint = store.start()
    pid = store.proc.pid
    try:
        assert endpoint.endpoint.startswith("127.0.0.1:")
        client = endpoint.client()
        assert client.bucket_exists(endpoint.bucket)
        client.put_object(endpoint.bucket, "out/a.txt", io.BytesIO(b"abc"), 3)
        client.put_object(endpoint.bucket, "out/b/c.txt", io.BytesIO(b"de"), 2)
        client.put_object(endpoint.bucket, "keep/x", io.BytesIO(b"x"), 1)
        assert client.get_object(endpoint.bucket, "out/a.txt").read() == b"abc"
        assert endpoint.delete_prefix("out/") == 2
        left = [o.object_name for o in client.list_objects(endpoint.bucket, recursive=True)]
        assert left == ["keep/x"]
        params = endpoint.action_params()
        assert params["MINIO_STORAGE_CONNECTION_URL"] == endpoint.endpoint
    finally:
        store.stop()
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@needs_modules("moto", "minio", "flask")
def test_services_saved_and_stopped_by_pid(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "hello.txt").write_text("hi")
    running = LocalServices(tmp_path / "files").start()
    state = tmp_path / "services.json"
    running.save(state)
    try:
        assert Services.load(state) == running
        assert saved_alive(state) is not None
        with urllib.request.urlopen(f"{running.files_url}/hello.txt", timeout=5) as r:
            assert r.read() == b"hi"
    finally:
        assert stop_saved(state)
    assert saved_alive(state) is None
    assert not stop_saved(state)


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


@needs_modules("imageio_ffmpeg")
def test_video(tmp_path: Path) -> None:
    path = datagen.make_video(tmp_path / "v.mp4", seconds=1, size="160x120")
    head = path.read_bytes()[:12]
    assert head[4:8] == b"ftyp"
