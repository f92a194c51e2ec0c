"""The object store and file server's lifecycle."""

from __future__ import annotations

import io
import urllib.request
from pathlib import Path

from sebs_helpers import needs_modules

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
