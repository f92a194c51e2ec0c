"""The scenario file shared by the Python replayer and the Gatling simulation.

JSON Lines, one call per line, sorted by ``t``; blank lines and lines starting with ``#`` are
ignored::

    {"seq": 0, "t": 0.8125, "action": "sebs-110-dynamic-html", "params": {"username": "x"}}

``t`` is the send time in seconds from the common start, ``action`` the action name in the
namespace, ``params`` the JSON body of the invoke (optional, ``{}`` by default) and ``seq`` a
stable call number (optional, the line order by default).

The timings file both replayers write is CSV with the columns in ``TIMING_COLUMNS``: times are
seconds from the common start on the client's monotonic clock; ``epoch_start_s`` is that start
on the wall clock, to line requests up with activation records (``start``/``end`` in ms).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TIMING_COLUMNS = (
    "seq",
    "action",
    "scheduled_s",
    "sent_s",
    "done_s",
    "response_s",
    "status",
    "activation_id",
    "error",
    "epoch_start_s",
)


@dataclass(frozen=True)
class Call:
    seq: int
    t: float
    action: str
    params: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass
class Timing:
    """One request as the client saw it; ``response_s`` is the HTTP round trip (done - sent)."""

    seq: int
    action: str
    scheduled_s: float
    sent_s: float
    done_s: float
    status: int
    activation_id: str = ""
    error: str = ""
    epoch_start_s: float = 0.0

    @property
    def response_s(self) -> float:
        return self.done_s - self.sent_s

    @property
    def lateness_s(self) -> float:
        return self.sent_s - self.scheduled_s

    def row(self) -> list[str]:
        return [
            str(self.seq),
            self.action,
            f"{self.scheduled_s:.6f}",
            f"{self.sent_s:.6f}",
            f"{self.done_s:.6f}",
            f"{self.response_s:.6f}",
            str(self.status),
            self.activation_id,
            self.error,
            f"{self.epoch_start_s:.6f}",
        ]


def read_scenario(path: Path) -> list[Call]:
    calls: list[Call] = []
    with path.open() as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                obj = json.loads(line)
                calls.append(
                    Call(
                        seq=int(obj.get("seq", len(calls))),
                        t=float(obj["t"]),
                        action=str(obj["action"]),
                        params=dict(obj.get("params") or {}),
                    )
                )
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{lineno}: bad scenario line ({e})") from e
    calls.sort(key=lambda c: (c.t, c.seq))
    return calls


def write_scenario(path: Path, calls: Iterable[Call]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for c in sorted(calls, key=lambda c: (c.t, c.seq)):
            line = {"seq": c.seq, "t": round(c.t, 6), "action": c.action, "params": c.params}
            f.write(json.dumps(line, separators=(",", ":"), sort_keys=True) + "\n")


def write_timings(path: Path, timings: Iterable[Timing]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(TIMING_COLUMNS)
        for t in sorted(timings, key=lambda t: t.seq):
            w.writerow(t.row())


def read_timings(path: Path) -> list[Timing]:
    with path.open(newline="") as f:
        return [
            Timing(
                seq=int(r["seq"]),
                action=r["action"],
                scheduled_s=float(r["scheduled_s"]),
                sent_s=float(r["sent_s"]),
                done_s=float(r["done_s"]),
                status=int(r["status"]),
                activation_id=r.get("activation_id", ""),
                error=r.get("error", ""),
                epoch_start_s=float(r.get("epoch_start_s") or 0.0),
            )
            for r in csv.DictReader(f)
        ]
