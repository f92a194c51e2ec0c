"""The console's routes (front/console) over real HTTP: the page and its code, no key handed
to anyone, the scheduler view behind an API key (a user's namespace only; every namespace for
the operator), what a front without an invoker says (``ow-invoker front``), and the install
hint when Chart.js is missing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from front.console import mount_console, node_modules
from front.identities import GUEST_AUTH, Identities, basic_auth, identity
from front.server import start_front
from whisk.bus.memory import MemoryBus
from whisk.clock import SystemClock
from whisk.store.embedded import EmbeddedStore

GUEST = {"Authorization": basic_auth(GUEST_AUTH)}
ALICE_AUTH = "a11ce:secret"
OPERATOR = {"Authorization": basic_auth("invoker.user:s3cret")}


class View:
    """A node view that answers a fixed snapshot and remembers what was asked for."""

    def __init__(self) -> None:
        self.limits: list[int] = []
        self.namespaces: list[str | None] = []

    def __call__(self, limit: int, namespace: str | None) -> Mapping[str, Any]:
        self.limits.append(limit)
        self.namespaces.append(namespace)
        return {"policy": "fc", "queue": [], "cores": []}


async def serve(app: web.Application) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
def view() -> View:
    return View()


@pytest.fixture
async def url(view: View) -> AsyncIterator[str]:
    app = web.Application()
    identities = Identities.defaults()
    identities.by_key[ALICE_AUTH] = identity("alice", ALICE_AUTH)
    mount_console(
        app,
        identities=identities,
        kinds=["python:3.11"],
        node_view=view,
        operator=lambda header: header == OPERATOR["Authorization"],
    )
    async for base in serve(app):
        yield base


async def get(url: str, **kw: Any) -> tuple[int, str, Any]:
    async with aiohttp.ClientSession() as http, http.get(url, **kw) as r:
        text = await r.text()
        body = await r.json(content_type=None) if r.content_type == "application/json" else text
        return r.status, r.content_type, body


async def test_the_page_and_its_code(url: str):
    status, ctype, page = await get(url + "/console")
    assert status == 200 and ctype == "text/html" and "/console/static/console.js" in page
    assert (await get(url + "/console/"))[0] == 200
    for name in ("console.js", "api.js", "actions.js", "scheduler.js", "dom.js", "console.css"):
        assert (await get(f"{url}/console/static/{name}"))[0] == 200, name
    assert (await get(url + "/console/lib/anything.js"))[0] == 404


async def test_no_key_is_handed_out_not_even_to_this_machine(url: str):
    """Any process here (an action too) reaches 127.0.0.1: the config carries no key (the
    standalone prints ``/console#auth=...`` instead)."""
    status, _, config = await get(url + "/console/api/config")
    assert status == 200 and "auth" not in config
    assert config["kinds"] == ["python:3.11"] and config["scheduler"] is True
    assert GUEST_AUTH not in str(config) and ALICE_AUTH not in str(config)


async def test_the_scheduler_view_takes_an_api_key(url: str, view: View):
    status, _, body = await get(url + "/console/api/scheduler")
    assert status == 401 and "authentication" in body["error"]
    wrong = {"Authorization": basic_auth("nobody:nothing")}
    assert (await get(url + "/console/api/scheduler", headers=wrong))[0] == 401
    status, _, body = await get(url + "/console/api/scheduler?limit=7", headers=GUEST)
    assert status == 200 and body == {
        "available": True,
        "namespace": "guest",
        **{"policy": "fc", "queue": [], "cores": []},
    }
    assert view.limits == [7] and view.namespaces == ["guest"]
    status, _, body = await get(url + "/console/api/scheduler?limit=x", headers=GUEST)
    assert status == 400 and "limit" in body["error"]


async def test_each_user_sees_their_namespace_and_the_operator_every_one(url: str, view: View):
    alice = {"Authorization": basic_auth(ALICE_AUTH)}
    status, _, body = await get(url + "/console/api/scheduler", headers=alice)
    assert status == 200 and body["namespace"] == "alice"
    status, _, body = await get(url + "/console/api/scheduler", headers=OPERATOR)
    assert status == 200 and body["namespace"] is None
    assert view.namespaces == ["alice", None]
    wrong = {"Authorization": basic_auth("invoker.user:guess")}
    assert (await get(url + "/console/api/scheduler", headers=wrong))[0] == 401


async def test_without_chart_js_the_page_is_told_how_to_install_it(url, tmp_path, monkeypatch):
    monkeypatch.setenv("OW_CACHE_DIR", str(tmp_path))
    assert node_modules() == tmp_path / "console" / "node_modules"
    _, _, config = await get(url + "/console/api/config")
    assert config["charts"] is False and "scripts/install.sh console" in config["chartsHint"]
    status, ctype, body = await get(url + "/console/lib/chart.umd.min.js")
    assert status == 404 and ctype == "application/javascript"
    assert "scripts/install.sh console" in body


async def test_a_front_without_an_invoker_says_where_to_look(tmp_path: Path):
    """``ow-invoker front``: the console's actions work, the scheduler view is elsewhere."""
    store = EmbeddedStore(tmp_path / "db.sqlite3")
    front = await start_front(
        bus=MemoryBus(),
        store=store,
        clock=SystemClock(),
        host="127.0.0.1",
        port=0,
        whisks_db="whisks",
        activations_db="activations",
    )
    try:
        _, _, config = await get(front.url + "/console/api/config")
        assert config["scheduler"] is False and "auth" not in config
        status, _, body = await get(front.url + "/console/api/scheduler", headers=GUEST)
        assert status == 404 and body["available"] is False
        assert "GET /scheduler" in body["error"] and "admin port" in body["error"]
        assert (await get(front.url + "/console"))[0] == 200
    finally:
        await front.stop()
        await store.close()
