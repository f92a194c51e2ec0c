"""``ow-invoker standalone`` opens its API only once its invoker is healthy: a client that
calls the moment the port accepts connections never gets 503 "No invokers available"."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from front.identities import GUEST_AUTH, basic_auth
from harness.processes import free_port

ROOT = Path(__file__).resolve().parents[3]
CODE = "def main(args):\n    return {'hi': args.get('name', 'you')}\n"


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.05)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _request(method: str, url: str, body: object) -> tuple[int, str]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method=method,
        headers={"Authorization": basic_auth(GUEST_AUTH), "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_first_call_after_the_port_opens_is_served(tmp_path):
    port = free_port()
    log = open(tmp_path / "standalone.log", "wb")  # noqa: SIM115 (the child keeps it)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ow_invoker",
            "standalone",
            "--port",
            str(port),
            "--state-dir",
            str(tmp_path / "state"),
            "--admin-port",
            "0",
            "--unique-name",
            f"r{uuid.uuid4().hex[:6]}",
            "--action-cores",
            "1",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not _port_open(port):
            assert proc.poll() is None, (tmp_path / "standalone.log").read_text()
            assert time.monotonic() < deadline, "the API port never opened"
            time.sleep(0.005)
        base = f"http://127.0.0.1:{port}/api/v1/namespaces/_/actions/hello"
        status, text = _request("PUT", base, {"exec": {"kind": "python:3.11", "code": CODE}})
        assert status == 200, text
        status, text = _request("POST", base + "?blocking=true&result=true", {"name": "early"})
        assert status == 200, text  # was 503 "No invokers available."
        assert json.loads(text) == {"hi": "early"}
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
