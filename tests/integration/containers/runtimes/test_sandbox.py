"""The process backend's sandbox, attacked: one tenant's actions (python and Node.js) try to
reach another tenant's container, the invoker, its files and the host's services, and fail.

Every attack here succeeds with ``--sandbox none`` (the old process containers); the
``unsandboxed`` cases show that for the ones that do not need root to be shown."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from containers.backend import ContainerGone
from containers.process.backend import ProcessBackend, ProcessContainer
from containers.process.claim import UID_BASE
from tests.integration.containers.backends import (
    NODE,
    ROOT,
    Maker,
    new_prefix,
    py,
    result,
    run,
    state_dir,  # noqa: F401  (a fixture)
    wait_until,
)
from tests.integration.containers.runtimes.netns import server_in_namespace

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


@pytest.fixture
async def backend(state_dir: Path) -> AsyncIterator[ProcessBackend]:  # noqa: F811
    b = ProcessBackend(state_dir / "state", new_prefix(), pids_limit=64)
    await b.start()
    yield b
    await b.close()
    await b.remove_leftovers()


@pytest.fixture
def make(backend: ProcessBackend) -> Maker:
    return Maker(backend)


@pytest.fixture
async def loopback_server() -> AsyncIterator[int]:
    """A service on the host's loopback, like Kafka, CouchDB, the API or the admin port."""

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.0 200 OK\r\n\r\nsecret")
        await w.drain()
        w.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


ATTACKS_PY = py("""
    import ctypes, errno, json, os, signal, socket, subprocess, time

    def attempt(fn):
        try:
            return {"ok": True, "value": fn()}
        except Exception as e:
            return {"ok": False, "error": type(e).__name__ + ": " + str(e)}

    def read(path, n=200):
        with open(path, "rb") as f:
            return f.read(n).decode(errors="replace")

    def connect(addr, family=socket.AF_INET):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect(addr)
            if family == socket.AF_UNIX:
                s.sendall(b"POST /run HTTP/1.1\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
            else:
                s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            return s.recv(100).decode(errors="replace")
        finally:
            s.close()

    def ptrace(pid):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return "attached"

    def mount():
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return "mounted"

    def unshare():
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER: unprivileged "root"
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return "unshared"

    def leave_cgroup():
        for path in ("/sys/fs/cgroup/memory/cgroup.procs", "/sys/fs/cgroup/cgroup.procs"):
            with open(path, "w") as f:
                f.write(str(os.getpid()))
        return "moved"

    def status():
        fields = {}
        for line in read("/proc/self/status", 1 << 16).splitlines():
            k, _, v = line.partition(":")
            fields[k] = v.strip()
        return {k: fields.get(k) for k in ("Uid", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp")}

    def fork_bomb(limit):
        kids = []
        try:
            for _ in range(limit):
                pid = os.fork()
                if pid == 0:
                    time.sleep(30)
                    os._exit(0)
                kids.append(pid)
        except OSError as e:
            pass
        for pid in kids:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        return len(kids)

    def fill_shm(mb):
        written = 0
        try:
            with open("/dev/shm/fill", "wb") as f:
                for _ in range(mb):
                    f.write(b"x" * (1 << 20))
                    f.flush()
                    written += 1
        except OSError:
            pass
        return written

    def main(a):
        t = a["targets"]
        out = {
            "procs": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
            "status": status(),
            "invoker_environ": attempt(lambda: read("/proc/%d/environ" % t["invoker"])),
            "invoker_cmdline": attempt(lambda: read("/proc/%d/cmdline" % t["invoker"])),
            "store": attempt(lambda: read(t["store"])),
            "project": attempt(lambda: read(t["project"])),
            "state_dir": attempt(lambda: os.listdir(t["state_dir"])),
            "other_log": attempt(lambda: read(t["other_log"])),
            "other_socket": attempt(lambda: connect(t["other_socket"], socket.AF_UNIX)),
            "kill_other": attempt(lambda: os.kill(t["other_pid"], signal.SIGKILL)),
            "kill_all": attempt(lambda: os.kill(-1, signal.SIGKILL) if a.get("kill_all") else 0),
            "ptrace_other": attempt(lambda: ptrace(t["other_pid"])),
            "other_mem": attempt(lambda: read("/proc/%d/mem" % t["other_pid"])),
            "loopback": attempt(lambda: connect(("127.0.0.1", t["port"]))),
            "host_via_gateway": attempt(lambda: connect(("10.0.2.2", t["port"]))),
            "mount": attempt(mount),
            "unshare": attempt(unshare),
            "pin_elsewhere": attempt(lambda: os.sched_setaffinity(0, {0, 1})),
            "store_write": attempt(lambda: open(t["store"], "a").write("x")),
        }
        if not a.get("unsandboxed"):  # as root outside a sandbox these would change the host:
            # a file in /usr; the host's root cgroup gaining a process
            out["write_root"] = attempt(lambda: open("/usr/ow-sandbox-probe", "w").close())
            out["leave_cgroup"] = attempt(leave_cgroup)
        if a.get("fork"):
            out["forked"] = fork_bomb(a["fork"])
        if a.get("shm"):
            out["shm_mb"] = fill_shm(a["shm"])
        if a.get("setsid"):
            p = subprocess.Popen(["sleep", "300"], start_new_session=True)
            out["setsid_pid"] = p.pid
        return out
    """)

VICTIM_PY = py("""
    import time
    def main(a):
        time.sleep(a.get("sleep", 0))
        return {"victim": "alive", "secret": "alice-only"}
    """)


def targets(backend: ProcessBackend, other: ProcessContainer, port: int) -> dict[str, Any]:
    store = backend.state_dir.parent / "openwhisk.sqlite3"
    store.write_text("every namespace's code")
    return {
        "invoker": os.getpid(),
        "store": str(store),
        "project": str(ROOT / "README.md"),
        "state_dir": str(backend.state_dir),
        "other_log": str(other.dir / "log.json"),
        "other_socket": other.socket_path,
        "other_pid": other.pid,
        "port": port,
    }


def denied(r: dict[str, Any]) -> bool:
    return not r["ok"]


async def test_python_tenant_cannot_reach_another_the_invoker_or_the_host(
    make: Maker, backend: ProcessBackend, loopback_server: int
) -> None:
    alice = await make(VICTIM_PY)
    bob = await make(ATTACKS_PY)
    call = asyncio.ensure_future(run(alice, {"sleep": 2}))
    r = result(await run(bob, {"targets": targets(backend, alice, loopback_server), "fork": 0}))
    for attack in (
        "invoker_environ", "invoker_cmdline", "store", "project", "state_dir", "other_log",
        "other_socket", "kill_other", "ptrace_other", "other_mem", "loopback",
        "host_via_gateway", "mount", "unshare", "leave_cgroup", "pin_elsewhere", "write_root",
        "store_write",
    ):  # fmt: skip
        assert denied(r[attack]), (attack, r[attack])
    assert r["procs"] == [1], "a pid namespace of its own: only itself"
    assert "not permitted" in r["ptrace_other"]["error"], "seccomp refuses ptrace"
    uid = int(r["status"]["Uid"].split()[0])
    assert uid >= UID_BASE and uid != os.getuid()
    assert r["status"]["CapEff"] == "0000000000000000"
    assert r["status"]["NoNewPrivs"] == "1" and r["status"]["Seccomp"] == "2"
    assert result(await call)["victim"] == "alive", "alice's running call survived"


async def test_two_containers_never_share_a_uid(make: Maker) -> None:
    probe = "import os\ndef main(a):\n    return {'uid': os.getuid(), 'gid': os.getgid()}\n"
    uids = {result(await run(await make(probe)))["uid"] for _ in range(4)}
    assert len(uids) == 4 and os.getuid() not in uids


async def test_kill_all_in_a_container_kills_only_its_own(
    make: Maker, backend: ProcessBackend, loopback_server: int
) -> None:
    alice = await make(VICTIM_PY)
    bob = await make(ATTACKS_PY)
    with contextlib.suppress(Exception):  # it may take itself down with the rest
        await run(bob, {"targets": targets(backend, alice, loopback_server), "kill_all": True})
    assert result(await run(alice))["victim"] == "alive"


async def test_pids_limit_refuses_a_fork_bomb(make: Maker, backend: ProcessBackend) -> None:
    bob = await make(ATTACKS_PY)
    r = result(await run(bob, {"targets": dummy_targets(), "fork": 200}))
    assert 0 < r["forked"] < backend.pids_limit  # the runtime itself counts too


async def test_shm_is_private_size_limited_and_gone_with_the_container(make: Maker) -> None:
    before = set(os.listdir("/dev/shm"))
    bob = await make(ATTACKS_PY)
    r = result(await run(bob, {"targets": dummy_targets(), "shm": 80}))
    assert 50 <= r["shm_mb"] <= 64, r["shm_mb"]
    assert set(os.listdir("/dev/shm")) == before, "never on the host's /dev/shm"


async def test_removing_a_container_kills_what_it_setsid_ed(
    make: Maker, backend: ProcessBackend
) -> None:
    bob = await make(ATTACKS_PY)
    r = result(await run(bob, {"targets": dummy_targets(), "setsid": True}))
    uid = int(r["status"]["Uid"].split()[0])
    assert uids_alive(uid), "the detached sleep runs while the container does"
    await bob.destroy()
    assert await wait_until(lambda: not uids_alive(uid), 5), "nothing of it outlives it"


async def test_memory_limit_holds_after_trying_to_leave_the_cgroup(make: Maker) -> None:
    hog = py("""
        def main(a):
            try:
                open("/sys/fs/cgroup/memory/cgroup.procs", "w").write("1")
            except OSError:
                pass
            blocks = [bytearray(64 << 20) for _ in range(9)]  # 576 MB in a 256 MB container
            return {"held": len(blocks)}
        """)
    c = await make(hog, memory_mb=256)
    try:
        r = await run(c)
        assert r.status != 200 or "held" not in result(r)
    except ContainerGone:
        pass  # OOM-killed mid-call
    assert await c.was_oom_killed()


def dummy_targets() -> dict[str, Any]:
    return {
        "invoker": os.getpid(), "store": "/nonexistent", "project": "/nonexistent",
        "state_dir": "/nonexistent", "other_log": "/nonexistent", "other_socket": "/nonexistent",
        "other_pid": 1, "port": 9,
    }  # fmt: skip


def uids_alive(uid: int) -> bool:
    return bool(states_of(uid))


def states_of(uid: int) -> list[str]:
    """The state letters (R, S, T, ...) of the host's processes running as ``uid``."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{p}").st_uid == uid:
                    with open(f"/proc/{p}/stat") as f:
                        out.append(f.read().rsplit(")", 1)[1].split()[0])
    return out


async def test_pause_stops_what_it_setsid_ed(make: Maker) -> None:
    bob = await make(ATTACKS_PY)
    r = result(await run(bob, {"targets": dummy_targets(), "setsid": True}))
    uid = int(r["status"]["Uid"].split()[0])
    await bob.pause()
    stopped = await wait_until(lambda: len(states_of(uid)) >= 2 and set(states_of(uid)) == {"T"}, 2)
    seen = states_of(uid)
    await bob.resume()
    assert stopped, seen
    assert await wait_until(lambda: "T" not in states_of(uid), 2)


# -- Node.js ---------------------------------------------------------------------------------

ATTACKS_JS = """
const fs = require('fs');
const net = require('net');
function attempt(fn) {
  try { return { ok: true, value: String(fn()).slice(0, 100) }; }
  catch (e) { return { ok: false, error: String(e) }; }
}
function connect(opts) {
  return new Promise((resolve) => {
    const s = net.connect(opts, () => { s.end(); resolve({ ok: true }); });
    s.on('error', (e) => resolve({ ok: false, error: String(e) }));
    s.setTimeout(2000, () => { s.destroy(); resolve({ ok: false, error: 'timeout' }); });
  });
}
async function main(a) {
  const t = a.targets;
  return {
    procs: fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p)).map(Number),
    uid: process.getuid(),
    invoker_environ: attempt(() => fs.readFileSync(`/proc/${t.invoker}/environ`)),
    store: attempt(() => fs.readFileSync(t.store)),
    project: attempt(() => fs.readFileSync(t.project)),
    other_log: attempt(() => fs.readFileSync(t.other_log)),
    kill_other: attempt(() => process.kill(t.other_pid, 'SIGKILL')),
    other_socket: await connect({ path: t.other_socket }),
    loopback: await connect({ host: '127.0.0.1', port: t.port }),
    host_via_gateway: await connect({ host: '10.0.2.2', port: t.port }),
  };
}
"""


@needs_node
async def test_nodejs_tenant_cannot_reach_another_the_invoker_or_the_host(
    make: Maker, backend: ProcessBackend, loopback_server: int
) -> None:
    alice = await make(VICTIM_PY)
    bob = await make(ATTACKS_JS, kind="nodejs:20")
    r = result(await run(bob, {"targets": targets(backend, alice, loopback_server)}))
    for attack in (
        "invoker_environ", "store", "project", "other_log", "kill_other", "other_socket",
        "loopback", "host_via_gateway",
    ):  # fmt: skip
        assert not r[attack]["ok"], (attack, r[attack])
    assert r["procs"] == [1] and r["uid"] >= UID_BASE
    assert result(await run(alice))["victim"] == "alive"


# -- the network -----------------------------------------------------------------------------

OUTBOUND_PY = py("""
    import socket
    def main(a):
        s = socket.create_connection((a["host"], a["port"]), timeout=5)
        s.sendall(b"hello")
        data = s.recv(100).decode()
        s.close()
        return {"reply": data}
    """)


@pytest.fixture
def outside_server() -> Iterator[tuple[str, int]]:
    """A server on a host of its own (198.18.0.0/30, the benchmarking range): stands in for
    the internet."""
    with server_in_namespace("198.18.0.1", "198.18.0.2", 30, 18080, b"from outside: ") as at:
        yield at


async def test_outbound_connections_reach_the_outside(
    make: Maker, outside_server: tuple[str, int], loopback_server: int
) -> None:
    host, port = outside_server
    c = await make(OUTBOUND_PY)
    assert result(await run(c, {"host": host, "port": port})) == {"reply": "from outside: hello"}
    r = await run(c, {"host": "127.0.0.1", "port": loopback_server})
    assert r.status != 200 or "reply" not in result(r), "but not the host's loopback"


@pytest.fixture
def shared_mount(tmp_path: Path) -> Iterator[Path]:
    """A shared mount with a mount below it, as ``/run/netns`` is with the network
    namespaces Podman and ``ip netns`` bind there."""
    top, below = tmp_path / "shared", tmp_path / "shared" / "below"
    below.mkdir(parents=True)
    subprocess.run(["mount", "--bind", top, top], check=True)
    try:
        subprocess.run(["mount", "--make-shared", top], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", below], check=True)
        yield below
    finally:
        subprocess.run(["umount", "--recursive", "--lazy", top], check=False)


async def test_a_container_with_outbound_network_leaves_the_hosts_mounts_alone(
    make: Maker, shared_mount: Path
) -> None:
    # slirp4netns's own sandbox detaches its old root having made only / private: run in
    # the host's mount namespace, that detach took every mount below a shared one with it
    # (in CI: Podman's network namespaces, its containers then unreachable).
    assert os.path.ismount(shared_mount)
    c = await make(OUTBOUND_PY)
    r = await run(c, {"host": "127.0.0.1", "port": 9})  # refused at once; slirp4netns is up
    assert r.status in (200, 502)
    assert os.path.ismount(shared_mount), "a mount of the host's was detached"


async def test_action_network_none_has_only_its_own_loopback(
    state_dir: Path,  # noqa: F811
    outside_server: tuple[str, int],
) -> None:
    b = ProcessBackend(state_dir / "none", new_prefix(), network="none")
    await b.start()
    try:
        c = await Maker(b)(OUTBOUND_PY)
        host, port = outside_server
        r = await run(c, {"host": host, "port": port})
        assert "reply" not in result(r) and "Network is unreachable" in r.body.decode()
    finally:
        await b.close()


# -- the unsandboxed baseline: the same attacks succeed ----------------------------------------


async def test_unsandboxed_containers_are_reachable_which_is_why_the_sandbox_is_default(
    state_dir: Path,  # noqa: F811
    loopback_server: int,
) -> None:
    # In a mount namespace of its own: unsandboxed, as root, its mount of a tmpfs on /tmp
    # succeeds, and in the suite's namespace it covered the host's /tmp (the clone too).
    before = os.path.ismount("/tmp")
    probe = await asyncio.create_subprocess_exec(
        "unshare", "--mount", "--propagation", "private", "--",
        sys.executable, "-m", "tests.integration.containers.runtimes.unsandboxed_probe",
        str(state_dir / "open"), str(loopback_server),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(probe.communicate(), 120)
    assert probe.returncode == 0, err.decode()[-3000:]
    r = json.loads(out.decode().splitlines()[-1])
    assert r["loopback"]["ok"] and r["store"]["ok"] and r["invoker_cmdline"]["ok"]
    assert len(r["procs"]) > 10, "it sees the host's processes"
    assert r["mount"] == {"ok": True, "value": "mounted"}, "as root, unsandboxed, mount works"
    assert os.path.ismount("/tmp") == before, "but only in the probe's own mount namespace"


async def test_a_sandbox_that_cannot_be_built_is_refused_at_start(
    state_dir: Path,  # noqa: F811
) -> None:
    b = ProcessBackend(state_dir / "bad", new_prefix())
    original = b._sandbox_settings

    def broken() -> dict[str, Any]:
        return {**original(), "root": "/nonexistent/root"}

    b._sandbox_settings = broken  # type: ignore[method-assign]
    with pytest.raises(Exception, match=r"cannot build a sandbox: .*mount tmpfs on /nonexistent"):
        await b.start()
    await b.close()


async def test_only_the_allowed_host_ports_are_reachable(
    state_dir: Path,  # noqa: F811
    loopback_server: int,
) -> None:
    """``--sandbox-host-ports``: a local object store, say, reachable at 127.0.0.1; the rest
    of the host's loopback is still not."""

    async def other(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.close()

    forbidden = await asyncio.start_server(other, "127.0.0.1", 0)
    b = ProcessBackend(state_dir / "ports", new_prefix(), host_ports=(loopback_server,))
    await b.start()
    try:
        c = await Maker(b)(OUTBOUND_PY)
        r = result(await run(c, {"host": "127.0.0.1", "port": loopback_server}))
        assert r == {"reply": "HTTP/1.0 200 OK\r\n\r\nsecret"}
        r = result(
            await run(c, {"host": "127.0.0.1", "port": forbidden.sockets[0].getsockname()[1]})
        )
        assert "Connection refused" in r["error"]
    finally:
        forbidden.close()
        await b.close()
