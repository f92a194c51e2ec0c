"""Running the front: the controller side of the bus plus the REST API on one port."""

from __future__ import annotations

import argparse
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


def add_front_arguments(parser: argparse.ArgumentParser) -> None:
    """The API's own flags, shared by ``standalone`` and ``front``."""
    parser.add_argument("--host", default="127.0.0.1", help="API listen address")
    parser.add_argument("--port", type=int, default=3233, help="API port (0: any free port)")
    parser.add_argument(
        "--auth",
        action="append",
        default=[],
        help="NAMESPACE=UUID:KEY identity (repeatable; default: the stock guest keys)",
    )
    parser.add_argument(
        "--max-timeout-ms", type=int, default=600_000, help="largest action timeout the API accepts"
    )
    parser.add_argument(
        "--max-memory-mb", type=int, default=2048, help="largest action memory the API accepts"
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=1,
        help="largest action limits.concurrency the API accepts (stock default 1; e.g. 200 "
        "for wskdebug)",
    )
    parser.add_argument(
        "--blocking-wait-s",
        type=float,
        default=60.0,
        help="how long a blocking invoke waits before answering 202",
    )


def front_options(args: argparse.Namespace) -> dict[str, object]:
    """``start_front`` keyword arguments from those flags."""
    return {
        "host": args.host,
        "port": args.port,
        "identities": Identities.parse(args.auth),
        "limits": Limits(
            max_timeout_ms=args.max_timeout_ms,
            max_memory_mb=args.max_memory_mb,
            max_concurrency=args.max_concurrency,
        ),
        "blocking_wait_s": args.blocking_wait_s,
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
