"""``gpu-pool``: its flags are GpuConfig's."""

from __future__ import annotations

import argparse

from gpu.config import GpuConfig
from ow_invoker.cli import build_parser


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


# -- gpu-pool: its flags are GpuConfig's ---------------------------------------------------


def test_gpu_pool_command_takes_every_gpu_setting():
    from gpu.command import OPTIONS

    options = OPTIONS.load(
        _args("gpu-pool", "--gpu-devices", "virtual:2", "--gpu-max-payload-mb", "64"), {}
    )
    assert options.gpu == GpuConfig(devices="virtual:2", max_payload_mb=64)
    assert options.metrics_port == 0
    assert OPTIONS.load(_args("gpu-pool"), {}).gpu == GpuConfig()
