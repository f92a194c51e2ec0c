"""``ow-invoker front``: the controller-compatible front alone, over Kafka and CouchDB, for
deployments with separate invokers (``ow-invoker run --id N``)."""

from __future__ import annotations

import argparse
import asyncio

from invoker import config as configuration
from invoker import logs

HELP = "run the controller-compatible REST front over Kafka and CouchDB (invokers separate)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="API listen address")
    parser.add_argument("--port", type=int, default=3233, help="API port")
    parser.add_argument("--controller-id", default="0", help="controller instance (completed<C>)")
    parser.add_argument(
        "--auth",
        action="append",
        default=[],
        help="NAMESPACE=UUID:KEY identity (repeatable; default: stock guest keys)",
    )
    parser.add_argument("--max-timeout-ms", type=int, default=600_000)
    parser.add_argument("--max-memory-mb", type=int, default=2048)
    configuration.add_arguments(parser)


async def serve(args: argparse.Namespace, cfg: configuration.InvokerConfig) -> None:
    from front.entities import Limits
    from front.identities import Identities
    from front.server import start_front
    from invoker.bus.kafka import KafkaBus
    from invoker.clock import SystemClock
    from invoker.commands.run import wait_for_signal
    from invoker.store.couch import CouchStore

    bus = KafkaBus(cfg.kafka)
    store = CouchStore(cfg.couchdb_url, cfg.couchdb_user, cfg.couchdb_password)
    await bus.wait_ready()
    await store.wait_ready()
    front = await start_front(
        bus=bus,
        store=store,
        clock=SystemClock(),
        host=args.host,
        port=args.port,
        whisks_db=cfg.whisks_db,
        activations_db=cfg.activations_db,
        topic_prefix=cfg.topic_prefix,
        controller_id=args.controller_id,
        identities=Identities.parse(args.auth),
        limits=Limits(max_timeout_ms=args.max_timeout_ms, max_memory_mb=args.max_memory_mb),
    )
    print(f"OpenWhisk API front at {front.url}", flush=True)
    try:
        await wait_for_signal()
    finally:
        await front.stop()
        await store.close()


def main(args: argparse.Namespace) -> int:
    cfg = configuration.load(args)
    logs.setup(cfg.log_level)
    asyncio.run(serve(args, cfg))
    return 0
