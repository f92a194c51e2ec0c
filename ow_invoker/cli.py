"""``ow-invoker`` / ``python -m ow_invoker``: one entry point, one module per subcommand,
each imported here by name so the whole command tree can be read from this file.

Each subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``main(args) -> int``, and keeps heavy imports inside ``main`` so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from front import command as front_command
from gatling import replay
from gpu import command as gpu_command
from gpu import simulate_command as simulate_gpu
from invoker import simulate
from invoker.commands import admin, run
from ow_invoker import standalone
from sebs_wrappers import command as sebs_command
from sebs_wrappers import experiment
from whisk.bus.base import BusUnavailable
from whisk.store.base import StoreUnavailable

SUBCOMMANDS: dict[str, ModuleType] = {
    "run": run,
    "admin": admin,
    "standalone": standalone,
    "front": front_command,
    "simulate": simulate,
    "simulate-gpu": simulate_gpu,
    "gpu-pool": gpu_command,
    "sebs": sebs_command,
    "experiment": experiment,
    "replay": replay,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ow-invoker",
        description="A drop-in replacement for the Apache OpenWhisk invoker.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_main=module.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._main(args) or 0)
    except KeyboardInterrupt:
        return 130
    except (BusUnavailable, StoreUnavailable, ValueError) as e:
        # Unreachable services and bad configuration: a clear line, not a traceback.
        print(f"ow-invoker {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
