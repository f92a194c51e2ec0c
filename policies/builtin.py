"""The policies of the call-scheduling paper (FIFO, SEPT, EECT, RECT, FC) and the stock
OpenWhisk baseline."""

from __future__ import annotations

from policies.attained import Attained
from policies.base import CallInfo, Policy
from policies.preemption import Preemption


def _fifo(c: CallInfo) -> float:
    return c.received


def _sept(c: CallInfo) -> float:
    return c.expected


def _eect(c: CallInfo) -> float:
    return c.received + c.expected


def _rect(c: CallInfo) -> float:
    return c.previous_received + c.expected


def _fc(c: CallInfo) -> float:
    return c.recent_calls * c.expected


FIFO = Policy("fifo", _fifo, description="first in, first out: r'(i)")
SEPT = Policy("sept", _sept, description="shortest expected processing time: E[p(i)]")
EECT = Policy("eect", _eect, description="earliest expected completion time: r'(i) + E[p(i)]")
RECT = Policy("rect", _rect, description="recent expected completion time: r̄(i) + E[p(i)]")
FC = Policy("fc", _fc, description="fair choice: #(f(i), last T s) * E[p(i)]")
OPENWHISK = Policy(
    "openwhisk",
    _fifo,
    exclusive_cores=False,
    description="stock OpenWhisk: FIFO, a container per pending call while memory allows, "
    "calls share the CPU",
)

SEPT_SHARE = Policy(
    "sept-share",
    _sept,
    description="SEPT; for a much shorter waiting call, a running call moves onto another "
    "long call's core (the two share it), or is paused if no such core is there "
    "(experimental: docs/policies.md, heavy tails)",
    preemption=Preemption(share_cores=4),
)

FC_SHARE = Policy(
    "fc-share",
    _fc,
    description="FC; a much shorter waiting call takes a long call's core, which moves onto "
    "another long call's (the two share it), and a call that has waited 4x its E[p] starts "
    "on a core it shares with longer calls (experimental: docs/policies.md, heavy tails)",
    preemption=Preemption(share_cores=4, overdue=4.0),
)

GITTINS = Policy(
    "gittins",
    _fifo,  # the invoker orders its queue by the index at age 0 (invoker.cpu_order)
    exclusive_cores=False,
    description="calls admitted as stock OpenWhisk's; their CPU goes to the highest Gittins "
    "index (from the function's past durations and the call's service so far) by "
    "cgroup CPU weights (docs/policies.md, heavy tails)",
    attained=Attained("gittins"),
)
GITTINS_AGED = Policy(
    "gittins-aged",
    _fifo,  # the invoker orders its queue by the index at age 0, as gittins (cpu_order)
    exclusive_cores=False,
    description="gittins with aging: calls past a virtual deadline (receipt + 4 / their "
    "Gittins index) take a quarter of the cores first, oldest deadline first, the rest go "
    "by the index as gittins (experimental: policies/attained.py, aged_ranking)",
    attained=Attained("gittins-aged"),
)
LAS = Policy(
    "las",
    _fifo,
    exclusive_cores=False,
    description="calls admitted as stock OpenWhisk's; their CPU goes to the least attained "
    "service by cgroup CPU weights (a reference for gittins)",
    attained=Attained("las"),
)

BUILTIN = {
    p.name: p
    for p in (
        FIFO,
        SEPT,
        EECT,
        RECT,
        FC,
        OPENWHISK,
        SEPT_SHARE,
        FC_SHARE,
        GITTINS,
        GITTINS_AGED,
        LAS,
    )
}
