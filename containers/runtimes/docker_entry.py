"""Entrypoint of the local runtime images (``scripts/runtime-images.sh``) for the Docker backend.

The official ``openwhisk/action-*`` images listen on port 8080 of the container's network
interface; the project's runtimes listen on 127.0.0.1 (they were written for the process
backend), which a published port cannot reach. This wrapper binds ``0.0.0.0:8080`` and hands
the socket to the runtime as ``--listen-fd 3``, its documented way to serve an inherited socket.
With host networking the backend gives each container its own loopback address instead, in
``__OW_RUNTIME_LISTEN=127.0.0.1:<port>`` (removed from the environment the action sees):

    docker_entry.py python   the python runtime's ``serve`` mode, in this interpreter
    docker_entry.py node     exec ``node node_runtime.js --listen-fd 3``

Output goes to the container's stdout/stderr (the engine's log), sentinels included.
Stdlib only; run as ``python3 -I -B docker_entry.py ...`` so nothing of the image's
environment is imported by accident.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = 8080
LISTEN_FD = 3
LISTEN_ENV = "__OW_RUNTIME_LISTEN"


def address() -> tuple[str, int]:
    """``0.0.0.0:8080``, or the ``host:port`` the backend named in ``__OW_RUNTIME_LISTEN``."""
    value = os.environ.pop(LISTEN_ENV, "")
    if not value:
        return "0.0.0.0", PORT
    host, _, port = value.rpartition(":")
    return host or "127.0.0.1", int(port)


def listen() -> None:
    """Bind the runtime's socket and put it on fd 3 (inheritable, for exec)."""
    fd = socket.create_server(address(), backlog=64).detach()
    if fd != LISTEN_FD:
        os.dup2(fd, LISTEN_FD)
        os.close(fd)
    os.set_inheritable(LISTEN_FD, True)


def run_python() -> int:
    path = os.path.join(HERE, "python_runtime.py")
    spec = importlib.util.spec_from_file_location("python_runtime", path)
    assert spec is not None and spec.loader is not None
    runtime = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runtime)
    sys.argv = [path]
    return int(runtime.main(["serve", "--listen-fd", str(LISTEN_FD)]))


def run_node() -> int:
    node = shutil.which("node") or "/usr/bin/node"
    script = os.path.join(HERE, "node_runtime.js")
    os.execv(node, [node, script, "--listen-fd", str(LISTEN_FD)])
    return 127  # not reached


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("python", "node"):
        print("usage: docker_entry.py python|node", file=sys.stderr)
        return 2
    listen()
    return run_python() if argv[0] == "python" else run_node()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
