"""The sandbox's seccomp filter is an allow-list, Docker's default profile's: a syscall it does
not name is refused with EPERM (io_uring, a real one Docker leaves out, numbers a later kernel
may give to new syscalls), while ordinary Python and Node.js actions still run.

Each refusal here was allowed (or ENOSYS) under the block-list that ``ALLOWED_SYSCALLS`` in
``containers/runtimes/sandbox.py`` replaced (2026-12, issue 38)."""

from __future__ import annotations

import os
import platform

import pytest

from tests.integration.containers.backends import (
    Maker,
    py,
    result,
    run,
    state_dir,  # noqa: F401  (a fixture)
)
from tests.integration.containers.runtimes.test_sandbox import backend, make, needs_node  # noqa: F401  (fixtures)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root"),
    pytest.mark.skipif(
        platform.machine() not in ("x86_64", "aarch64"), reason="syscall numbers per arch"
    ),
]
# Numbers of the syscalls called by number (io_uring_setup and clone3 are alike on both).
NR = {"x86_64": {"fanotify_init": 300, "personality": 135},
      "aarch64": {"fanotify_init": 262, "personality": 92}}.get(platform.machine(), {})  # fmt: skip

SYSCALLS_PY = py("""
    import ctypes, errno, socket

    libc = ctypes.CDLL(None, use_errno=True)

    def call(nr, *args):
        rc = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
        return "ok" if rc >= 0 else errno.errorcode[ctypes.get_errno()]

    def family(af):
        try:
            socket.socket(af, socket.SOCK_SEQPACKET if af == 38 else socket.SOCK_STREAM).close()
            return "ok"
        except OSError as e:
            return errno.errorcode[e.errno]

    def main(a):
        params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed: valid
        nr = a["nr"]
        return {
            "io_uring_setup": call(425, 4, ctypes.addressof(params)),
            "not_a_syscall_yet": call(1000),
            # FAN_CLASS_NOTIF | FAN_REPORT_FID: unprivileged since Linux 5.13
            "fanotify_init": call(nr["fanotify_init"], 0x200, 0),
            "personality_no_aslr": call(nr["personality"], 0x0040000),
            "personality_query": call(nr["personality"], 0xFFFFFFFF),
            "af_vsock": family(40),
            "af_inet": family(socket.AF_INET),
            "clone3": call(435, 0, 0),  # ENOSYS, so that libc falls back to clone
        }
    """)


async def test_io_uring_is_refused(make: Maker) -> None:  # noqa: F811
    r = result(await run(await make(SYSCALLS_PY), {"nr": NR}))
    assert r["io_uring_setup"] == "EPERM", r  # the block-list let it through: "ok"


async def test_syscalls_not_on_the_allow_list_are_refused(make: Maker) -> None:  # noqa: F811
    r = result(await run(await make(SYSCALLS_PY), {"nr": NR}))
    assert r["not_a_syscall_yet"] == "EPERM", r  # the block-list: ENOSYS
    assert r["fanotify_init"] == "EPERM", r  # real, not in Docker's list: the block-list's "ok"
    # Docker's conditional rules: personality with its values only, sockets but AF_VSOCK
    assert r["personality_no_aslr"] == "EPERM" and r["af_vsock"] == "EPERM", r
    assert r["personality_query"] == "ok" and r["af_inet"] == "ok", r
    assert r["clone3"] == "ENOSYS", r


ORDINARY_PY = py("""
    import hashlib, json, os, socket, subprocess, tempfile, threading, time

    def main(a):
        out = {}
        t = threading.Thread(target=lambda: out.update(thread=True))
        t.start()
        t.join()
        out["subprocess"] = subprocess.run(["sh", "-c", "echo $((6 * 7))"],
                                           capture_output=True, text=True).stdout.strip()
        with tempfile.NamedTemporaryFile("w+", dir="/tmp") as f:
            f.write("x" * 1000)
            f.flush()
            f.seek(0)
            out["tmp"] = len(f.read())
        a_, b_ = socket.socketpair()
        a_.sendall(b"ping")
        out["socketpair"] = b_.recv(4).decode()
        srv = socket.create_server(("127.0.0.1", 0))
        c = socket.create_connection(srv.getsockname())
        out["tcp"] = srv.accept()[0] is not None
        for s in (a_, b_, srv, c):
            s.close()
        out["random"] = len(os.urandom(16))
        out["sleep"] = time.sleep(0.01) is None
        out["hash"] = hashlib.sha256(b"x").hexdigest()[:8]
        out["pid"] = os.getpid()
        return out
    """)


async def test_ordinary_python_still_runs(make: Maker) -> None:  # noqa: F811
    r = result(await run(await make(ORDINARY_PY)))
    assert r["thread"] and r["subprocess"] == "42" and r["tmp"] == 1000, r
    assert r["socketpair"] == "ping" and r["tcp"] and r["random"] == 16 and r["sleep"], r
    assert r["hash"] == "2d711642" and r["pid"] == 1, r


ORDINARY_JS = """
const { execSync } = require('child_process');
const fs = require('fs');
const crypto = require('crypto');
const net = require('net');
const { Worker } = require('worker_threads');
async function main() {
  fs.writeFileSync('/tmp/x', 'hello');
  const worker = await new Promise((resolve, reject) => {
    const w = new Worker('require("worker_threads").parentPort.postMessage(6 * 7)', { eval: true });
    w.on('message', resolve);
    w.on('error', reject);
  });
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close();
      resolve(p);
    });
  });
  return {
    exec: execSync('echo hi').toString().trim(),
    file: fs.readFileSync('/tmp/x', 'utf8'),
    random: crypto.randomBytes(8).length,
    worker,
    port: port > 0,
  };
}
"""


@needs_node
async def test_ordinary_nodejs_still_runs(make: Maker) -> None:  # noqa: F811
    r = result(await run(await make(ORDINARY_JS, kind="nodejs:20")))
    assert r == {"exec": "hi", "file": "hello", "random": 8, "worker": 42, "port": True}, r
