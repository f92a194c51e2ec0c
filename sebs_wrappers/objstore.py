"""A local S3-compatible object store (moto's server) and a loopback file server.

SeBS's storage module is a minio client that reads ``MINIO_STORAGE_*`` from the action's
parameters; moto's S3 speaks enough of the protocol for it. 120.uploader downloads a URL, which
the file server provides on loopback instead of the public internet. Both bind 127.0.0.1 only,
run as child processes, and are stopped by PID.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sebs_wrappers.procs import ChildProcess, cmdline_has, free_port, stop_pid

BUCKET = "sebs-benchmarks"
ACCESS_KEY = "sebs-access"
SECRET_KEY = "sebs-secret-key"
REGION = "us-east-1"


@dataclass(frozen=True)
class StorageEndpoint:
    """Where actions find the store: what SeBS passes as ``MINIO_STORAGE_*`` parameters."""

    endpoint: str  # host:port, no scheme (minio's convention)
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    bucket: str = BUCKET

    def action_params(self) -> dict[str, str]:
        return {
            "MINIO_STORAGE_CONNECTION_URL": self.endpoint,
            "MINIO_STORAGE_ACCESS_KEY": self.access_key,
            "MINIO_STORAGE_SECRET_KEY": self.secret_key,
        }

    def client(self):
        import minio

        return minio.Minio(
            self.endpoint,
            access_key=self.access_key,
            secret_key=self.secret_key,
            secure=False,
            region=REGION,
        )

    def ensure_bucket(self) -> None:
        c = self.client()
        if not c.bucket_exists(self.bucket):
            c.make_bucket(self.bucket)

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object under ``prefix`` (benchmark outputs); returns how many."""
        from minio.deleteobjects import DeleteObject

        c = self.client()
        names = [o.object_name for o in c.list_objects(self.bucket, prefix, recursive=True)]
        errors = list(c.remove_objects(self.bucket, (DeleteObject(n) for n in names)))
        if errors:
            raise RuntimeError(f"could not delete {len(errors)} objects under {prefix!r}")
        return len(names)


def _wait_http(url: str, proc: ChildProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.argv[:3]} exited early (see {proc.log or 'no log'})")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status < 500:
                    return
        except urllib.error.HTTPError as e:
            if e.code < 500:
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


class ObjectStore:
    """moto's S3 server on a loopback port."""

    def __init__(self, port: int | None = None, log: Path | None = None) -> None:
        self.port = port or free_port()
        self.proc = ChildProcess(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            log,
        )

    @property
    def endpoint(self) -> StorageEndpoint:
        return StorageEndpoint(f"127.0.0.1:{self.port}")

    def start(self, timeout_s: float = 60.0) -> StorageEndpoint:
        self.proc.start()
        try:
            _wait_http(f"http://127.0.0.1:{self.port}/", self.proc, timeout_s)
            self.endpoint.ensure_bucket()
        except BaseException:
            self.proc.stop()
            raise
        return self.endpoint

    def stop(self) -> None:
        self.proc.stop()

    def __enter__(self) -> StorageEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FileServer:
    """A static HTTP server for one directory on loopback (the stdlib's ``http.server``)."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.proc = ChildProcess(
            [
                sys.executable,
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                "--directory",
                str(directory),
                str(self.port),
            ],
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.proc.start()
        try:
            _wait_http(self.base_url + "/", self.proc, timeout_s)
        except BaseException:
            self.proc.stop()
            raise
        return self.base_url

    def stop(self) -> None:
        self.proc.stop()


@dataclass
class Services:
    """The running store and file server, as written to ``<state dir>/services.json``."""

    storage: StorageEndpoint
    files_url: str
    store_pid: int | None = None
    files_pid: int | None = None

    def host_ports(self) -> tuple[int, ...]:
        """The loopback ports of the store and the file server: what sandboxed actions
        must be let reach (``--sandbox-host-ports``)."""
        ports = [self.storage.endpoint.rpartition(":")[2], urlsplit(self.files_url).port]
        return tuple(int(p) for p in ports if p)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        path.write_text(json.dumps(data, indent=1))

    @classmethod
    def load(cls, path: Path) -> Services:
        data = json.loads(path.read_text())
        data["storage"] = StorageEndpoint(**data["storage"])
        return cls(**data)


class LocalServices:
    """Start the object store and the file server together; stop both on exit."""

    def __init__(self, files_dir: Path, log_dir: Path | None = None) -> None:
        self.store = ObjectStore(log=(log_dir / "moto.log") if log_dir else None)
        self.files = FileServer(files_dir)
        if log_dir:
            log_dir.mkdir(parents=True, exist_ok=True)

    def start(self) -> Services:
        storage = self.store.start()
        try:
            url = self.files.start()
        except BaseException:
            self.store.stop()
            raise
        return Services(storage, url, self.store.proc.pid, self.files.proc.pid)

    def stop(self) -> None:
        self.files.stop()
        self.store.stop()

    def __enter__(self) -> Services:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_saved(state: Path) -> bool:
    """Stop services recorded in ``state`` (started by ``sebs store start``); False if none."""
    if not state.exists():
        return False
    services = Services.load(state)
    for pid, marker in ((services.files_pid, "http.server"), (services.store_pid, "moto.server")):
        if pid and cmdline_has(pid, marker):
            stop_pid(pid)
    state.unlink()
    return True


def saved_alive(state: Path) -> Services | None:
    if not state.exists():
        return None
    services = Services.load(state)
    if services.store_pid and cmdline_has(services.store_pid, "moto.server"):
        return services
    return None
