"""``ow-invoker run``: join an OpenWhisk deployment as invoker N."""

from __future__ import annotations

import argparse
import asyncio
import logging

from invoker import config as configuration
from whisk import logs
from whisk.lifecycle import EXIT_FAILED, NodeFailed, wait_for_signal_or

FAILED_EXIT_S = 3.5  # a failed node exits within 5 s of the failure

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


async def serve(cfg: configuration.InvokerConfig, shutdown_deadline: float = 30.0) -> None:
    from invoker.admin_http import serve_admin
    from invoker.admin_tls import admin_ssl_context
    from invoker.compose import build_invoker
    from invoker.cpu_order import shared_cores_warning
    from whisk.bus.kafka import KafkaBus
    from whisk.clock import SystemClock
    from whisk.private import private_dir
    from whisk.store.couch import CouchStore

    # Spooled records, the admin password, the containers: the invoker's alone (0711 lets an
    # --action-user reach its containers' directories, listing nothing).
    private_dir(cfg.state_dir, 0o711 if cfg.process.action_user else 0o700)
    admin_tls = admin_ssl_context(cfg)  # a bad keystore fails now, not after joining
    bus = KafkaBus(cfg.kafka, cfg.kafka_replication_factor, cfg.kafka_security)
    store = CouchStore(cfg.couchdb_url, cfg.couchdb_user, cfg.couchdb_password)
    log.info("waiting for Kafka at %s and CouchDB at %s", cfg.kafka, cfg.couchdb_url)
    await bus.wait_ready(timeout_s=float("inf"))  # as long as it takes, saying so
    await store.wait_ready()
    for db in (cfg.whisks_db, cfg.activations_db):
        await store.ensure_db(db)
    invoker = build_invoker(cfg, bus=bus, store=store, clock=SystemClock())
    await invoker.start()
    if invoker.cpu_order is not None and (
        said := shared_cores_warning(
            cfg.action_cores,
            configuration.available_cores(),
            invoker.pool.backend.weights_among_calls,
        )
    ):
        log.warning(said)
    admin = await serve_admin(invoker, cfg.admin_host, cfg.admin_port, admin_tls)
    scheme = "https" if admin_tls else "http"
    log.info("admin API on %s://%s:%d", scheme, cfg.admin_host, cfg.admin_port)
    failure = None
    try:
        failure = await wait_for_signal_or(invoker.supervisor.wait_failed())
        if failure is None:
            log.info("stopping (deadline %.0fs)", shutdown_deadline)
    finally:
        await admin.cleanup()
        if failure is None:
            await invoker.stop(shutdown_deadline)
            await store.close()
    if failure is not None:
        # Exit soon, for systemd or Kubernetes to start a healthy process: calls still
        # running are handed back (re-delivered), leftover containers go at the next start.
        log.critical("exiting: %s", failure)
        try:
            async with asyncio.timeout(FAILED_EXIT_S):
                await invoker.stop(deadline_s=1.0)
                await store.close()
        except TimeoutError:
            log.warning("shutdown took longer than %.0f s: exiting anyway", FAILED_EXIT_S)
        raise NodeFailed(failure)


def main(args: argparse.Namespace) -> int:
    cfg = configuration.load(args)
    if cfg.unique_name and not configuration.instance_given(args):
        # The stock invoker would ask ZooKeeper for an id; taking 0 would be another's.
        raise ValueError(
            f"--uniqueName {cfg.unique_name} without --id: the stock invoker asks ZooKeeper "
            "(ZOOKEEPER_HOSTS) for an id then; ow-invoker needs the id: add --id N"
        )
    logs.setup(cfg.log_level)
    try:
        asyncio.run(serve(cfg, args.shutdown_deadline))
    except NodeFailed:
        return EXIT_FAILED
    return 0
