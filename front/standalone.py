"""``ow-invoker standalone``: the whole platform in one process.

The controller-compatible front and one invoker, with embedded defaults: an in-process bus
instead of Kafka, an embedded SQLite store instead of CouchDB, process containers. Give
``--kafka`` and/or ``--couchdb-url`` to use real services instead.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from invoker import config as configuration
from invoker import logs

HELP = "run front + invoker in one process (embedded bus and store) on 127.0.0.1:3233"
log = logging.getLogger("standalone")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from front.server import add_front_arguments

    add_front_arguments(parser)
    parser.add_argument("--ready-file", help="write the API URL here once ready")
    configuration.add_arguments(parser)


async def serve(args: argparse.Namespace, cfg: configuration.InvokerConfig) -> None:
    from containers.manifest import Manifest
    from front.identities import GUEST_AUTH
    from front.server import front_options, start_front
    from invoker.admin import serve_admin
    from invoker.clock import SystemClock
    from invoker.commands.run import NodeFailed, wait_for_signal_or
    from invoker.compose import build_invoker
    from invoker.supervisor import first_failure

    clock = SystemClock()
    state = Path(cfg.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    if args.kafka:
        from invoker.bus.kafka import KafkaBus

        bus = KafkaBus(cfg.kafka)
        await bus.wait_ready()
    else:
        from invoker.bus.memory import MemoryBus

        bus = MemoryBus()
    if args.couchdb_url:
        from invoker.store.couch import CouchStore

        store = CouchStore(cfg.couchdb_url, cfg.couchdb_user, cfg.couchdb_password)
        await store.wait_ready()
    else:
        from invoker.store.embedded import EmbeddedStore

        store = EmbeddedStore(state / "openwhisk.sqlite3")
    manifest = Manifest.load(cfg.runtimes_manifest) if cfg.runtimes_manifest else Manifest()
    options = front_options(args)
    front = await start_front(
        bus=bus,
        store=store,
        clock=clock,
        whisks_db=cfg.whisks_db,
        activations_db=cfg.activations_db,
        topic_prefix=cfg.topic_prefix,
        manifest=manifest,
        listen=False,  # opened once the invoker is healthy: no 503 for an early caller
        **options,
    )
    invoker = build_invoker(cfg, bus=bus, store=store, clock=clock, manifest=manifest)
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
    cfg = configuration.load(args, **_standalone_defaults(args))
    logs.setup(cfg.log_level)
    from invoker.commands.run import EXIT_FAILED, NodeFailed

    try:
        asyncio.run(serve(args, cfg))
    except TimeoutError:
        print("the invoker did not become healthy in time", file=sys.stderr)
        return 1
    except NodeFailed as e:
        print(f"failed: {e}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _standalone_defaults(args: argparse.Namespace) -> dict[str, object]:
    """Embedded-mode defaults that flags, environment or a config file still override."""
    out: dict[str, object] = {}
    if args.state_dir is None:
        out["state_dir"] = ".state/standalone"
    return out
