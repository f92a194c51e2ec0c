"""A server on a host of its own: a network namespace the test makes, joined to the host by
a veth pair. The namespace belongs to the server process (``unshare --net``), so it goes,
veth and all, when the server does; the host's end is deleted too. Nothing is left on the
host, and traffic stays on addresses the test chose."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

IP = shutil.which("ip")
_veths = itertools.count()


@contextmanager
def server_in_namespace(
    host_ip: str, ns_ip: str, prefix_len: int, port: int, greeting: bytes
) -> Iterator[tuple[str, int]]:
    """Yields (``ns_ip``, ``port``): a server there answers each connection with
    ``greeting`` and what it was sent; ``host_ip`` is the host's end of the link."""
    if IP is None or shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("iproute2 and util-linux are needed")
    veth = f"owns{os.getpid() % 100000}v{next(_veths)}"
    code = (
        "import socket, sys\n"
        "print('in', flush=True)\n"  # unshare has made the namespace
        "sys.stdin.readline()\n"  # the host has configured the link
        f"s = socket.create_server(({ns_ip!r}, {port}))\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    c, _ = s.accept()\n"
        f"    c.sendall({greeting!r} + c.recv(100))\n"
        "    c.close()\n"
    )
    server = subprocess.Popen(
        ["unshare", "--net", "--", sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    inside = ["nsenter", "-t", str(server.pid), "-n", IP]
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == b"in"
        for cmd in (
            [IP, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns",
             str(server.pid)],
            [IP, "addr", "add", f"{host_ip}/{prefix_len}", "dev", veth],
            [IP, "link", "set", veth, "up"],
            [*inside, "addr", "add", f"{ns_ip}/{prefix_len}", "dev", "eth0"],
            [*inside, "link", "set", "eth0", "up"],
            [*inside, "link", "set", "lo", "up"],
        ):  # fmt: skip
            subprocess.run(cmd, check=True, capture_output=True)
        assert server.stdin is not None
        server.stdin.write(b"go\n")
        server.stdin.flush()
        assert server.stdout.readline().strip() == b"ready"
        yield ns_ip, port
    finally:
        server.kill()
        server.wait()
        subprocess.run([IP, "link", "del", veth], capture_output=True)
