"""Running the front: the controller side of the bus plus the REST API on one port."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiohttp import web

from containers.manifest import Manifest
from front.api import Api
from front.controller import Controller
from front.entities import Limits
from front.identities import SYSTEM, Identities
from invoker.bus import Bus
from invoker.clock import Clock
from invoker.store import Store

log = logging.getLogger(__name__)


@dataclass
class Front:
    controller: Controller
    api: Api
    runner: web.AppRunner
    url: str

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
) -> Front:
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
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    return Front(controller, api, runner, f"http://{host}:{bound}")
