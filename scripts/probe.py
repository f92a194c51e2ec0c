"""Readiness probes for scripts/services.sh (standard library only).

    python3 scripts/probe.py kafka HOST:PORT
    python3 scripts/probe.py couchdb URL USER PASSWORD
    python3 scripts/probe.py podman SOCKET_PATH
    python3 scripts/probe.py toxiproxy URL
    python3 scripts/probe.py etcd URL

Exit 0 when the service really answers (Kafka: a Metadata response that lists a broker;
CouchDB: GET / with basic auth answers 200 with JSON; Podman: GET /_ping answers "OK";
Toxiproxy: GET /proxies answers 200 with a JSON object; etcd: GET /health answers
{"health": "true"}, which needs a leader),
1 otherwise, with the reason on stderr.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import struct
import sys
import urllib.request

TIMEOUT = 3.0


def _kafka_request(sock: socket.socket, api_key: int, version: int, corr: int, body: bytes):
    client_id = b"ow-probe"
    header = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    msg = header + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", _read_exact(sock, 4))[0]
    data = _read_exact(sock, size)
    got_corr = struct.unpack(">i", data[:4])[0]
    if got_corr != corr:
        raise RuntimeError(f"correlation id {got_corr} != {corr}")
    return data[4:]


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def probe_kafka(bootstrap: str) -> None:
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
        sock.settimeout(TIMEOUT)
        # ApiVersions v0: supported by every broker; tells which Metadata versions it takes.
        resp = _kafka_request(sock, 18, 0, 1, b"")
        error, n = struct.unpack(">hi", resp[:6])
        if error:
            raise RuntimeError(f"ApiVersions error {error}")
        meta_range = None
        for i in range(n):
            key, lo, hi = struct.unpack(">hhh", resp[6 + 6 * i : 12 + 6 * i])
            if key == 3:
                meta_range = (lo, hi)
        if meta_range is None:
            raise RuntimeError("broker does not list the Metadata API")
        # Metadata v4..v8 share the non-flexible request layout used here.
        version = min(max(meta_range[0], 4), 8)
        if version > meta_range[1] or version < meta_range[0]:
            raise RuntimeError(f"no usable Metadata version in {meta_range}")
        body = struct.pack(">i", 0) + b"\x00"  # no topics, allow_auto_topic_creation=false
        if version >= 8:
            body += b"\x00\x00"  # include cluster / topic authorized operations
        resp = _kafka_request(sock, 3, version, 2, body)
        brokers = struct.unpack(">i", resp[4:8])[0]  # after throttle_time_ms
        if brokers < 1:
            raise RuntimeError("metadata lists no broker yet")


def probe_couchdb(url: str, user: str, password: str) -> None:
    req = urllib.request.Request(url.rstrip("/") + "/", headers={"Accept": "application/json"})
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    req.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
        if resp.status != 200:
            raise RuntimeError(f"GET / answered {resp.status}")
        json.loads(resp.read())


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("localhost", timeout=TIMEOUT)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(self._path)


def probe_podman(sock_path: str) -> None:
    conn = _UnixHTTPConnection(sock_path)
    try:
        conn.request("GET", "/_ping")
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200 or body.strip() != b"OK":
            raise RuntimeError(f"/_ping answered {resp.status} {body[:80]!r}")
    finally:
        conn.close()


def probe_toxiproxy(url: str) -> None:
    with urllib.request.urlopen(url.rstrip("/") + "/proxies", timeout=TIMEOUT) as resp:
        if resp.status != 200 or not isinstance(json.loads(resp.read()), dict):
            raise RuntimeError(f"GET /proxies answered {resp.status}")


def probe_etcd(url: str) -> None:
    with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=TIMEOUT) as resp:
        body = json.loads(resp.read())
        if resp.status != 200 or body.get("health") != "true":
            raise RuntimeError(f"GET /health answered {resp.status} {body}")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    kind, args = argv[1], argv[2:]
    probes = {
        "kafka": probe_kafka,
        "couchdb": probe_couchdb,
        "podman": probe_podman,
        "toxiproxy": probe_toxiproxy,
        "etcd": probe_etcd,
    }
    if kind not in probes:
        print(f"unknown probe {kind!r}", file=sys.stderr)
        return 2
    try:
        probes[kind](*args)
    except Exception as exc:
        print(f"{kind} not ready: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
