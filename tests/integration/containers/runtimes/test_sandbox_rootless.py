"""The sandbox under a non-root invoker: each container in a user namespace of its own, its
uids mapped from the invoker's subordinate ranges (newuidmap/newgidmap), and the same walls.

The test makes a system user with subordinate ids (removed at the end) and runs the zygote
as that user with Debian's ``/usr/bin/python3`` — the project's own interpreter and checkout
may sit in a directory only root can enter (a mode-700 clone), and the zygote is the part
that builds sandboxes. It is driven over its JSON-lines channel, as the backend drives it,
and the runtime over its Unix socket."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from containers.process.backend import PYTHON_RUNTIME, _subordinate
from tests.integration.containers.runtimes.test_sandbox import ATTACKS_PY, dummy_targets

USER = "owsandbox-test"
SUBIDS = (3_000_000, 65536)
SYSTEM_PYTHON = Path("/usr/bin/python3")
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="making the test user needs root"),
    pytest.mark.skipif(
        not (shutil.which("newuidmap") and shutil.which("useradd") and SYSTEM_PYTHON.exists()),
        reason="needs uidmap, useradd and the system's python3",
    ),
]


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    made = False
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        first, count = SUBIDS
        ids = f"{first}-{first + count - 1}"
        subprocess.run(["useradd", "--system", "--no-create-home", USER], check=True)
        subprocess.run(["usermod", "--add-subuids", ids, "--add-subgids", ids, USER], check=True)
        entry, made = pwd.getpwnam(USER), True
    try:
        yield entry
    finally:
        if made:
            subprocess.run(["userdel", USER], check=False)


class Zygote:
    """The zygote run as the test user, spoken to as the backend does."""

    def __init__(self, user: pwd.struct_passwd, work: Path, sandbox: dict[str, Any]) -> None:
        self.work = work
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(work / "lib"), "LANG": "C.UTF-8"}
        argv = [
            str(SYSTEM_PYTHON), "-B", str(work / "python_runtime.py"), "zygote",
            "--marker", "owrootless", "--spares", "1", "--sandbox", json.dumps(sandbox),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=work,
            user=user.pw_uid, group=user.pw_gid, extra_groups=[],
        )  # fmt: skip
        self.ready = self.read()
        self.seq = 0

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the zygote exited"
        return json.loads(line)

    def spawn(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.seq += 1
        log = self.work / f"c{self.seq}.log"
        req = {"op": "spawn", "id": self.seq, "name": f"c{self.seq}", "cwd": "/action",
               "tmp": "/tmp", "log": str(log), "env": {"PATH": "/usr/bin:/bin"}}  # fmt: skip
        self.proc.stdin.write(json.dumps(req).encode() + b"\n")
        self.proc.stdin.flush()
        while (msg := self.read()).get("id") != self.seq:
            pass
        return msg

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def post(path: str, what: str, body: dict[str, Any]) -> tuple[int, Any]:
    """One HTTP request to a runtime's Unix socket."""
    data = json.dumps(body).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        s.connect(path)
        s.sendall(
            f"POST /{what} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + data
        )
        reply = b"".join(iter(lambda: s.recv(65536), b""))
    head, _, payload = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


@pytest.fixture
def zygote(user: pwd.struct_passwd) -> Iterator[Zygote]:
    uid_range, gid_range = (_subordinate(f"/etc/sub{k}", USER, user.pw_uid) for k in ("uid", "gid"))
    assert uid_range and gid_range, "the test user has subordinate ids"
    work = Path(tempfile.mkdtemp(prefix="owrootless-", dir="/var/tmp"))
    (work / "lib").mkdir()
    for f in (PYTHON_RUNTIME, PYTHON_RUNTIME.parent / "sandbox.py"):
        shutil.copy(f, work / f.name)
    import pyseccomp

    shutil.copy(pyseccomp.__file__, work / "lib" / "pyseccomp.py")
    (work / "root").mkdir(mode=0o755)  # the new roots' mount point: containers' uids pass
    (work / "sockets").mkdir(mode=0o700)
    work.chmod(0o711)
    for p in (work, work / "lib", work / "root", work / "sockets"):
        os.chown(p, user.pw_uid, user.pw_gid)
    sandbox = {
        "root": str(work / "root"), "sockets": str(work / "sockets"), "project_root": "/opt/ow",
        "binds": ["/usr", "/etc"], "files": {}, "network": "none", "pids_max": 64,
        "uid_base": uid_range[0], "gid_base": gid_range[0], "uid_count": 4096, "userns": True,
        "newuidmap": shutil.which("newuidmap"), "newgidmap": shutil.which("newgidmap"),
    }  # fmt: skip
    z = Zygote(user, work, sandbox)
    try:
        yield z
    finally:
        z.close()
        shutil.rmtree(work, ignore_errors=True)


def test_a_non_root_invoker_sandboxes_in_user_namespaces(
    zygote: Zygote, user: pwd.struct_passwd
) -> None:
    assert zygote.ready.get("event") == "ready" and "sandbox_error" not in zygote.ready
    first, _ = _subordinate("/etc/subuid", USER, user.pw_uid) or (0, 0)
    made = [zygote.spawn() for _ in range(2)]
    answers = []
    for c in made:
        assert "error" not in c, c
        code = {"value": {"name": "a", "main": "main", "binary": False, "code": ATTACKS_PY}}
        assert post(c["socket"], "init", code)[0] == 200
        targets = {**dummy_targets(), "invoker": zygote.proc.pid}
        status, r = post(c["socket"], "run", {"value": {"targets": targets, "fork": 200}})
        assert status == 200, r
        host_uid = os.stat(f"/proc/{c['pid']}").st_uid  # the shim, as the host sees it
        answers.append((r, host_uid))
    for r, host_uid in answers:
        assert r["procs"] == [1], "its own pid namespace"
        assert r["status"]["Uid"].split()[0] == "1000", "uid 1000 inside"
        assert r["status"]["CapEff"] == "0000000000000000"
        assert r["status"]["NoNewPrivs"] == "1" and r["status"]["Seccomp"] == "2"
        for attack in ("invoker_environ", "invoker_cmdline", "mount", "unshare", "write_root"):
            assert not r[attack]["ok"], (attack, r[attack])
        assert 0 < r["forked"] < 64, "the pids limit holds"
        assert first <= host_uid < first + 4096 and host_uid != user.pw_uid
    action_uids = {h + 1 for _, h in answers}  # inside 0 -> host uid, 1000 -> host uid + 1
    assert len(action_uids) == 2 and user.pw_uid not in action_uids, "never shared"
