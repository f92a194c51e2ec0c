"""Policy labels of ``ow-invoker experiment --policies``: ``POLICY[+preempt][@CORES]``.

A label names one platform of the run: the policy, whether it runs with ``--preempt``, and
how many action cores it gets. ``fc@1 openwhisk@2`` compares FC on one core with the
baseline on two *on the same calls*: the call sequences follow ``--cores`` (the load), and
``@CORES`` only changes the platform that serves them (the paper's "3 machines beat 4").
A label without ``@`` gets ``--cores``. Labels are also the names of the results' rows and
of the run directories, so they are kept as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

PREEMPT = "+preempt"  # a policy label's suffix: that policy, with --preempt
CORES = "@"  # then, optionally, its own number of action cores
BASELINE = "openwhisk"

_LABEL = re.compile(r"(?P<policy>[a-z][a-z0-9_-]*?)(?P<preempt>\+preempt)?(?:@(?P<cores>\d+))?")


@dataclass(frozen=True, slots=True)
class PolicyLabel:
    """What one label asks for; ``cores`` None means the experiment's ``--cores``."""

    policy: str
    preempt: bool = False
    cores: int | None = None

    def __str__(self) -> str:
        preempt = PREEMPT if self.preempt else ""
        cores = f"{CORES}{self.cores}" if self.cores is not None else ""
        return f"{self.policy}{preempt}{cores}"


def parse_label(label: str) -> PolicyLabel:
    """``fc+preempt@1`` -> PolicyLabel("fc", True, 1); ``sept`` -> PolicyLabel("sept").
    A malformed label (``fc@0``, ``fc@x``, ``@2``) is a ``ValueError``, said before anything
    is measured rather than when its platform fails to start."""
    m = _LABEL.fullmatch(label)
    if m is None:
        raise ValueError(f"policy label {label!r}: expected POLICY[{PREEMPT}][{CORES}CORES]")
    cores = m["cores"]
    if cores is not None and int(cores) < 1:
        raise ValueError(f"policy label {label!r}: a platform needs at least one action core")
    return PolicyLabel(m["policy"], m["preempt"] is not None, int(cores) if cores else None)


def split_policy(label: str) -> tuple[str, bool]:
    """``sept+preempt`` -> ("sept", True); ``fc`` -> ("fc", False) (cores left out)."""
    parsed = parse_label(label)
    return parsed.policy, parsed.preempt


def with_preempt(label: str) -> str:
    """The label of the same platform with ``--preempt`` (``fc@1`` -> ``fc+preempt@1``)."""
    parsed = parse_label(label)
    return str(PolicyLabel(parsed.policy, True, parsed.cores))


def baseline_label(labels: Iterable[str]) -> str:
    """The label the ratios are taken against: ``openwhisk`` if it ran, else the first
    label of the baseline policy without preemption (``openwhisk@2``), else ``openwhisk``."""
    labels = list(labels)
    if BASELINE in labels:
        return BASELINE
    for label in labels:
        try:
            parsed = parse_label(label)
        except ValueError:
            continue
        if parsed.policy == BASELINE and not parsed.preempt:
            return label
    return BASELINE
