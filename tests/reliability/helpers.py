"""Helpers for fault tests: process inspection (the invoker in its own process is
``ow_invoker.harness.processes.InvokerProcess``)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.procs import alive

ROOT = Path(__file__).resolve().parents[2]


def processes_with_marker(prefix: str) -> list[int]:
    """Live processes of the process backend carrying this container prefix."""
    needle = b"\0--marker\0" + prefix.encode() + b"\0"
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and alive(int(entry)):
            pids.append(int(entry))
    return pids
