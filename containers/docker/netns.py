"""Reaching a runtime inside its container's own network namespace (``reach="netns"``).

Why: a runtime port on the host's loopback (host networking, or a published port) is a
port every other container in the host's network can open, and host networking also hands
the action every loopback service of the host (Kafka, CouchDB, the API, the admin port).
With ``reach="netns"`` the container keeps a network namespace of its own (``NetworkMode
none``, or a network for outbound traffic) and the runtime listens on *its* loopback; the
invoker creates each connection's socket inside that namespace and connects it to
``127.0.0.1:8080`` there. A socket stays in the namespace it was created in, so only the
creation needs ``setns``; the connected socket is then handed to asyncio as any other.

``setns`` changes the calling thread's namespace only, so it runs in a short-lived thread
of its own that exits right after: the event loop's thread, and the threads of any pool,
never leave the invoker's namespace, even if something fails half way. It needs
``CAP_SYS_ADMIN`` (an invoker running as root) and an engine on this host (the namespace is
opened from its init's ``/proc/<pid>/ns/net``).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import errno
import os
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CLONE_NEWNET = 0x40000000  # <sched.h>; os.setns exists only from Python 3.12
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class NetnsError(OSError):
    """The container's network namespace cannot be opened or entered."""


def setns_net(fd: int) -> None:
    """Move the calling thread into the network namespace open on ``fd``."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NetnsError(err, f"setns into a network namespace: {os.strerror(err)}")


CAP_SYS_ADMIN = 21


def can_enter_namespaces(status: str | None = None) -> bool:
    """Whether this process holds CAP_SYS_ADMIN (``setns`` needs it), from the effective
    set in ``/proc/self/status`` (or the ``status`` text given)."""
    if status is None:
        try:
            status = Path("/proc/self/status").read_text()
        except OSError:
            return False
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


def is_local_engine(url: str | None) -> bool:
    """Whether an engine address is on this host (a unix socket, or unset: the default
    socket), so that its containers' pids are ours to open."""
    address = url if url is not None else os.environ.get("DOCKER_HOST", "")
    return not address or address.startswith(("unix://", "/"))


def open_netns(cid: str, info: Mapping[str, Any]) -> int:
    """An fd on the network namespace of the running container ``cid`` whose inspect is
    ``info``: its init's ``/proc/<pid>/ns/net``, checked after the open to be in the
    container's cgroup (a pid reused before the open fails that check). Not the sandbox
    file (``SandboxKey``): once the container stops, that path can be a plain file."""
    state = info.get("State") or {}
    pid = int(state.get("Pid") or 0)
    if not state.get("Running") or pid <= 0:
        raise NetnsError(errno.ESRCH, f"container {cid[:12]} is not running")
    try:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        # No /proc/<pid> any more: it exited since the inspect, as ESRCH says.
        code = errno.ESRCH if e.errno == errno.ENOENT else e.errno
        raise NetnsError(code, f"opening /proc/{pid}/ns/net: {e}") from e
    try:
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        cgroups = ""
    if cid not in cgroups:
        os.close(fd)
        raise NetnsError(errno.ESRCH, f"pid {pid} is no longer container {cid[:12]}'s init")
    return fd


def _settle(fut: asyncio.Future[socket.socket], sock: socket.socket | None, exc: Any) -> None:
    if fut.done():  # the caller gave up meanwhile
        if sock is not None:
            sock.close()
    elif exc is not None:
        fut.set_exception(exc)
    else:
        assert sock is not None
        fut.set_result(sock)


async def socket_in(fd: int) -> socket.socket:
    """A non-blocking, unconnected TCP socket created in the network namespace on ``fd``
    (from a thread of its own that exits right after; see the module docstring)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[socket.socket] = loop.create_future()

    own = os.dup(fd)  # the thread's own: a close of ``fd`` meanwhile cannot retarget it

    def work() -> None:
        sock: socket.socket | None = None
        error: BaseException | None = None
        try:
            setns_net(own)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
        except BaseException as e:  # handed to the caller
            error = e
        finally:
            os.close(own)
        try:
            loop.call_soon_threadsafe(_settle, fut, sock, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            if sock is not None:
                sock.close()

    threading.Thread(target=work, name="netns-socket", daemon=True).start()
    return await fut


class NetnsDialer:
    """Makes sockets in one container's network namespace; holds the namespace open (so a
    dead init cannot hand its pid to someone else's namespace) until :meth:`close`.
    ``fd`` None: the container had no namespace to open (it exited at once); every socket
    is then refused, as a connect to a dead runtime would be."""

    def __init__(self, fd: int | None, why: str = "closed") -> None:
        self._fd = fd
        self._why = why

    async def __call__(self) -> socket.socket:
        if self._fd is None:
            raise NetnsError(errno.ECONNREFUSED, f"no network namespace: {self._why}")
        return await socket_in(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._why = "the container was destroyed"
            os.close(fd)
