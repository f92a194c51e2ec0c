"""What a sandboxed action reaches through slirp4netns besides the internet: not the node's
own addresses (a server on the host's side of a veth the test makes), not link-local (cloud
metadata), not the operator's deny list unless the allow list says so.

Without the routes the sandbox adds, each of these connections succeeds: slirp4netns
connects from the host's network namespace wherever the action asks."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from containers.backend import BackendContext
from containers.process.backend import ProcessBackend, ProcessContainer
from containers.process.settings import ProcessSettings
from containers.registry import make_backend
from invoker import config as invoker_config
from ow_invoker.cli import build_parser
from tests.integration.containers.backends import (
    Maker,
    new_prefix,
    result,
    run,
    state_dir,  # noqa: F401  (a fixture)
)
from tests.integration.containers.runtimes.netns import server_in_namespace
from tests.integration.containers.runtimes.test_sandbox import (  # noqa: F401  (fixtures)
    OUTBOUND_PY,
    backend,
    make,
    outside_server,
)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs root")
REFUSED = "Permission denied"  # connect() on a "prohibit" route: EACCES, at once


async def reach(c: ProcessContainer, host: str, port: int) -> dict[str, Any]:
    """What OUTBOUND_PY in ``c`` answers, or the error it died of."""
    r = await run(c, {"host": host, "port": port})
    return result(r) if r.status == 200 else {"error": r.body.decode()}


@contextlib.asynccontextmanager
async def server_at(host: str) -> AsyncIterator[int]:
    """A server in this (the host's) network namespace on ``host``: the node's service."""

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(b"node: " + await r.read(100))
        await w.drain()
        w.close()

    server = await asyncio.start_server(answer, host, 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


@pytest.fixture
def link_local_server() -> Iterator[tuple[str, int]]:
    """A server at 169.254.198.2 on a host of its own, the host's end of the link at
    169.254.198.1/30: a metadata service. Not 169.254.169.254, which a /30 on the host would
    take from a real one."""
    with server_in_namespace("169.254.198.1", "169.254.198.2", 30, 80, b"metadata: ") as at:
        yield at


@needs_root
async def test_the_nodes_own_addresses_are_refused_the_outside_is_not(
    make: Maker,  # noqa: F811
    request: pytest.FixtureRequest,
) -> None:
    """The node's address 198.18.0.1 (the host's side of the veth) appears after one
    container was built (a warm one, or a spare built ahead of demand): its shim adds the
    route when the kernel announces the address; a container built later reads it."""
    before = await make(OUTBOUND_PY)
    host, port = request.getfixturevalue("outside_server")
    async with server_at("198.18.0.1") as node_port:
        after = await make(OUTBOUND_PY)
        for c in (before, after):
            assert await reach(c, host, port) == {"reply": "from outside: hello"}
            r = await reach(c, "198.18.0.1", node_port)
            assert "reply" not in r and REFUSED in r["error"], r


@needs_root
async def test_link_local_is_refused(
    make: Maker,  # noqa: F811
    link_local_server: tuple[str, int],
) -> None:
    r = await reach(await make(OUTBOUND_PY), *link_local_server)
    assert "reply" not in r and REFUSED in r["error"], r


@needs_root
async def test_the_deny_list_refuses_and_the_allow_list_lets_through_again(
    state_dir: Path,  # noqa: F811
    outside_server: tuple[str, int],  # noqa: F811
) -> None:
    for allow, reachable in (((), False), (("198.18.0.2/32",), True)):
        b = ProcessBackend(
            state_dir / f"deny{len(allow)}",
            new_prefix(),
            network_deny=("198.18.0.0/15",),
            network_allow=allow,
        )
        await b.start()
        try:
            r = await reach(await Maker(b)(OUTBOUND_PY), *outside_server)
            if reachable:
                assert r == {"reply": "from outside: hello"}
            else:
                assert "reply" not in r and REFUSED in r["error"], r
        finally:
            await b.close()


def test_the_lists_are_settings_checked_and_passed_to_the_process_backend(tmp_path: Path) -> None:
    def load(*argv: str) -> invoker_config.InvokerConfig:
        return invoker_config.load(build_parser().parse_args(["run", *argv]), {})

    cfg = invoker_config.load(
        build_parser().parse_args(["run", "--action-network-deny", "10.0.0.0/8,172.16.0.0/12"]),
        {"OW_INVOKER_ACTION_NETWORK_ALLOW": "10.1.2.0/24"},
    )
    assert cfg.process.action_network_deny == ("10.0.0.0/8", "172.16.0.0/12")
    assert cfg.process.action_network_allow == ("10.1.2.0/24",)
    with pytest.raises(ValueError, match=r"not a\.b\.c\.d/n"):
        load("--action-network-deny", "10.0.0.0/33")
    with pytest.raises(ValueError, match="DOCKER-USER"):
        load("--backend", "docker", "--action-network-allow", "10.1.2.0/24")
    settings = ProcessSettings(
        action_network_deny=("10.1.2.3/8",), action_network_allow=("10.1.2.3",)
    )
    b = make_backend("process", settings, BackendContext(tmp_path, "wsk0"))
    assert isinstance(b, ProcessBackend)
    assert (b.network_deny, b.network_allow) == (("10.0.0.0/8",), ("10.1.2.3/32",))
