"""The node scheduler: the priority queue of pending calls and the action cores.

Pure logic with time passed in, shared by the live invoker and the simulator. A call's
priority is computed once, when it is admitted, by the policy, from the time the call was
*received*; ties go to the call received first (``order``), so a call whose action fetch was
slow keeps its place.

Cores are CPU capacity, not call slots (:class:`Cores`): a call is expected to use
``share`` = E[cpu] / E[p] of a core (1.0 until its function is measured). A core takes
another call while the expected shares of the calls on it stay within ``1 + margin`` and
it holds fewer than ``max_calls`` calls, so a CPU-bound call still gets a core to itself
and calls that mostly wait share one. Under the ``openwhisk`` baseline calls are not
limited here (the container pool's memory is the only limit) and share all the cores.

Intra-container concurrency (an action's ``limits.concurrency`` N > 1): its calls carry a
``group`` (the containers they may share) and ``limit`` N. A call that starts a container
of its group opens a :class:`Shared`, which holds a whole core (``SHARED_SHARE``) while any
call runs in it; until N calls run in it, the group's waiting calls *join* it, best
(priority, order) first, taking no core and no memory of their own, ahead of the head of
the queue (which could not have had that core anyway).

Preemption (opt-in, :class:`Preemption`): when the head of the queue cannot start and a
running call that holds a core alone is expected to need much longer than the head, that
call is paused and its core given to the head. Expected remaining time is the function's
E[p] at the call's start minus the time it has run. Paused calls resume first when a core
frees (:meth:`NodeScheduler.resume`, least remaining first); a call is paused at most
``max_pauses`` times, and at most ``max_paused`` calls are paused at once (their
containers keep their memory).

Sharing (``Preemption.share_cores`` > 1): a call the rule would pause is moved instead onto
the core of another such call, the only way a core takes more than its capacity: long
calls share cores among themselves while the head gets one of its own. When a core is idle
and nothing waiting can use it, a call of the most crowded core moves onto it
(:meth:`NodeScheduler.spread_move`).

Plan, then commit: :meth:`NodeScheduler.plan` returns what starts next as a value (a
:class:`Start`, :class:`MoveThenStart`, :class:`PauseThenStart`, :class:`OverdueStart` or
:class:`LateStart`) and changes nothing; the caller reserves the call's memory, and only
if it has it calls :meth:`NodeScheduler.commit`, so a plan that cannot have its memory
leaves nothing to undo.

The modules, one job each: ``calls`` (the values: :class:`Call`, :class:`Shared`, the
heap :class:`Entry`), ``cores`` (:class:`Cores`), ``groups`` (intra-container
concurrency), ``preemption`` (the rule's searches over the running calls), ``decisions``
(what a plan returns) and ``node`` (:class:`NodeScheduler`: the heaps, plan and commit).
"""

from invoker.scheduler.calls import SHARED_SHARE, Call, Entry, Shared
from invoker.scheduler.cores import Cores
from invoker.scheduler.decisions import (
    LateStart,
    MoveThenStart,
    OverdueStart,
    PauseThenStart,
    Start,
)
from invoker.scheduler.node import NodeScheduler
from policies.preemption import Preemption

__all__ = [
    "SHARED_SHARE",
    "Call",
    "Cores",
    "Entry",
    "LateStart",
    "MoveThenStart",
    "NodeScheduler",
    "OverdueStart",
    "PauseThenStart",
    "Preemption",
    "Shared",
    "Start",
]
