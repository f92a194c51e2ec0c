"""The preemption rule's searches over the running calls (:class:`Preemption`, opt-in):
which call to pause for the blocked head of the queue, which to move to share a core
instead, which to spread back onto an idle core, which core an overdue call may share,
and which paused call resumes. Pure: they read the calls and the cores and change
nothing; :class:`NodeScheduler` plans and commits what they find.

``running`` is the calls on cores in the order of their starts and resumes (a dict used
as a set): the searches meet the calls in an order every run repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from invoker.scheduler.calls import Call
from invoker.scheduler.cores import Cores
from policies.preemption import Preemption

Pausable = Callable[[Call[Any]], bool]


def victim(
    rule: Preemption,
    table: Cores,
    running: Iterable[Call[Any]],
    now: float,
    wanted: float,
    pause_cost_s: float,
    pausable: Pausable,
) -> Call[Any] | None:
    """The call to pause for a head expected to need ``wanted``: among the ``pausable``
    calls alone on their core, the one expected to need the longest (the first admitted
    on ties), if it still needs more than the head's E[p] / ``ratio`` by more than the
    pause costs, has had its slice and has not been paused ``max_pauses`` times."""
    best: Call[Any] | None = None
    best_left = 0.0
    for call in running:
        if call.core is None or table.calls[call.core] != 1:
            continue
        assert call.resumed is not None  # set by each start and resume
        left = rule.remaining(call.expected, call.ran(now))
        slice_s = now - call.resumed
        better = left > best_left or (
            best is not None and left == best_left and call.seq < best.seq
        )
        if better and rule.sliced(call.pauses, slice_s) and pausable(call):
            best, best_left = call, left
    if best is None or best.pauses >= rule.max_pauses:
        return None
    return best if rule.outweighs(wanted, best_left, pause_cost_s) else None


def sharing_move(
    rule: Preemption,
    table: Cores,
    running: Iterable[Call[Any]],
    now: float,
    wanted: float,
    pausable: Pausable,
) -> tuple[Call[Any], int] | None:
    """(call, core): instead of a pause, the call to move onto ``core``, which another
    long call holds, so that the head can start on the core it leaves. Long calls are the
    ``pausable`` ones on cores that hold nothing else, each expected to need enough longer
    than the head (the pause rule, without the pause's cost); the call moved is the one
    alone on its core expected to need the longest, onto the core with the fewest."""
    long: dict[int, list[tuple[float, Call[Any]]]] = {}
    for call in running:
        if call.core is None or not pausable(call):
            continue
        left = rule.remaining(call.expected, call.ran(now))
        if rule.outweighs(wanted, left, 0.0):
            long.setdefault(call.core, []).append((left, call))
    long = {core: calls for core, calls in long.items() if len(calls) == table.calls[core]}
    alone = [calls[0] for calls in long.values() if len(calls) == 1]
    if not alone:
        return None
    _, moved = max(alone, key=lambda e: (e[0], -e[1].seq))
    hosts = [
        core for core, calls in long.items() if core != moved.core and len(calls) < rule.share_cores
    ]
    if not hosts:
        return None
    return moved, min(hosts, key=lambda core: (len(long[core]), core))


def spread_move(
    rule: Preemption, table: Cores, running: Iterable[Call[Any]], now: float, movable: Pausable
) -> tuple[Call[Any], int] | None:
    """(call, core): a call of the most crowded core (one holding more than its capacity:
    calls moved to share it) to move onto ``core``, which is idle; the one expected to
    finish first, which gains most from a core of its own."""
    idle = [core for core in table.ids if table.calls[core] == 0 and core not in table.full]
    limit = 1.0 + table.margin + 1e-9
    crowded = [core for core in table.ids if table.load[core] > limit]
    if not idle or not crowded:
        return None
    core = max(crowded, key=lambda c: (table.load[c], -c))
    calls = [c for c in running if c.core == core and movable(c)]
    if not calls:
        return None
    call = min(calls, key=lambda c: (rule.remaining(c.expected, c.ran(now)), c.seq))
    return call, idle[0]


def overdue_host(
    rule: Preemption,
    table: Cores,
    running: Iterable[Call[Any]],
    now: float,
    wanted: float,
    pausable: Pausable,
) -> int | None:
    """The core an overdue call expected to need ``wanted`` may share: one that holds only
    ``pausable`` calls, fewer than ``share_cores``, each expected to need at least as long
    (so it slows no call that would end sooner); the least crowded such core."""
    longer: dict[int, int] = {}
    for call in running:
        core = call.core
        if core is None or not pausable(call):
            continue
        if rule.remaining(call.expected, call.ran(now)) >= wanted:
            longer[core] = longer.get(core, 0) + 1
    hosts = [
        core
        for core, n in longer.items()
        if n == table.calls[core] < rule.share_cores and core not in table.full
    ]
    if not hosts:
        return None
    return min(hosts, key=lambda c: (longer[c], table.load[c], c))


def resumable(
    rule: Preemption, table: Cores, paused: Iterable[Call[Any]], wanted: float | None
) -> tuple[Call[Any], int] | None:
    """(call, core): the paused call to resume now, least remaining time first, and the
    core with room for it; ``wanted``: the head's E[p], which a call must not exceed to
    resume before it (None: any may)."""
    order = sorted(
        paused, key=lambda c: (rule.remaining(c.expected, c.ran_s), c.expected - c.ran_s, c.seq)
    )
    if wanted is not None:
        order = [c for c in order if rule.remaining(c.expected, c.ran_s) <= wanted]
    for call in order:
        core = table.place(call.share)
        if core is not None:
            return call, core
    return None
