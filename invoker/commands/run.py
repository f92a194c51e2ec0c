"""``ow-invoker run``: join an OpenWhisk deployment as invoker N."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal

from invoker import config as configuration
from invoker import logs

HELP = "join an OpenWhisk deployment as invoker N (Kafka in, CouchDB records and acks out)"
log = logging.getLogger("invoker")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    configuration.add_arguments(parser)
    parser.add_argument(
        "--shutdown-deadline",
        type=float,
        default=30.0,
        help="seconds running calls get to finish on SIGTERM before they are handed back",
    )


async def wait_for_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def serve(cfg: configuration.InvokerConfig, shutdown_deadline: float = 30.0) -> None:
    from invoker.admin import serve_admin
    from invoker.bus.kafka import KafkaBus
    from invoker.clock import SystemClock
    from invoker.compose import build_invoker
    from invoker.store.couch import CouchStore

    bus = KafkaBus(cfg.kafka)
    store = CouchStore(cfg.couchdb_url, cfg.couchdb_user, cfg.couchdb_password)
    log.info("waiting for Kafka at %s and CouchDB at %s", cfg.kafka, cfg.couchdb_url)
    await bus.wait_ready()
    await store.wait_ready()
    for db in (cfg.whisks_db, cfg.activations_db):
        await store.ensure_db(db)
    invoker = build_invoker(cfg, bus=bus, store=store, clock=SystemClock())
    await invoker.start()
    admin = await serve_admin(invoker, cfg.admin_host, cfg.admin_port)
    log.info("admin HTTP on http://%s:%d", cfg.admin_host, cfg.admin_port)
    try:
        await wait_for_signal()
        log.info("stopping (deadline %.0fs)", shutdown_deadline)
    finally:
        await admin.cleanup()
        await invoker.stop(shutdown_deadline)
        await store.close()


def main(args: argparse.Namespace) -> int:
    cfg = configuration.load(args)
    logs.setup(cfg.log_level)
    asyncio.run(serve(cfg, args.shutdown_deadline))
    return 0
