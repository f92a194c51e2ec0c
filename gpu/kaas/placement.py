"""Which device runs a kTask: the KaaS scheduler's rule, pure (no clock, no I/O).

A kTask waits until its inputs are in the data layer (at the versions it names, if any); then
it goes to the device where it would finish first, counting the work already queued there and
the constant bytes that would have to be copied because they are not resident there yet. So a
client's kTasks follow their cached constants, unless that device's queue costs more than
copying them elsewhere. Ties: fewer bytes to copy, then the lower index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpu.kaas.format import Kind, KTask
from gpu.kaas.spec import KTaskError, mib


@dataclass(frozen=True)
class DeviceState:
    index: int
    backlog_s: float  # estimated seconds of work running on or queued for the device
    constant_capacity: int  # bytes of its memory that constants may occupy
    cuda: bool = False


@dataclass(frozen=True)
class ConstantNeed:
    key: str
    version: int
    nbytes: int


@dataclass(frozen=True)
class Placement:
    device: int | None  # None: not ready, ``waiting_for`` says which keys
    missing_bytes: int = 0  # constant bytes to copy to that device
    estimate_s: float = 0.0  # backlog + copy, the quantity minimised
    waiting_for: tuple[str, ...] = ()


Versions = Callable[[str], int | None]
"""The data layer's current version of a key, None when it holds nothing."""

Holders = Callable[[str, int], set[int]]
"""The devices where (key, version) is resident."""


def requirements(task: KTask, versions: Versions) -> tuple[list[ConstantNeed], list[str]]:
    """The constants the task needs (at their current versions) and the input keys not ready."""
    needs: list[ConstantNeed] = []
    missing: list[str] = []
    for b in task.of_kind(Kind.INPUT):
        assert b.key is not None
        v = versions(b.key)
        if v is None or (b.version is not None and v != b.version):
            missing.append(b.key)
        elif b.const:
            needs.append(ConstantNeed(b.key, v, b.nbytes))
    return needs, missing


def place(
    needs: Sequence[ConstantNeed],
    missing: Sequence[str],
    devices: Sequence[DeviceState],
    holders: Holders,
    *,
    copy_bytes_per_s: float,
    needs_cuda: bool = False,
) -> Placement:
    if missing:
        return Placement(None, waiting_for=tuple(missing))
    unique = {(n.key, n.version): n.nbytes for n in needs}
    total = sum(unique.values())
    eligible = [d for d in devices if (d.cuda or not needs_cuda) and total <= d.constant_capacity]
    if not eligible:
        if needs_cuda and not any(d.cuda for d in devices):
            raise KTaskError("the kTask has CUDA source kernels and the pool has no CUDA device")
        largest = max((d.constant_capacity for d in devices), default=0)
        raise KTaskError(
            f"the kTask's constants need {mib(total)} together; the largest constant budget "
            f"of a device is {mib(largest)}"
        )
    best: tuple[float, int, int] | None = None
    for d in eligible:
        copy = sum(n for (k, v), n in unique.items() if d.index not in holders(k, v))
        cand = (d.backlog_s + copy / copy_bytes_per_s, copy, d.index)
        if best is None or cand < best:
            best = cand
    assert best is not None
    return Placement(best[2], best[1], best[0])
