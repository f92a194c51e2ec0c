"""``ow-invoker`` / ``python -m invoker``: one entry point, one module per subcommand.

Each subcommand module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``main(args) -> int``, and keeps heavy imports inside ``main`` so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SUBCOMMANDS: dict[str, str] = {
    "run": "invoker.commands.run",
    "admin": "invoker.commands.admin",
    "standalone": "front.standalone",
    "front": "front.command",
    "simulate": "invoker.simulate",
    "simulate-gpu": "gpu.simulate",
    "gpu-pool": "gpu.command",
    "sebs": "sebs_wrappers.command",
    "experiment": "sebs_wrappers.experiment",
    "replay": "gatling.replay",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ow-invoker",
        description="A drop-in replacement for the Apache OpenWhisk invoker.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name and module_name.startswith(e.name):
                continue  # a subcommand still being written; leave it out of the CLI
            raise
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_main=module.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from invoker.bus.base import BusUnavailable
    from invoker.store.base import StoreUnavailable

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
