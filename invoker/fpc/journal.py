"""The scheduler mode's journal of pulled calls: what a ``kill -9`` would otherwise lose.

In the sharding mode Kafka keeps a call until the invoker commits its offset, after its
answer. In this mode the scheduler forgets an activation once a container has fetched it, so
an invoker that dies loses the calls it had pulled (the stock FPC invoker does). Here each
pulled call is written to ``<state dir>/fpc-pulled/<activation id>.json`` before it is
queued, and removed once its answer (record and acks) is out or the scheduler has taken it
back. What the next start finds there was cut off by a crash: it is acknowledged again if
its record was stored, else rescheduled to the scheduler it came from, else answered with a
whisk error (:meth:`invoker.fpc.node.FpcNode.recover`).

Each entry is written to a temporary name and renamed, so a crash never leaves half of one.
A file write is not synced: a killed process loses nothing the kernel holds; a host crash
takes the containers and their calls anyway.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SUFFIX = ".json"


@dataclass(frozen=True, slots=True)
class Pulled:
    """A pulled call and where it came from: enough to reschedule it."""

    host: str
    port: int
    invocation_namespace: str
    action: dict[str, Any]  # the queue's FullyQualifiedEntityName JSON
    revision: str | None
    activation: dict[str, Any]  # the ActivationMessage as received

    @property
    def activation_id(self) -> str:
        return str(self.activation.get("activationId", ""))


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _path(self, activation_id: str) -> Path:
        if not activation_id or "/" in activation_id or activation_id.startswith("."):
            raise ValueError(f"not an activation id: {activation_id!r}")
        return self.directory / f"{activation_id}{SUFFIX}"

    def add(self, entry: Pulled) -> None:
        path = self._path(entry.activation_id)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(json.dumps(asdict(entry), separators=(",", ":")).encode())
        os.replace(tmp, path)

    def remove(self, activation_id: str) -> None:
        self._path(activation_id).unlink(missing_ok=True)

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob(f"*{SUFFIX}"))

    def entries(self) -> list[Pulled]:
        """What a previous run left, oldest first; an unreadable file is logged and removed
        (nothing in it can be answered), as are temporary files a crash left."""
        for tmp in self.directory.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
        found = []
        for path in sorted(self.directory.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime):
            try:
                found.append(Pulled(**json.loads(path.read_bytes())))
            except (ValueError, TypeError) as e:
                log.error("pulled-call journal: %s is unreadable, removed: %s", path.name, e)
                path.unlink(missing_ok=True)
        return found
