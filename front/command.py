"""``ow-invoker front``: the controller-compatible front alone, over Kafka and CouchDB, for
deployments with separate invokers (``ow-invoker run --id N``). Its settings are
:class:`front.config.FrontConfig`'s: the invokers' names for the bus and store, none of
their own (``--policy`` and the like are refused). Users: the configured keys and, as the
stock controller reads them, the subjects database's (``ow-invoker admin user create``)."""

from __future__ import annotations

import argparse
import asyncio

from front import config as configuration
from whisk import logs

HELP = "run the controller-compatible REST front over Kafka and CouchDB (invokers separate)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    configuration.add_arguments(parser)


async def serve(cfg: configuration.FrontConfig) -> None:
    from front.server import front_options, start_front
    from whisk.bus.kafka import KafkaBus
    from whisk.clock import SystemClock
    from whisk.lifecycle import NodeFailed, wait_for_signal_or
    from whisk.private import private_dir
    from whisk.store.couch import CouchStore

    private_dir(cfg.state_dir)  # spooled records: the front's alone
    bus = KafkaBus(cfg.kafka)
    store = CouchStore(cfg.couchdb_url, cfg.couchdb_user, cfg.couchdb_password)
    try:
        await bus.wait_ready()
        await store.wait_ready()
    except BaseException:
        await store.close()  # its HTTP session, before the one-line error
        raise
    front = await start_front(
        bus=bus,
        store=store,
        clock=SystemClock(),
        whisks_db=cfg.whisks_db,
        activations_db=cfg.activations_db,
        topic_prefix=cfg.topic_prefix,
        controller_id=cfg.controller_id,
        subjects_db=cfg.subjects_db,
        etcd_hosts=cfg.etcd_hosts if cfg.scheduler_mode else None,
        cluster_name=cfg.cluster_name,
        **front_options(cfg),
    )
    mode = "the scheduler mode (FPCPoolBalancer)" if cfg.scheduler_mode else "the sharding mode"
    print(f"OpenWhisk API front at {front.url}, {mode}", flush=True)
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
    from whisk.lifecycle import EXIT_FAILED, NodeFailed

    try:
        asyncio.run(serve(cfg))
    except NodeFailed:
        return EXIT_FAILED
    return 0
