"""``ow-invoker standalone`` keeps its secrets to itself, and takes users without flags: keys
from a file, none on the command line (``/proc/<pid>/cmdline`` is readable by every process,
actions included); the state directory 0700 and the store 0600 even when an older run left
them open; a random admin password in a 0600 file; ``ow-invoker admin user create/block`` and
``limits set --embedded`` on the store of the running platform, honoured within seconds; the
console's scheduler view showing a user only their namespace, the operator every one."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from front.identities import GUEST_AUTH, basic_auth
from harness.processes import free_port

ROOT = Path(__file__).resolve().parents[3]
BOB = f"{uuid.uuid4()}:" + "b" * 64
CODE = "def main(args):\n    return {'hi': args.get('name')}\n"


@dataclass
class Standalone:
    url: str
    state: Path
    pid: int

    def call(self, method: str, path: str, auth: str, body: object = None) -> tuple[int, object]:
        req = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": auth, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


def admin(*args: str) -> str:
    """``ow-invoker admin ...`` as an operator runs it; its stdout."""
    p = subprocess.run(
        [sys.executable, "-m", "ow_invoker", "admin", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def until(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    tmp = tmp_path_factory.mktemp("secrets")
    state = tmp / "state"
    # What an older version left: a world-readable state directory and store.
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    sqlite3.connect(state / "openwhisk.sqlite3").close()
    os.chmod(state / "openwhisk.sqlite3", 0o644)
    auth_file = tmp / "auth"
    auth_file.write_text(f"# the platform's users\nguest={GUEST_AUTH}\nbob={BOB}\n")
    os.chmod(auth_file, 0o600)
    port = free_port()
    log = open(tmp / "standalone.log", "wb")  # noqa: SIM115 (the child keeps it)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ow_invoker",
            "standalone",
            "--port",
            str(port),
            "--state-dir",
            str(state),
            "--auth-file",
            str(auth_file),
            "--admin-port",
            "0",
            "--unique-name",
            f"s{uuid.uuid4().hex[:6]}",
            "--action-cores",
            "1",
            "--ready-file",
            str(tmp / "ready"),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        ready = until(lambda: (tmp / "ready").exists() or proc.poll() is not None, 120)
        assert ready and proc.poll() is None, (tmp / "standalone.log").read_text()[-3000:]
        yield Standalone(f"http://127.0.0.1:{port}", state, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_no_secret_on_the_command_line_and_private_files(platform: Standalone):
    cmdline = Path(f"/proc/{platform.pid}/cmdline").read_bytes().decode()
    password = (platform.state / "admin.password").read_text().strip()
    assert len(password) >= 24
    for secret in (GUEST_AUTH.split(":")[1], BOB.split(":")[1], password):
        assert secret not in cmdline
    assert mode(platform.state) == 0o700  # tightened: it was 0755
    assert mode(platform.state / "openwhisk.sqlite3") == 0o600  # it was 0644
    assert mode(platform.state / "admin.password") == 0o600
    for wal in ("openwhisk.sqlite3-wal", "openwhisk.sqlite3-shm"):
        if (platform.state / wal).exists():
            assert mode(platform.state / wal) == 0o600, wal
    # The keys of the file work; the admin password is not a key.
    status, _ = platform.call("GET", "/api/v1/namespaces", basic_auth(BOB))
    assert status == 200
    status, _ = platform.call("GET", "/api/v1/namespaces", basic_auth(f"invoker.user:{password}"))
    assert status == 401


def test_admin_adds_limits_and_blocks_a_user_of_the_running_platform(platform: Standalone):
    subject = f"alice{uuid.uuid4().hex[:6]}"
    key = admin("user", "create", subject, "--embedded", str(platform.state))
    alice = basic_auth(key)
    listing = "/api/v1/namespaces/_/actions"
    assert until(lambda: platform.call("GET", listing, alice)[0] == 200), "the key never worked"
    status, body = platform.call("GET", "/api/v1/namespaces", alice)
    assert status == 200 and body == [subject]
    path = f"{listing}/hi?overwrite=true"
    status, _ = platform.call("PUT", path, alice, {"exec": {"kind": "python:3.11", "code": CODE}})
    assert status == 200
    status, body = platform.call("POST", f"{listing}/hi?blocking=true&result=true", alice, {})
    assert status == 200 and body == {"hi": None}
    assert admin("user", "get", subject, "--embedded", str(platform.state)) == key

    admin(
        "limits", "set", subject, "--concurrentInvocations", "7", "--embedded", str(platform.state)
    )
    limits = "/api/v1/namespaces/_/limits"
    assert until(lambda: platform.call("GET", limits, alice)[1] == {"concurrentInvocations": 7})

    admin("user", "block", subject, "--embedded", str(platform.state))
    assert until(lambda: platform.call("GET", listing, alice)[0] == 401), "still accepted"
    admin("user", "unblock", subject, "--embedded", str(platform.state))
    assert until(lambda: platform.call("GET", listing, alice)[0] == 200)
    admin("user", "delete", subject, "--embedded", str(platform.state))
    assert until(lambda: platform.call("GET", listing, alice)[0] == 401)


def test_the_console_shows_each_user_their_namespace_only(platform: Standalone):
    actions = "/api/v1/namespaces/_/actions"
    for who, name in ((GUEST_AUTH, "gfun"), (BOB, "bfun")):
        body = {"exec": {"kind": "python:3.11", "code": CODE}}
        status, _ = platform.call("PUT", f"{actions}/{name}?overwrite=true", basic_auth(who), body)
        assert status == 200
        status, _ = platform.call("POST", f"{actions}/{name}?blocking=true", basic_auth(who), {})
        assert status == 200

    def functions(auth: str) -> set[str]:
        status, view = platform.call("GET", "/console/api/scheduler", auth)
        assert status == 200, view
        assert isinstance(view, dict)
        return {f["function"] for f in view["functions"]}

    assert functions(basic_auth(BOB)) == {"bob/bfun"}
    assert "bob/bfun" not in functions(basic_auth(GUEST_AUTH))
    assert "guest/gfun" in functions(basic_auth(GUEST_AUTH))
    password = (platform.state / "admin.password").read_text().strip()
    assert {"bob/bfun", "guest/gfun"} <= functions(basic_auth(f"invoker.user:{password}"))
    status, _ = platform.call("GET", "/console/api/scheduler", basic_auth("invoker.user:guess"))
    assert status == 401
    status, config = platform.call("GET", "/console/api/config", "")
    assert status == 200 and GUEST_AUTH not in json.dumps(config) and BOB not in json.dumps(config)


def test_no_process_on_the_machine_shows_a_key_while_actions_run(platform: Standalone):
    """The platform and everything it started (zygotes, runtimes, a running action) carry
    bob's key, used just now, in no command line."""
    actions = "/api/v1/namespaces/_/actions"
    sleepy = "import time\ndef main(args):\n    time.sleep(1)\n    return {}\n"
    body = {"exec": {"kind": "python:3.11", "code": sleepy}}
    status, _ = platform.call("PUT", f"{actions}/sleepy?overwrite=true", basic_auth(BOB), body)
    assert status == 200
    status, started = platform.call("POST", f"{actions}/sleepy", basic_auth(BOB), {})
    assert status == 202, started
    seen = 0
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue  # gone meanwhile
            seen += 1
            assert BOB.split(":")[1].encode() not in cmdline, proc.name
        time.sleep(0.2)
    assert seen > 0
