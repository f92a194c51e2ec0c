"""The live console at ``/console``: actions in the browser, and the scheduler's queue, cores
and per-function histograms (docs/console.md)."""

from front.console.routes import NodeView, Operator, mount_console, node_modules

__all__ = ["NodeView", "Operator", "mount_console", "node_modules"]
