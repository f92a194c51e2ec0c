"""``ow-invoker standalone``: the whole platform in one process.

The controller-compatible front and one invoker, with embedded defaults: an in-process bus
instead of Kafka, an embedded SQLite store instead of CouchDB, process containers. Give
``--kafka`` and/or ``--couchdb-url`` to use real services instead.

One command line holds both configurations: the invoker's settings (``ow-invoker run``'s,
with ``--config`` and ``OW_INVOKER_<FIELD>``) and the front's API options (``--host``,
``--port``, ``--auth`` ..., also ``OW_FRONT_<FIELD>``); the bus and store settings both have
are the invoker's. A TOML file may hold ``[invoker]`` and ``[front]`` tables, or flat keys.

Users: the configured keys (default: the stock guest and whisk.system) and those
``ow-invoker admin user create --embedded`` writes into the store while it runs. Secrets stay
off the command line and out of other users' reach: the state directory is 0700 (0711 with
``--action-user``, which must reach its containers' directories inside), the store 0600, the
admin password random (``<state-dir>/admin.password``) unless one is configured.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Mapping
from functools import partial
from pathlib import Path

from front import config as front_config
from invoker import config as configuration
from whisk import logs
from whisk.bus import Bus
from whisk.private import private_dir
from whisk.store import Store

HELP = "run front + invoker in one process (embedded bus and store) on 127.0.0.1:3233"
log = logging.getLogger("standalone")


def _front_skip() -> list[str]:
    """The front's settings that are not its API options: the invoker's own serve here."""
    return [k for k in front_config.SETTINGS.keys if k not in front_config.HTTP_FIELDS]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    front_config.add_arguments(parser, skip=_front_skip(), config_file=False)
    parser.add_argument("--ready-file", help="write the API URL here once ready")
    configuration.add_arguments(parser)


def load(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> tuple[front_config.FrontConfig, configuration.InvokerConfig]:
    """Both configurations from one command line; a flat file's keys may be either's."""
    front_keys, invoker_keys = front_config.SETTINGS.keys, configuration.SETTINGS.keys
    cfg = configuration.load(
        args, environ, defaults=_standalone_defaults(), tolerate=front_keys - invoker_keys
    )
    shared = {k: getattr(cfg, k) for k in front_keys & invoker_keys}
    # Its one invoker is reached directly: no scheduler runs here, whatever the environment.
    shared["load_balancer"] = front_config.BALANCERS[0]
    front = front_config.load(args, environ, tolerate=invoker_keys - front_keys, **shared)
    return front, cfg


async def serve(
    args: argparse.Namespace,
    front_cfg: front_config.FrontConfig,
    cfg: configuration.InvokerConfig,
) -> None:
    from front.identities import GUEST_AUTH
    from front.server import front_options, start_front
    from invoker import nodeview
    from invoker.admin_http import admin_credentials, authorized, serve_admin
    from invoker.commands.admin import subjects_db
    from invoker.compose import build_invoker, runtime_manifest
    from whisk.clock import SystemClock
    from whisk.lifecycle import NodeFailed, wait_for_signal_or
    from whisk.supervisor import first_failure

    clock = SystemClock()
    state = private_dir(cfg.state_dir, 0o711 if cfg.process.action_user else 0o700)
    bus: Bus
    store: Store
    if args.kafka:
        from whisk.bus.kafka import KafkaBus

        bus = KafkaBus(cfg.kafka, cfg.kafka_replication_factor, cfg.kafka_security)
        await bus.wait_ready()
    else:
        from whisk.bus.memory import MemoryBus

        bus = MemoryBus()
    if args.couchdb_url:
        from whisk.store.couch import CouchStore

        store = CouchStore(cfg.couchdb_url, cfg.couchdb_user, cfg.couchdb_password)
        await store.wait_ready()
    else:
        from whisk.store.embedded import EmbeddedStore

        store = EmbeddedStore(state / "openwhisk.sqlite3")
    manifest = runtime_manifest(cfg)
    options = front_options(front_cfg)
    # Built (not started) before the front, whose console shows its scheduler.
    invoker = build_invoker(cfg, bus=bus, store=store, clock=clock, manifest=manifest)
    admin_user, admin_password = admin_credentials(cfg)
    front = await start_front(
        bus=bus,
        store=store,
        clock=clock,
        whisks_db=cfg.whisks_db,
        activations_db=cfg.activations_db,
        topic_prefix=cfg.topic_prefix,
        manifest=manifest,
        listen=False,  # opened once the invoker is healthy: no 503 for an early caller
        node_view=partial(nodeview.scheduler, invoker),
        operator=lambda header: authorized(header, admin_user, admin_password),
        subjects_db=subjects_db(cfg),
        **options,
    )
    admin = None
    try:
        await invoker.start()
        if cfg.admin_port:
            admin = await serve_admin(invoker, cfg.admin_host, cfg.admin_port)
        await front.controller.wait_for_invokers(1, timeout_s=120)
        await front.listen()
        guest = next(
            (k for k, i in options["identities"].by_key.items() if i.namespace == "guest"),
            GUEST_AUTH,
        )
        print(
            f"OpenWhisk API ready at {front.url} (policy {cfg.policy}, "
            f"cores {list(cfg.action_cores)}, backend {invoker.backend.name})",
            flush=True,
        )
        print(f"  wsk property set --apihost {front.url} --auth {guest}", flush=True)
        # The key in the fragment: the browser keeps it, no server ever hands it out.
        print(f"  console: {front.url}/console#auth={guest}", flush=True)
        if args.ready_file:
            Path(args.ready_file).write_text(front.url)
        failure = await wait_for_signal_or(
            first_failure(invoker.supervisor, front.controller.supervisor)
        )
        if failure is not None:
            raise NodeFailed(failure)
    finally:
        if admin is not None:
            await admin.cleanup()
        await front.stop()
        await invoker.stop(deadline_s=10)
        await store.close()


def main(args: argparse.Namespace) -> int:
    front_cfg, cfg = load(args)
    logs.setup(cfg.log_level)
    from whisk.lifecycle import EXIT_FAILED, NodeFailed

    try:
        asyncio.run(serve(args, front_cfg, cfg))
    except TimeoutError:
        print("the invoker did not become healthy in time", file=sys.stderr)
        return 1
    except NodeFailed as e:
        print(f"failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _standalone_defaults() -> dict[str, object]:
    """Embedded-mode defaults that flags, environment or a config file still override."""
    return {"state_dir": ".state/standalone"}
