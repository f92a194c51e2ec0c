"""Running the front: the controller side of the bus plus the REST API on one port."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from front.api import Api
from front.config import HTTP_FIELDS, SETTINGS, FrontConfig
from front.console import NodeView, Operator, mount_console
from front.controller import Controller
from front.entities import Limits
from front.fpc import SchedulerDirectory
from front.identities import SYSTEM, Identities, read_auth_file
from front.system import seed_system_packages
from whisk.bus import Bus
from whisk.clock import Clock
from whisk.etcd import EtcdClient
from whisk.manifest import Manifest
from whisk.store import Store, StoreError
from whisk.store.records import RecordWriter

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
        "identities": Identities.parse(
            [*(read_auth_file(cfg.auth_file) if cfg.auth_file else ()), *cfg.auth]
        ),
        "limits": Limits(
            max_timeout_ms=cfg.max_timeout_ms,
            max_memory_mb=cfg.max_memory_mb,
            max_concurrency=cfg.max_concurrency,
        ),
        "blocking_wait_s": cfg.blocking_wait_s,
        "sequence_max_length": cfg.sequence_max_length,
        "state_dir": cfg.state_dir,
    }


@dataclass
class Front:
    controller: Controller
    api: Api
    records: RecordWriter
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
        await self.records.close()
        await self.controller.stop()
        if self.controller.schedulers is not None:
            await self.controller.schedulers.etcd.close()


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
    sequence_max_length: int = 50,
    state_dir: str | Path = ".state/front",
    listen: bool = True,
    node_view: NodeView | None = None,
    operator: Operator | None = None,
    subjects_db: str | None = None,
    etcd_hosts: str | None = None,
    cluster_name: str = "whisk",
) -> Front:
    """The controller side and the API; ``listen=False`` leaves the port closed until
    :meth:`Front.listen` (the embedded mode opens it once its invoker is healthy). The
    records of sequences and trigger fires wait under ``state_dir`` while the database is
    away. ``node_view``: the in-process invoker's scheduler snapshot, for the console, whose
    every namespace only ``operator`` credentials see. ``subjects_db``: the users
    ``ow-invoker admin user create`` writes there are accepted too, within a second.
    ``etcd_hosts``: the scheduler mode (FPCPoolBalancer), whose schedulers and invokers
    register under ``cluster_name`` in that etcd; None: the sharding mode."""
    manifest = manifest or Manifest()
    identities = identities or Identities.defaults()
    schedulers = None
    if etcd_hosts is not None:
        schedulers = SchedulerDirectory(EtcdClient(etcd_hosts), cluster_name)
    controller = Controller(
        bus,
        store,
        clock,
        controller_id=controller_id,
        topic_prefix=topic_prefix,
        whisks_db=whisks_db,
        activations_db=activations_db,
        system_identity=identities.owner("whisk.system") or SYSTEM,
        schedulers=schedulers,
    )
    await controller.start()
    if subjects_db is not None:
        try:
            await identities.refresh(store, subjects_db)
        except StoreError as e:  # kept trying every second
            log.warning("cannot read the subjects database %s yet: %s", subjects_db, e)
        controller.supervisor.start(
            "identities", lambda: identities.keep_fresh(store, subjects_db), critical=False
        )
    await seed_system_packages(store, whisks_db, manifest.defaults, clock.epoch_ms())
    records = RecordWriter(
        store, activations_db, Path(state_dir) / "front", clock, supervisor=controller.supervisor
    )
    await records.start()
    api = Api(
        controller,
        store,
        identities,
        manifest,
        records,
        controller.supervisor,
        limits or Limits(),
        blocking_wait_s,
        sequence_max_length,
    )
    app = api.app()
    mount_console(
        app,
        identities=identities,
        kinds=manifest.runtimes,
        node_view=node_view,
        operator=operator,
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    front = Front(controller, api, records, runner, host, port)
    if listen:
        await front.listen()
    return front
