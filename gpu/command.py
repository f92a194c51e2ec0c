"""``ow-invoker gpu-pool``: run the GPU pool on its own, for actions and tools to reach."""

from __future__ import annotations

import argparse

HELP = "run the GPU model-cache pool standalone (prints its address; Ctrl-C stops it)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from gpu.config import add_gpu_arguments

    add_gpu_arguments(parser)
    parser.add_argument("--metrics-port", type=int, default=0, help="serve /metrics (0: off)")


def main(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from prometheus_client import CollectorRegistry, start_http_server

    from gpu.config import config_from_args
    from gpu.pool import ENV_VAR, GpuPool

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    registry = CollectorRegistry()

    async def run() -> None:
        pool = GpuPool(config_from_args(args), registry=registry)
        await pool.start()
        if args.metrics_port:
            start_http_server(args.metrics_port, addr="127.0.0.1", registry=registry)
        print(f"{ENV_VAR}={pool.address}  ({pool.note}; policy {pool.config.policy})", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await pool.stop()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0
