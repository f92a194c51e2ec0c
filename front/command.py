"""``ow-invoker front``: the controller-compatible front alone, over Kafka and CouchDB, for
deployments with separate invokers (``ow-invoker run --id N``)."""

from __future__ import annotations

import argparse
import asyncio

from invoker import config as configuration
from invoker import logs

HELP = "run the controller-compatible REST front over Kafka and CouchDB (invokers separate)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from front.server import add_front_arguments

    add_front_arguments(parser)
    parser.add_argument("--controller-id", default="0", help="controller instance (completed<C>)")
    configuration.add_arguments(parser)


async def serve(args: argparse.Namespace, cfg: configuration.InvokerConfig) -> None:
    from front.server import front_options, start_front
    from invoker.bus.kafka import KafkaBus
    from invoker.clock import SystemClock
    from invoker.commands.run import NodeFailed, wait_for_signal_or
    from invoker.store.couch import CouchStore

    bus = KafkaBus(cfg.kafka)
    store = CouchStore(cfg.couchdb_url, cfg.couchdb_user, cfg.couchdb_password)
    await bus.wait_ready()
    await store.wait_ready()
    front = await start_front(
        bus=bus,
        store=store,
        clock=SystemClock(),
        whisks_db=cfg.whisks_db,
        activations_db=cfg.activations_db,
        topic_prefix=cfg.topic_prefix,
        controller_id=args.controller_id,
        **front_options(args),
    )
    print(f"OpenWhisk API front at {front.url}", flush=True)
    try:
        failure = await wait_for_signal_or(front.controller.supervisor.wait_failed())
        if failure is not None:
            raise NodeFailed(failure)
    finally:
        await front.stop()
        await store.close()


def main(args: argparse.Namespace) -> int:
    cfg = configuration.load(args)
    logs.setup(cfg.log_level)
    from invoker.commands.run import EXIT_FAILED, NodeFailed

    try:
        asyncio.run(serve(args, cfg))
    except NodeFailed:
        return EXIT_FAILED
    return 0
