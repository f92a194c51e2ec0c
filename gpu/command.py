"""``ow-invoker gpu-pool``: run the GPU pool on its own, for actions and tools to reach."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from gpu.config import GpuConfig
from whisk.settings import Settings, setting

HELP = "run the GPU model-cache pool standalone (prints its address; Ctrl-C stops it)"


@dataclass(frozen=True)
class PoolOptions:
    """The command's settings: the pool's (``--gpu-<field>``, from :class:`GpuConfig`, so
    its flags and defaults are the invoker's) and the metrics port."""

    gpu: GpuConfig = setting(factory=GpuConfig, help="GPU pool")  # noqa: RUF009 (a field())
    metrics_port: int = setting(0, help="serve /metrics on 127.0.0.1 (0: off)")


# Flags, OW_GPU_POOL_<FIELD> (OW_GPU_POOL_GPU_DEVICES, ...), or a TOML file's [gpu-pool].
OPTIONS = Settings(PoolOptions, env_prefix="OW_GPU_POOL_", section="gpu-pool")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    OPTIONS.add_arguments(parser)


def main(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from prometheus_client import CollectorRegistry, start_http_server

    from gpu.pool import ENV_VAR, GpuPool

    options = OPTIONS.load(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    registry = CollectorRegistry()

    async def run() -> None:
        pool = GpuPool(options.gpu, registry=registry)
        await pool.start()
        if options.metrics_port:
            start_http_server(options.metrics_port, addr="127.0.0.1", registry=registry)
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
