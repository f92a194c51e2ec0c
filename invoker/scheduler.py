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
call is paused (:meth:`NodeScheduler.pause`) and its core given to the head. Expected
remaining time is the function's E[p] at the call's start minus the time it has run. Paused
calls resume first when a core frees (:meth:`NodeScheduler.resume`, least remaining first);
a call is paused at most ``max_pauses`` times, and at most ``max_paused`` calls are paused at
once (their containers keep their memory).

Sharing (``Preemption.share_cores`` > 1): a call the rule would pause is moved instead onto
the core of another such call (:meth:`NodeScheduler.sharing_move`), the only way a core
takes more than its capacity: long calls share cores among themselves while the head gets
one of its own. When a core is idle and nothing waiting can use it, a call of the most
crowded core moves onto it (:meth:`NodeScheduler.spread_move`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from policies import FunctionStats, Policy
from policies.preemption import Preemption

T = TypeVar("T")
SHARED_SHARE = 1.0  # what a container running concurrent calls holds of its core


@dataclass(slots=True, eq=False)
class Call(Generic[T]):
    """One pending or running call; ``payload`` is opaque to the scheduler."""

    function: str
    payload: T
    received: float
    priority: float
    seq: int
    core: int | None = None
    started: float | None = None
    share: float = 1.0  # expected CPU share, fixed when it starts
    overrun: float = 0.0  # measured share beyond ``share`` while it runs (see Cores.observe)
    group: Hashable | None = None  # calls that may share a container (None: limit 1)
    limit: int = 1  # calls its container may run at once
    shared: Shared | None = None  # the container it runs in, when ``limit`` > 1
    waiting: bool = True  # queued; False once started (its other heap entry is then stale)
    # Preemption: E[p] when it started, run time before the current stretch (which began
    # at ``resumed``), how often it was paused, and since when it is (None: not paused).
    expected: float = 0.0
    ran_s: float = 0.0
    resumed: float | None = None
    pauses: int = 0
    paused_at: float | None = None
    shared_core: bool = False  # was moved to share a core (its E[p] leaves out the wait)

    def ran(self, now: float) -> float:
        """Time it has run (paused time excluded)."""
        return self.ran_s + (now - self.resumed if self.resumed is not None else 0.0)

    def remaining(self, now: float) -> float:
        """Expected time still to run: E[p] at its start minus the time it has run."""
        return max(0.0, self.expected - self.ran(now))


@dataclass(slots=True, eq=False)
class Shared:
    """A container taking up to ``limit`` calls of one group at once, on one core
    (``core``, None under the shared baseline) that it holds while ``calls`` > 0.
    ``handle`` is the caller's own reference to the container (opaque here)."""

    group: Hashable
    function: str
    limit: int
    core: int | None
    share: float
    calls: int = 0
    closed: bool = False  # takes no more calls (its container is going)
    handle: Any = None


@dataclass(slots=True, eq=False)
class _Group:
    """The waiting calls of one group (a heap whose entries go stale when a call starts
    from the main queue; ``waiting`` is exact) and its containers with room."""

    heap: list[tuple[float, int, int, Call[Any]]] = field(default_factory=list)
    waiting: int = 0
    open: list[Shared] = field(default_factory=list)


class Cores:
    """The action cores as CPU capacity, shared by every queue of the node.

    Placement is best fit: the most loaded core the call fits on (lowest id on ties), so
    calls that mostly wait gather on busy cores and idle cores stay whole for CPU-bound
    calls.

    Misprediction, while calls run: a running call sampled using more than its expected
    share plus the margin adds the difference (its *overrun*) to its core's load until a
    later sample says otherwise or it finishes, so a core whose calls are measured to
    use more than predicted takes only what still fits beside what they really use (and
    nothing once that passes ``1 + margin``).

    Misprediction, when a call finishes having used more than its expected share plus the
    margin: the calls of the same function still on its core are assumed to overrun as
    much; if that would take the core past ``1 + margin``, the core is *full* (takes
    nothing more) until all its calls have finished. Meanwhile the function's estimate has
    taken in the new measurement.
    """

    def __init__(self, cores: Sequence[int], margin: float = 0.1, max_calls: int = 8) -> None:
        if not cores:
            raise ValueError("the node needs at least one action core")
        if len(set(cores)) != len(cores):
            raise ValueError("action cores must be distinct")
        if margin < 0 or max_calls < 1:
            raise ValueError("margin must be >= 0 and max_calls >= 1")
        self.ids = tuple(sorted(cores))
        self.margin = margin
        self.max_calls = max_calls
        # Expected shares of the running calls plus their measured overruns.
        self.load = dict.fromkeys(self.ids, 0.0)
        self.overrun = dict.fromkeys(self.ids, 0.0)  # the measured part of ``load``
        self.calls = dict.fromkeys(self.ids, 0)
        self.heavy = dict.fromkeys(self.ids, 0)  # calls expected to use more than the margin
        self.light_limit = margin + 1e-9
        self.functions: dict[int, dict[str, int]] = {c: {} for c in self.ids}  # calls per core
        self.full: set[int] = set()

    def light(self, share: float) -> bool:
        """Whether a call of this share mostly waits: it fits beside any other call."""
        return share <= self.light_limit

    def may_overrun(self, share: float) -> bool:
        """Whether a call expected to use this share could be measured using more than it
        plus the margin (worth sampling while it runs): not a CPU-bound one."""
        return share + self.margin < 1.0

    def observe(self, core: int, share: float, was: float, used: float) -> float:
        """A running call of expected ``share`` on ``core`` was just measured using
        ``used`` of a core (``was``: its overrun so far). Returns its new overrun: the
        difference when it exceeds the share by more than the margin, else 0 (an estimate
        within the margin is right). The core's load follows, so placement sees it."""
        overrun = used - share if used > share + self.margin else 0.0
        if overrun != was and self.calls[core]:
            self.overrun[core] = max(0.0, self.overrun[core] + overrun - was)
            self.load[core] = max(0.0, self.load[core] + overrun - was)
        return overrun

    def place(self, share: float, *, beside_heavy: bool = False) -> int | None:
        """The core a call of this expected share would go on now, or None.

        ``beside_heavy``: only cores that hold a call expected to use more than the margin."""
        best: int | None = None
        limit = 1.0 + self.margin + 1e-9
        for core in self.ids:
            n, load = self.calls[core], self.load[core]
            if core in self.full or n >= self.max_calls or load + share > limit:
                continue
            if beside_heavy and not self.heavy[core]:
                continue
            if best is None or load > self.load[best]:
                best = core
        return best

    def take(self, core: int, function: str, share: float) -> None:
        self.calls[core] += 1
        self.load[core] += share
        if share > self.light_limit:
            self.heavy[core] += 1
        functions = self.functions[core]
        functions[function] = functions.get(function, 0) + 1

    def give(self, core: int, function: str, share: float, used: float | None) -> None:
        """A call left the core; ``used`` is the share it was measured to use."""
        self.calls[core] -= 1
        if share > self.light_limit:
            self.heavy[core] -= 1
        functions = self.functions[core]
        left = functions[function] - 1
        if left:
            functions[function] = left
        else:
            del functions[function]
        if self.calls[core] == 0:
            self.load[core] = self.overrun[core] = 0.0  # no float drift over a long uptime
            self.full.discard(core)
            return
        self.load[core] = max(0.0, self.load[core] - share)
        if used is not None and used > share + self.margin:
            excess = (used - share) * functions.get(function, 0)
            if self.load[core] + excess > 1.0 + self.margin + 1e-9:
                self.full.add(core)


class NodeScheduler(Generic[T]):
    """One queue of calls in policy order, drawing on a :class:`Cores` (which several
    queues of the node may share, e.g. CPU and GPU actions).

    The head of the queue starts on the best-fitting core. If it fits on none, it waits,
    and only a *light* call (expected share at most the margin: one that mostly waits) may
    pass it, and only onto a core that holds a heavier call, one the head could not get
    before that call ends anyway; so light calls never hold a core the head could have
    had, and the head's wait stays bounded. Calls that can join a running container of
    their group (:class:`Shared`) go first: they take nothing the head could use.
    """

    def __init__(
        self,
        policy: Policy,
        cores: Sequence[int] | Cores,
        stats: FunctionStats | None = None,
        preemption: Preemption | None = None,
    ) -> None:
        self.cores_table = cores if isinstance(cores, Cores) else Cores(cores)
        self.policy = policy
        self._priority = policy.priority
        self.stats = stats or FunctionStats()
        # Two heaps of (priority, order, admission number, call): calls expected to be light
        # when admitted, and the others; the head of the queue is the smaller of their tops.
        self._light: list[tuple[float, int, int, Call[T]]] = []
        self._heavy: list[tuple[float, int, int, Call[T]]] = []
        self._seq = 0
        self.running = 0
        # Intra-container concurrency: groups by key; those with a waiting call and a
        # container with room; entries of the two heaps whose call started from its group.
        self._groups: dict[Hashable, _Group] = {}
        self._joinable: dict[Hashable, _Group] = {}
        self._stale = 0
        # Preemption (None: off): the calls on cores that may be paused, and those paused.
        # ``_on_core`` is a dict used as a set for its order, that of the calls' starts and
        # resumes: the searches over it meet the calls in an order every run repeats (a
        # set's follows their ids, i.e. memory addresses).
        self.preemption = preemption if policy.exclusive_cores else None
        self.pause_cost_s = preemption.pause_cost_s if preemption else 0.0
        self._on_core: dict[Call[T], None] = {}
        self._paused: list[Call[T]] = []
        self._handing_over: Call[T] | None = None  # paused for the head, until it starts
        self._handed_core: int | None = None  # the core it left
        self.preempted = 0  # pauses so far
        self.moved = 0  # calls moved to share a core, and back to an idle one
        # Overdue calls (Preemption.overdue): (deadline, order, seq, call) of waiting calls,
        # stale once started; the one chosen to start on a shared core, and that core.
        self._overdue: list[tuple[float, int, int, Call[T]]] = []
        self._chosen: tuple[Call[T], int] | None = None
        self.overdue_starts = 0

    @property
    def queued(self) -> int:
        return len(self._light) + len(self._heavy) - self._stale

    def admit(
        self,
        function: str,
        payload: T,
        received: float,
        order: int | None = None,
        *,
        group: Hashable | None = None,
        limit: int = 1,
    ) -> Call[T]:
        """Queue a call received at ``received``; its priority is fixed now.

        ``order`` is the call's receipt number (ties between equal priorities go to the
        smaller); without it, calls are numbered as they are admitted. ``limit`` > 1: up to
        that many calls of ``group`` may run at once in one container (:class:`Shared`)."""
        if limit < 1:
            raise ValueError("a call's concurrency limit must be >= 1")
        info = self.stats.arrive(function, received)
        self._seq = seq = self._seq + 1
        if order is None:
            order = seq
        priority = self._priority(info)
        call = Call(function, payload, info.received, priority, order)
        entry = (priority, order, seq, call)
        if limit > 1 and group is not None:
            call.group, call.limit = group, limit
            heapq.heappush(self._heavy, entry)  # its container holds a whole core
            g = self._groups.get(group)
            if g is None:
                g = self._groups[group] = _Group()
            heapq.heappush(g.heap, entry)
            g.waiting += 1
            if g.open:
                self._joinable[group] = g
            return call
        light = self.stats.share(function) <= self.cores_table.light_limit
        heapq.heappush(self._light if light else self._heavy, entry)
        if self.preemption is not None:
            due = self.preemption.deadline(info.received, self.stats.expected(function))
            if due is not None:
                self._push_overdue((due, order, seq, call))
        return call

    def _push_overdue(self, entry: tuple[float, int, int, Call[T]]) -> None:
        heap = self._overdue
        heapq.heappush(heap, entry)
        if len(heap) > 2 * self.queued + 64:  # bounded: drop the entries of started calls
            heap[:] = [e for e in heap if e[3].waiting]
            heapq.heapify(heap)

    def next_overdue(self) -> float | None:
        """When the next waiting call becomes overdue (None: none will), for a wake-up."""
        heap = self._overdue
        while heap and not heap[0][3].waiting:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _plan(
        self,
    ) -> tuple[list[tuple[float, int, int, Call[T]]], int | None, float, Shared | None] | None:
        """(heap, core, share, container to join) of the call that can start now, or None
        (also while a paused call could resume: it goes first)."""
        if self._chosen is not None:  # start() takes it, not the heap's top
            return self._overdue, self._chosen[1], self._chosen[0].share, None
        if self._paused and self._handing_over is None and self._can_resume() is not None:
            return None
        if self._joinable:
            g = next(iter(self._joinable.values()))  # its heap's top is live: see _refresh
            shared = g.open[0]
            return g.heap, shared.core, 0.0, shared
        light, heavy = self._light, self._heavy
        if self._stale:
            self._drop_stale(light)
            self._drop_stale(heavy)
        if not light:
            if not heavy:
                return None
            heap = heavy
        elif not heavy or light[0] < heavy[0]:
            heap = light
        else:
            heap = heavy
        if not self.policy.exclusive_cores:
            return heap, None, 1.0, None
        table = self.cores_table
        call = heap[0][3]
        share = SHARED_SHARE if call.group is not None else self.stats.share(call.function)
        core = table.place(share)
        if core is not None:
            return heap, core, share, None
        if heap is heavy and light:
            share = self.stats.share(light[0][3].function)
            if table.light(share):
                core = table.place(share, beside_heavy=True)
                if core is not None:
                    return light, core, share, None
        return None

    def _drop_stale(self, heap: list[tuple[float, int, int, Call[T]]]) -> None:
        while heap and not heap[0][3].waiting:
            heapq.heappop(heap)
            self._stale -= 1

    def peek(self) -> Call[T] | None:
        """The call that would start now, or None if none can (queue empty, or no core has
        room for it)."""
        if self._chosen is not None:
            return self._chosen[0]
        plan = self._plan()
        return plan[0][0][3] if plan else None

    def _head(self) -> Call[T] | None:
        """The first call of the queue in policy order (whether or not it can start)."""
        light, heavy = self._light, self._heavy
        if self._stale:
            self._drop_stale(light)
            self._drop_stale(heavy)
        tops = [h[0] for h in (light, heavy) if h]
        return min(tops)[3] if tops else None

    def joining(self) -> Shared | None:
        """The running container the call :meth:`peek` names would join, or None if it
        would start a container of its own."""
        plan = self._plan()
        return plan[3] if plan else None

    def can_start(self) -> bool:
        return self._plan() is not None

    def start(self, now: float) -> Call[T]:
        """Take the call :meth:`peek` names and place it on its core (None under the
        shared baseline), or into the container :meth:`joining` names. A call of a group
        that starts a container of its own opens a :class:`Shared` (``call.shared``) that
        the caller tags with its container (``handle``)."""
        plan = self._plan()
        if plan is None:
            raise RuntimeError("no call can start: queue empty or no core has room")
        heap, core, share, shared = plan
        if self._chosen is not None:  # an overdue call, onto the core it shares
            call, self._chosen = self._chosen[0], None
            self._stale += 1  # its entry in the main heaps
            call.shared_core = True
            self.overdue_starts += 1
        else:
            call = heapq.heappop(heap)[3]
        self._handing_over = None
        call.waiting = False
        call.started = call.resumed = now
        self.running += 1
        group = call.group
        if group is None:
            if core is not None:
                self.cores_table.take(core, call.function, share)
                if self.preemption is not None:
                    call.expected = self.stats.expected(call.function)
                    self._on_core.setdefault(call)
            call.core, call.share = core, share
            return call
        g = self._groups[group]
        g.waiting -= 1
        if shared is not None:  # joins a running container: nothing more to take
            self._stale += 1  # its entry in the main heaps
            shared.calls += 1
            if shared.calls >= shared.limit:
                g.open.remove(shared)
        else:
            if core is not None:
                self.cores_table.take(core, call.function, share)
            shared = Shared(group, call.function, call.limit, core, share, calls=1)
            g.open.append(shared)
        call.shared, call.core, call.share = shared, shared.core, 0.0
        self._refresh(group, g)
        return call

    def close(self, shared: Shared) -> None:
        """The container will take no more calls (it is going); those in it finish."""
        if shared.closed:
            return
        shared.closed = True
        g = self._groups.get(shared.group)
        if g is not None and shared in g.open:
            g.open.remove(shared)
            self._refresh(shared.group, g)

    def _refresh(self, group: Hashable, g: _Group) -> None:
        """Keep ``_joinable`` exact and forget a group with nothing waiting or open. Its
        heap's entries go stale only as its calls start, each start ends here, and the
        stale top is dropped: the top of a group's heap is always a waiting call."""
        heap = g.heap
        while heap and not heap[0][3].waiting:
            heapq.heappop(heap)
        if g.waiting and g.open:
            self._joinable[group] = g
            return
        self._joinable.pop(group, None)
        if not g.waiting and not g.open:
            del self._groups[group]

    def _leave(self, call: Call[T], shared: Shared) -> None:
        """A call left its shared container; the last one frees the core."""
        call.shared = None
        call.core = None
        shared.calls -= 1
        g = self._groups.get(shared.group)
        if shared.calls == 0:
            if g is not None and shared in g.open:
                g.open.remove(shared)
            shared.closed = True
            if shared.core is not None:
                self.cores_table.give(shared.core, shared.function, shared.share, None)
        elif not shared.closed and shared.calls == shared.limit - 1:  # it has room again
            if g is None:
                g = self._groups[shared.group] = _Group()
            g.open.append(shared)
        if g is not None:
            self._refresh(shared.group, g)

    # -- preemption --

    @property
    def paused(self) -> int:
        return len(self._paused)

    def _blocked_head_expected(self) -> float | None:
        """The E[p] of the head of the queue when it cannot start and taking a core from a
        running call could let it (not a call that joins a container of its group)."""
        if self._plan() is not None:
            return None  # the head can start without
        head = self._head()
        if head is None or head.group is not None:
            return None
        return self.stats.expected(head.function)

    def preemption_victim(
        self, now: float, pausable: Callable[[Call[T]], bool] = lambda call: True
    ) -> Call[T] | None:
        """The running call to pause so that the head of the queue can start, or None: the
        head cannot start now, and among the calls alone on their core (``pausable`` ones:
        the caller's say, e.g. that its /run is under way), the one expected to need the
        longest still needs more than the head's E[p] / ``ratio``, by more than the pause
        costs. None while ``max_paused`` calls are paused, or while a paused call could
        resume instead."""
        rule = self.preemption
        if rule is None or len(self._paused) >= rule.max_paused or self._can_resume():
            return None
        wanted = self._blocked_head_expected()
        if wanted is None:
            return None
        table = self.cores_table
        best: Call[T] | None = None
        best_left = 0.0
        for call in self._on_core:
            if call.core is None or table.calls[call.core] != 1:
                continue
            ran = call.ran(now)
            left = rule.remaining(call.expected, ran)
            slice_s = now - call.resumed if call.resumed is not None else 0.0
            better = left > best_left or (
                best is not None and left == best_left and call.seq < best.seq
            )
            if better and rule.sliced(call.pauses, slice_s) and pausable(call):
                best, best_left = call, left
        if best is None or best.pauses >= rule.max_pauses:
            return None
        return best if rule.outweighs(wanted, best_left, self.pause_cost_s) else None

    def pause(self, call: Call[T], now: float) -> None:
        """Take the running call off its core, for the head of the queue to :meth:`start`
        on it next (or, if the head cannot have it after all, :meth:`unpause`)."""
        if call not in self._on_core or call.core is None:
            raise RuntimeError("pause() of a call that does not hold a core alone")
        del self._on_core[call]
        if call.resumed is not None:
            call.ran_s += now - call.resumed
        call.resumed = None
        call.paused_at = now
        call.pauses += 1
        if call.overrun:
            self.cores_table.observe(call.core, call.share, call.overrun, call.share)
            call.overrun = 0.0
        self.cores_table.give(call.core, call.function, call.share, None)
        self._handing_over, self._handed_core = call, call.core
        call.core = None
        self._paused.append(call)
        self.preempted += 1

    def unpause(self, call: Call[T], now: float) -> None:
        """Undo the :meth:`pause` just made (the head could not start: no memory)."""
        if call is not self._handing_over:
            raise RuntimeError("unpause() of a call that is not the one just paused")
        self._handing_over = None
        self._paused.remove(call)
        self._put_on_core(call, now, self._handed_core)  # where its container still is
        call.pauses -= 1
        self.preempted -= 1

    def sharing_move(
        self, now: float, pausable: Callable[[Call[T]], bool] = lambda call: True
    ) -> tuple[Call[T], int] | None:
        """(call, core): instead of a pause, the running call to move onto ``core``, which
        another long call holds, so that the head of the queue can start on the core it
        leaves; or None. Long calls are the ``pausable`` ones on cores that hold nothing
        else, each expected to need enough longer than the head (the pause rule, without
        the pause's cost); the call moved is the one alone on its core expected to need
        the longest (the rule's victim), onto the core with the fewest of them."""
        rule = self.preemption
        if rule is None or rule.share_cores < 2 or self._paused:
            return None  # a paused call would take the core first
        wanted = self._blocked_head_expected()
        if wanted is None:
            return None
        table = self.cores_table
        long: dict[int, list[tuple[float, Call[T]]]] = {}
        for call in self._on_core:
            if call.core is None or not pausable(call):
                continue
            left = rule.remaining(call.expected, call.ran(now))
            if rule.outweighs(wanted, left, 0.0):
                long.setdefault(call.core, []).append((left, call))
        long = {core: calls for core, calls in long.items() if len(calls) == table.calls[core]}
        alone = [calls[0] for calls in long.values() if len(calls) == 1]
        if not alone:
            return None
        _, victim = max(alone, key=lambda e: (e[0], -e[1].seq))
        hosts = [
            core
            for core, calls in long.items()
            if core != victim.core and len(calls) < rule.share_cores
        ]
        if not hosts:
            return None
        return victim, min(hosts, key=lambda core: (len(long[core]), core))

    def spread_move(
        self, now: float, movable: Callable[[Call[T]], bool] = lambda call: True
    ) -> tuple[Call[T], int] | None:
        """(call, core): a call of the most crowded core (one holding more than its
        capacity: calls moved to share it) to move onto ``core``, which is idle; or None.
        A freed core goes back to calls sharing one before the queue: the head takes it
        from them only by the sharing rule (much shorter), as a paused call resumes first."""
        rule = self.preemption
        if rule is None or rule.share_cores < 2:
            return None
        table = self.cores_table
        idle = [core for core in table.ids if table.calls[core] == 0 and core not in table.full]
        limit = 1.0 + table.margin + 1e-9
        crowded = [core for core in table.ids if table.load[core] > limit]
        if not idle or not crowded:
            return None
        core = max(crowded, key=lambda c: (table.load[c], -c))
        calls = [c for c in self._on_core if c.core == core and movable(c)]
        if not calls:
            return None
        # The one expected to finish first gains most from a core of its own.
        call = min(calls, key=lambda c: (rule.remaining(c.expected, c.ran(now)), c.seq))
        return call, idle[0]

    def choose_overdue(
        self, now: float, pausable: Callable[[Call[T]], bool] = lambda call: True
    ) -> Call[T] | None:
        """The longest overdue waiting call (:meth:`Preemption.deadline` passed), made the
        one :meth:`start` takes next, onto a core it shares; or None. Its core holds only
        ``pausable`` calls, fewer than ``share_cores``, each expected to need at least as
        long as it (so it slows no call that would end sooner); the least crowded such
        core. :meth:`unchoose` takes the choice back (it could not start: no memory)."""
        rule = self.preemption
        due = self.next_overdue()
        if rule is None or due is None or due > now or self._plan() is not None:
            return None
        call = self._overdue[0][3]  # never of a group: admit() gives those no deadline
        wanted = self.stats.expected(call.function)
        table = self.cores_table
        longer: dict[int, int] = {}
        for running in self._on_core:
            core = running.core
            if core is None or not pausable(running):
                continue
            if rule.remaining(running.expected, running.ran(now)) >= wanted:
                longer[core] = longer.get(core, 0) + 1
        hosts = [
            core
            for core, n in longer.items()
            if n == table.calls[core] < rule.share_cores and core not in table.full
        ]
        if not hosts:
            return None
        core = min(hosts, key=lambda c: (longer[c], table.load[c], c))
        call.share = self.stats.share(call.function)
        self._chosen = (call, core)
        return call

    def unchoose(self) -> None:
        """Take back :meth:`choose_overdue`'s choice (the call stays queued)."""
        self._chosen = None

    def move(self, call: Call[T], core: int, *, undo: bool = False) -> int:
        """Put a running call (one that :meth:`sharing_move` or :meth:`spread_move` names)
        on ``core``; returns the core it left. ``undo``: taking back the move just made
        (the head could not start after all)."""
        old = call.core
        if call not in self._on_core or old is None:
            raise RuntimeError("move() of a call that does not hold a core")
        table = self.cores_table
        if call.overrun:
            table.observe(old, call.share, call.overrun, call.share)
            call.overrun = 0.0
        table.give(old, call.function, call.share, None)
        table.take(core, call.function, call.share)
        call.core = core
        call.shared_core = True
        self.moved += -1 if undo else 1
        return old

    def _can_resume(self) -> Call[T] | None:
        """The paused call to resume now (least remaining time first), if a core has room
        for it and, unless the rule resumes first, no waiting call is expected to be
        shorter than its remaining time."""
        rule = self.preemption
        if rule is None or not self._paused:
            return None
        table = self.cores_table
        paused = sorted(
            self._paused,
            key=lambda c: (rule.remaining(c.expected, c.ran_s), c.expected - c.ran_s, c.seq),
        )
        if not rule.resume_first:
            head = self._head()
            if head is not None and head.group is None:
                wanted = self.stats.expected(head.function)
                paused = [c for c in paused if rule.remaining(c.expected, c.ran_s) <= wanted]
        for call in paused:
            if table.place(call.share) is not None:
                return call
        return None

    def resume(self, now: float) -> Call[T] | None:
        """Put a paused call back on a core (returned; its container is to be resumed on
        ``call.core``), or None if none can resume now."""
        if not self._paused:
            return None
        call = self._can_resume()
        if call is None:
            return None
        self._paused.remove(call)
        self._put_on_core(call, now)
        return call

    def _put_on_core(self, call: Call[T], now: float, core: int | None = None) -> None:
        if core is None:
            core = self.cores_table.place(call.share)
        if core is None:
            raise RuntimeError("no core has room for the paused call")
        self.cores_table.take(core, call.function, call.share)
        call.core, call.resumed, call.paused_at = core, now, None
        self._on_core.setdefault(call)

    def observe_pause(self, seconds: float) -> None:
        """A pause and resume were measured to cost ``seconds``: the estimate follows."""
        self.pause_cost_s = 0.8 * self.pause_cost_s + 0.2 * max(0.0, seconds)

    def finish(
        self,
        call: Call[T],
        duration_s: float | None,
        cpu_s: float | None = None,
        waited_s: float = 0.0,
    ) -> None:
        """Release the call's core; the measured processing and CPU times feed E[p] and
        the function's CPU share (and the misprediction guard of :class:`Cores`);
        ``waited_s`` is how long the call waited for a CPU (its share is of the rest).
        A call that shared its container leaves it; its CPU time, which the container's
        other calls' is mixed with, is not taken in."""
        if call.started is None:
            raise RuntimeError("finish() of a call that was never started")
        call.started = None
        self.running -= 1
        if self.preemption is not None:
            self._on_core.pop(call, None)
            if call.paused_at is not None:  # ended while paused (shutdown): holds no core
                self._paused.remove(call)
                call.paused_at = None
                if self._handing_over is call:
                    self._handing_over = None
        if call.shared is not None:
            self._leave(call, call.shared)
            if duration_s is not None:
                self.stats.finish(call.function, duration_s)
            return
        if call.core is not None:
            if call.overrun:
                self.cores_table.observe(call.core, call.share, call.overrun, call.share)
                call.overrun = 0.0
            used = None
            own = (duration_s or 0.0) - max(0.0, waited_s)
            if cpu_s is not None and own > 0:
                used = min(1.0, cpu_s / own)
            self.cores_table.give(call.core, call.function, call.share, used)
            call.core = None
        if duration_s is not None:
            if call.shared_core:  # its E[p] is its time with a core of its own
                duration_s, waited_s = max(0.0, duration_s - max(0.0, waited_s)), 0.0
            self.stats.finish(call.function, duration_s, cpu_s, waited_s)

    def observe(self, call: Call[T], recent: float, overall: float) -> None:
        """A running call was sampled using ``recent`` of a core (0..1) since the previous
        sample and ``overall`` since it began. Its recent overrun, if any, counts on its
        core (:meth:`Cores.observe`); a call that has used more than its function's share
        plus the margin over its whole run so far raises the function's estimate at once,
        so its calls still waiting are placed by what it uses now, not after its long calls
        end (the whole run, not the last sample: a brief burst inside a call that mostly
        waits is no change of behaviour). Calls in a shared container are not sampled:
        its counters mix their CPU, and it holds a whole core anyway."""
        if call.started is None or call.core is None or call.shared is not None:
            return
        call.overrun = self.cores_table.observe(call.core, call.share, call.overrun, recent)
        if overall > call.share + self.cores_table.margin:
            self.stats.observed(call.function, overall)

    def waiting(self) -> list[Call[T]]:
        """The queued calls, in no particular order (a read-only snapshot)."""
        return [e[3] for heap in (self._light, self._heavy) for e in heap if e[3].waiting]

    def drain(self) -> list[Call[T]]:
        """Remove and return every queued call, in priority order (for shutdown)."""
        # (priority, order, seq) ends every comparison: ``seq`` is unique, as in the heaps.
        entries = sorted(e for e in self._light + self._heavy if e[3].waiting)
        calls = [e[3] for e in entries]
        for call in calls:
            call.waiting = False
        self._light.clear()
        self._heavy.clear()
        self._overdue.clear()
        self._chosen = None
        self._stale = 0
        self._joinable.clear()
        for group, g in list(self._groups.items()):
            g.heap.clear()
            g.waiting = 0
            if not g.open:
                del self._groups[group]
        return calls
