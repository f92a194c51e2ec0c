"""A tenant's action in a Docker container attacks its neighbours and the host, and fails
(issue 26, item 7; see docs/docker.md, "Isolation").

On both engines (the project's dockerd, without a default bridge or iptables, and Podman):
containers with no network (``reach="netns"``, ``NetworkMode none``, the runtime reached from
inside the container's own network namespace) and on a bridge network of their own (for
outbound traffic: the runtime still listens on the container's loopback only). The network
attacks also run against ``reach="host"`` (the host's network, which the dockerd tests used
before), where they must succeed: that shows the probes can tell.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from containers.backend import ContainerError, ContainerSpec
from containers.docker.backend import DockerBackend
from containers.docker.engine import Engine
from containers.docker.netns import (
    NetnsDialer,
    NetnsError,
    can_enter_namespaces,
    is_local_engine,
    open_netns,
)
from tests.integration.containers import backends as backend_tests
from tests.integration.containers.backends import (
    ECHO_PY,
    ENGINES,
    init_body,
    new_backend,
    py,
    result,
    run,
)

pytestmark = pytest.mark.services

# The Docker backend tests' fixtures: the engine (built images), its service, a bridge network.
engine_host = backend_tests.engine_host
svc = backend_tests.svc
engine = backend_tests.engine
bridge_network = backend_tests.bridge_network


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """On both engines, each container reached inside its own network namespace."""
    if "engine_host" in metafunc.fixturenames:
        metafunc.parametrize("engine_host", list(ENGINES), indirect=True, scope="module")


def isolated(host: str, label: str, **kw: Any) -> DockerBackend:
    """A backend as production runs it: ``reach="netns"``, no network unless given one."""
    kw.setdefault("reach", "netns")
    kw.setdefault("network", "none")
    return new_backend(host, label, **kw)


# An action that POSTs /run to each target and returns what came back (or why nothing did).
KNOCK = py("""
    import json, socket
    def knock(host, port):
        try:
            s = socket.create_connection((host, port), timeout=2)
        except OSError as e:
            return 'no connection: %s' % e
        body = json.dumps({'value': {}}).encode()
        head = 'POST /run HTTP/1.1\\r\\nHost: x\\r\\nContent-Type: application/json\\r\\n'
        s.settimeout(2)
        data = b''
        try:
            s.sendall((head + 'Content-Length: %d\\r\\n\\r\\n' % len(body)).encode() + body)
            while len(data) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError as e:
            data += (' (%s)' % e).encode()
        finally:
            s.close()
        return data.decode(errors='replace')
    def main(a):
        return {'%s:%d' % tuple(t): knock(*t) for t in a['targets']}
    """)


def secret_action(marker: str) -> str:
    """Bob's action: what it answers is what an attacker who reached it would see."""
    return f"def main(args):\n    return {{'secret': {marker!r}}}\n"


@pytest.fixture(params=["netns-none", "netns-bridge", "host"])
async def net_backend(
    request: pytest.FixtureRequest, engine_host: str, svc: Any, bridge_network: str
) -> AsyncIterator[tuple[DockerBackend, bool]]:
    """(a backend, whether its containers are *expected* to reach each other and the host's
    loopback): netns with no network, netns on a bridge network, and the host's network."""
    if request.param == "netns-none":
        b = isolated(engine_host, svc.container_label)
    elif request.param == "netns-bridge":
        b = isolated(engine_host, svc.container_label, network=bridge_network)
    else:
        b = new_backend(engine_host, svc.container_label, reach="host")
    await b.start()
    yield b, request.param == "host"
    await b.close()


async def container(b: DockerBackend, code: str, memory_mb: int = 256) -> Any:
    name = f"{b.name_prefix}_{uuid.uuid4().hex[:6]}_guest_x"
    c = await b.create(ContainerSpec(name, "python:3.11", memory_mb))
    assert (await c.init(init_body(code), 30)).status == 200
    return c


async def test_an_action_cannot_reach_another_containers_runtime(
    net_backend: tuple[DockerBackend, bool], engine: Engine
) -> None:
    """Alice's action POSTs /run to Bob's runtime wherever it can be found: the address the
    invoker uses and Bob's address on the network; it never gets Bob's answer."""
    b, expected = net_backend
    marker = f"bob-{uuid.uuid4().hex}"
    bob = await container(b, secret_action(marker))
    assert result(await run(bob)) == {"secret": marker}  # the invoker reaches it
    targets = [list(bob.address)]
    networks = (await engine.inspect(bob.id))["NetworkSettings"]["Networks"] or {}
    targets += [[n["IPAddress"], 8080] for n in networks.values() if n.get("IPAddress")]
    alice = await container(b, KNOCK)
    answers = result(await run(alice, {"targets": targets}))
    reached = [t for t, answer in answers.items() if marker in answer]
    assert bool(reached) == expected, answers


async def test_an_action_cannot_reach_the_hosts_loopback(
    net_backend: tuple[DockerBackend, bool],
) -> None:
    """A service of the host on 127.0.0.1 (as Kafka, CouchDB, the API and the admin port
    are): the action's connection never arrives."""
    b, expected = net_backend
    arrived: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        arrived.append("connection")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nhost-ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        alice = await container(b, KNOCK)
        answers = result(await run(alice, {"targets": [["127.0.0.1", port]]}))
        assert ("host-ok" in answers[f"127.0.0.1:{port}"]) == expected, answers
        assert bool(arrived) == expected
    finally:
        server.close()


async def test_a_bridge_that_lets_containers_reach_each_other_is_warned_about(
    engine_host: str, svc: Any, bridge_network: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Inter-container traffic on (Docker's default for a bridge): the official images'
    runtimes listen on every interface there, so the operator is told once."""
    b = isolated(engine_host, svc.container_label, network=bridge_network)
    with caplog.at_level(logging.WARNING, logger="containers.docker.backend"):
        await b.start()
        await b.start()
    await b.close()
    warned = [r for r in caplog.records if "reach each other's ports" in r.getMessage()]
    assert len(warned) == 1 and bridge_network in warned[0].getMessage()


FORK_BOMB = py("""
    import os, time
    def main(a):
        pids, error = [], None
        try:
            for _ in range(a['n']):
                pid = os.fork()
                if pid == 0:
                    time.sleep(60)
                    os._exit(0)
                pids.append(pid)
        except OSError as e:
            error = e.errno
        for pid in pids:
            os.kill(pid, 9)
        for pid in pids:
            os.waitpid(pid, 0)
        return {'forked': len(pids), 'errno': error}
    """)


async def test_forks_past_the_pids_limit_are_refused(engine_host: str, svc: Any) -> None:
    """The pids limit is configurable (stock 1024, seen in test_docker_backend); at 64, a
    fork bomb of 200 is stopped below 64 processes with EAGAIN."""
    b = isolated(engine_host, svc.container_label, pids_limit=64)
    await b.start()
    try:
        c = await container(b, FORK_BOMB)
        got = result(await run(c, {"n": 200}))
        assert got["errno"] == errno.EAGAIN and got["forked"] < 64, got
        assert result(await run(c, {"n": 10})) == {"forked": 10, "errno": None}  # all freed
    finally:
        await b.close()


SHM_FILL = py("""
    import os
    def main(a):
        written, error = 0, None
        if a.get('mb'):
            try:
                with open('/dev/shm/fill', 'wb') as f:
                    for _ in range(a['mb']):
                        f.write(b'x' * (1 << 20))
                        f.flush()
                        written += 1
            except OSError as e:
                error = e.errno
        st = os.statvfs('/dev/shm')
        return {'written_mb': written, 'errno': error, 'listing': sorted(os.listdir('/dev/shm')),
                'size_mb': st.f_blocks * st.f_frsize >> 20}
    """)


@pytest.mark.parametrize("shm_mb", [None, 8])
async def test_dev_shm_is_private_and_size_limited(
    engine_host: str, svc: Any, shm_mb: int | None
) -> None:
    """/dev/shm is the container's own tmpfs of 64 MB (Docker's default) or the configured
    size: writing more fails with ENOSPC, and another container never sees the file."""
    kw: dict[str, Any] = {} if shm_mb is None else {"shm_size_mb": shm_mb}
    size = shm_mb or 64
    b = isolated(engine_host, svc.container_label, **kw)
    await b.start()
    try:
        c = await container(b, SHM_FILL, memory_mb=256)
        got = result(await run(c, {"mb": size + 16}))
        assert got["size_mb"] == size and got["listing"] == ["fill"], got
        assert got["errno"] == errno.ENOSPC and got["written_mb"] <= size, got
        other = await container(b, SHM_FILL)
        assert result(await run(other))["listing"] == []
    finally:
        await b.close()


LINGER = py("""
    import subprocess
    def main(a):
        p = subprocess.Popen(['sh', '-c', 'while :; do sleep 1; done', a['marker']],
                             start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return {'pid': p.pid}
    """)


def host_pids_with(marker: str) -> list[int]:
    """Pids of this host whose command line names ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def test_removing_a_container_ends_what_it_setsid_ed(engine_host: str, svc: Any) -> None:
    """A process the action started in a session of its own is gone once the container is."""
    b = isolated(engine_host, svc.container_label)
    await b.start()
    try:
        c = await container(b, LINGER)
        marker = f"linger-{uuid.uuid4().hex}"
        assert (await run(c, {"marker": marker})).status == 200
        for _ in range(50):
            if host_pids_with(marker):
                break
            await asyncio.sleep(0.1)
        assert host_pids_with(marker), "the lingering process did not start"
        await c.destroy()
        for _ in range(50):
            if not host_pids_with(marker):
                break
            await asyncio.sleep(0.1)
        assert host_pids_with(marker) == []
    finally:
        await b.close()


PRIVILEGES = py("""
    import ctypes, os
    CLONE_NEWUSER = 0x10000000
    KEYCTL, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING = 250, 0, -3  # x86_64
    libc = ctypes.CDLL(None, use_errno=True)
    def main(a):
        status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
        keyctl = libc.syscall(KEYCTL, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)
        keyctl_errno = ctypes.get_errno() if keyctl < 0 else 0
        pid = os.fork()
        if pid == 0:  # single-threaded, as unshare(CLONE_NEWUSER) wants
            os._exit(0 if libc.unshare(CLONE_NEWUSER) == 0 else ctypes.get_errno())
        _, code = os.waitpid(pid, 0)
        return {'no_new_privs': status['NoNewPrivs'].strip(),
                'seccomp': status['Seccomp'].strip(),
                'keyctl_errno': keyctl_errno,
                'unshare_user_errno': os.WEXITSTATUS(code)}
    """)


async def test_no_new_privileges_and_the_default_seccomp_profile(
    engine_host: str, svc: Any
) -> None:
    """no_new_privs is set and the engine's default seccomp filter is in force; Docker's
    refuses keyctl (which works without a filter: checked with ``seccomp=unconfined``) and a
    new user namespace. Podman's default profile allows both: there, only the mode shows."""
    b = isolated(engine_host, svc.container_label)
    await b.start()
    try:
        c = await container(b, PRIVILEGES)
        got = result(await run(c))
        assert (got["no_new_privs"], got["seccomp"]) == ("1", "2"), got
        if svc.engine == "docker":
            assert got["keyctl_errno"] == got["unshare_user_errno"] == errno.EPERM, got
        echo = await container(b, ECHO_PY)  # and the runtime still works as usual
        assert result(await run(echo, {"name": "x"})) == {"greeting": "Hello x"}
    finally:
        await b.close()


# -- the namespace dialer itself (no engine) ----------------------------------------------------


async def test_a_socket_made_in_another_network_namespace_stays_there() -> None:
    """A socket from the dialer of this process's namespace reaches a server on 127.0.0.1;
    one made in a fresh namespace (``unshare -n``) cannot, though it connects from the same
    event loop: the socket belongs to where it was made."""
    served: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(await reader.read(10))
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    home = NetnsDialer(os.open("/proc/self/ns/net", os.O_RDONLY))
    other = await asyncio.create_subprocess_exec("unshare", "-n", "sleep", "60")
    try:
        sock = await home()
        await loop.sock_connect(sock, ("127.0.0.1", port))
        await loop.sock_sendall(sock, b"hello")
        sock.close()
        for _ in range(50):
            if served:
                break
            await asyncio.sleep(0.02)
        assert served == [b"hello"]
        for _ in range(50):  # until unshare has exec'd sleep in its new namespace
            if os.readlink(f"/proc/{other.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                break
            await asyncio.sleep(0.02)
        away = NetnsDialer(os.open(f"/proc/{other.pid}/ns/net", os.O_RDONLY))
        sock = await away()
        with pytest.raises(OSError):  # no 127.0.0.1 there (its lo is down), no server either
            await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", port)), 2)
        sock.close()
        away.close()
        with pytest.raises(NetnsError):
            await away()
    finally:
        home.close()
        other.kill()
        await other.wait()
        server.close()


def test_a_pid_outside_the_container_is_refused() -> None:
    """The namespace of a pid whose cgroup does not name the container is not taken (a
    container's init that died and whose pid went to another process)."""
    info = {"State": {"Running": True, "Pid": os.getpid()}}
    with pytest.raises(NetnsError) as err:
        open_netns("0" * 64, info)
    assert err.value.errno == errno.ESRCH
    with pytest.raises(NetnsError):
        open_netns("0" * 64, {"State": {"Running": False, "Pid": 0}})


def test_netns_needs_a_local_engine_and_cap_sys_admin() -> None:
    """Where ``reach="netns"`` cannot work, start() says so before any container exists."""
    assert is_local_engine("unix:///run/docker.sock") and not is_local_engine("tcp://h:2376")
    assert can_enter_namespaces("CapEff:\t000001ffffffffff\n")
    assert not can_enter_namespaces("CapEff:\t00000000a80425fb\n")  # Docker's default set
    remote = DockerBackend("tcp://192.0.2.1:2376", "wsk0")
    with pytest.raises(ContainerError, match='use reach="address"'):
        asyncio.run(remote.start())
