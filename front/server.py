"""Running the front: the controller side of the bus plus the REST API on one port."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from front.api import Api
from front.config import HTTP_FIELDS, SETTINGS, FrontConfig
from front.controller import Controller
from front.entities import Limits
from front.identities import SYSTEM, Identities
from whisk.bus import Bus
from whisk.clock import Clock
from whisk.manifest import Manifest
from whisk.store import Store

log = logging.getLogger(__name__)


def add_front_arguments(parser: argparse.ArgumentParser) -> None:
    """The API's own flags (:data:`front.config.HTTP_FIELDS`), for a parser of its own."""
    skip = [k for k in SETTINGS.keys if k not in HTTP_FIELDS]
    SETTINGS.add_arguments(parser, skip=skip, config_file=False)


def front_options(cfg: FrontConfig | argparse.Namespace) -> dict[str, Any]:
    """``start_front`` keyword arguments from the API options (of a Namespace: its flags
    alone, the defaults filling the rest)."""
    if isinstance(cfg, argparse.Namespace):
        cfg = SETTINGS.load(cfg, environ={})
    return {
        "host": cfg.host,
        "port": cfg.port,
        "identities": Identities.parse(list(cfg.auth)),
        "limits": Limits(
            max_timeout_ms=cfg.max_timeout_ms,
            max_memory_mb=cfg.max_memory_mb,
            max_concurrency=cfg.max_concurrency,
        ),
        "blocking_wait_s": cfg.blocking_wait_s,
    }


@dataclass
class Front:
    controller: Controller
    api: Api
    runner: web.AppRunner
    host: str
    port: int
    url: str = ""

    async def listen(self) -> str:
        """Open the API port; returns the API's URL."""
        await web.TCPSite(self.runner, self.host, self.port).start()
        bound = self.runner.addresses[0][1] if self.runner.addresses else self.port
        self.url = f"http://{self.host}:{bound}"
        return self.url

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.controller.stop()


async def start_front(
    *,
    bus: Bus,
    store: Store,
    clock: Clock,
    host: str,
    port: int,
    whisks_db: str,
    activations_db: str,
    topic_prefix: str = "",
    controller_id: str = "0",
    identities: Identities | None = None,
    manifest: Manifest | None = None,
    limits: Limits | None = None,
    blocking_wait_s: float = 60.0,
    listen: bool = True,
) -> Front:
    """The controller side and the API; ``listen=False`` leaves the port closed until
    :meth:`Front.listen` (the embedded mode opens it once its invoker is healthy)."""
    manifest = manifest or Manifest()
    identities = identities or Identities.defaults()
    controller = Controller(
        bus,
        store,
        clock,
        controller_id=controller_id,
        topic_prefix=topic_prefix,
        whisks_db=whisks_db,
        activations_db=activations_db,
        system_identity=next(
            (i for i in identities.by_key.values() if i.namespace == "whisk.system"), SYSTEM
        ),
    )
    await controller.start()
    api = Api(
        controller,
        store,
        identities,
        set(manifest.runtimes),
        manifest.defaults,
        limits or Limits(),
        blocking_wait_s,
    )
    runner = web.AppRunner(api.app(), access_log=None)
    await runner.setup()
    front = Front(controller, api, runner, host, port)
    if listen:
        await front.listen()
    return front
