"""The node scheduler: one queue of calls in policy order over the node's :class:`Cores`,
which plans what starts next as a value (:mod:`invoker.scheduler.decisions`) and commits
it once the caller has the memory for it."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from typing import Generic

from invoker.scheduler import preemption as rules
from invoker.scheduler.calls import SHARED_SHARE, Call, Entry, Shared, T
from invoker.scheduler.cores import Cores
from invoker.scheduler.decisions import (
    LateStart,
    MoveThenStart,
    OverdueStart,
    PauseThenStart,
    Start,
)
from invoker.scheduler.groups import Groups
from invoker.scheduler.preemption import Pausable
from policies import FunctionStats, Policy
from policies.preemption import Preemption


def _any(call: Call[T]) -> bool:
    return True


class NodeScheduler(Generic[T]):
    """One queue of calls in policy order, drawing on a :class:`Cores` (which several
    queues of the node may share, e.g. CPU and GPU actions).

    The head of the queue starts on the best-fitting core. If it fits on none, it waits,
    and only a *light* call (expected share at most the margin: one that mostly waits) may
    pass it, and only onto a core that holds a heavier call, one the head could not get
    before that call ends anyway; so light calls never hold a core the head could have
    had, and the head's wait stays bounded. Calls that can join a running container of
    their group (:class:`Shared`) go first: they take nothing the head could use.

    :meth:`plan` says what starts next (a :class:`Start`, maybe after a move or a pause
    that gives the blocked head a core) and changes nothing; :meth:`commit` applies it.
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
        # Two heaps: calls expected to be light when admitted, and the others; the head of
        # the queue is the smaller of their tops.
        self._light: list[Entry] = []
        self._heavy: list[Entry] = []
        self._seq = 0
        self.running = 0
        # Intra-container concurrency, and the entries of the two heaps whose call started
        # from its group's heap or the overdue one.
        self._groups = Groups()
        self._stale = 0
        # Preemption (None: off): the calls on cores that may be paused, and those paused.
        # ``_on_core`` is a dict used as a set for its order, that of the calls' starts and
        # resumes: the searches over it meet the calls in an order every run repeats (a
        # set's follows their ids, i.e. memory addresses).
        self.preemption = preemption if policy.exclusive_cores else None
        self.pause_cost_s = preemption.pause_cost_s if preemption else 0.0
        self._on_core: dict[Call[T], None] = {}
        self._paused: list[Call[T]] = []
        self.preempted = 0  # pauses so far
        self.moved = 0  # calls moved to share a core, and back to an idle one
        # Overdue calls (Preemption.overdue): entries keyed by deadline, stale once started.
        self._overdue: list[Entry] = []
        self.overdue_starts = 0
        # Late calls (Policy.late, calls sharing the CPU): entries keyed by deadline, stale
        # once started; the running calls started late.
        self._late: list[Entry] = []
        self.running_late = 0
        self.late_starts = 0

    @property
    def queued(self) -> int:
        return len(self._light) + len(self._heavy) - self._stale

    @property
    def paused(self) -> int:
        return len(self._paused)

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
        # Entry(...) without its Python-level __new__: a fifth of a µs less per call.
        entry = tuple.__new__(Entry, (priority, order, seq, call))
        if limit > 1 and group is not None:
            call.group, call.limit = group, limit
            heapq.heappush(self._heavy, entry)  # its container holds a whole core
            self._groups.admit(entry)
            return call
        light = self.stats.share(function) <= self.cores_table.light_limit
        heapq.heappush(self._light if light else self._heavy, entry)
        if self.policy.late is not None and not self.policy.exclusive_cores:
            late = tuple.__new__(Entry, (self.policy.late(info), order, seq, call))
            self._push_bounded(self._late, late)
        if self.preemption is not None:
            due = self.preemption.deadline(info.received, self.stats.expected(function))
            if due is not None:
                self._push_bounded(self._overdue, tuple.__new__(Entry, (due, order, seq, call)))
        return call

    def _push_bounded(self, heap: list[Entry], entry: Entry) -> None:
        """Push onto a heap by deadline, whose entries go stale once their call starts."""
        heapq.heappush(heap, entry)
        if len(heap) > 2 * self.queued + 64:  # bounded: drop the entries of started calls
            heap[:] = [e for e in heap if e.call.waiting]
            heapq.heapify(heap)

    def next_overdue(self) -> float | None:
        """When the next waiting call becomes overdue (None: none will), for a wake-up."""
        heap = self._overdue
        while heap and not heap[0].call.waiting:
            heapq.heappop(heap)
        return heap[0].key if heap else None

    # -- planning: what starts next, as a value --

    def plan(self, now: float, pausable: Pausable = _any) -> Start | None:
        """What starts next, or None; changes nothing. A call that can start does; else,
        under preemption, a long call moves to share another's core (:meth:`sharing_move`)
        or is paused (:meth:`preemption_victim`) so that the head starts on its core, or
        an overdue call starts beside longer calls. ``pausable``: the caller's say on which
        running calls may be paused or moved (e.g. that their /run is under way)."""
        start = self._start_plan(now)
        if start is not None or self.preemption is None:
            return start
        # A move or pause empties the core of a call alone on it, and the head (the call
        # they are for, of no group: it fits on no core now) then fits there and nowhere
        # else: shares are at most 1, and every other core is as full or fuller than now.
        moved = self.sharing_move(now, pausable)
        if moved is not None:
            call, to = moved
            head, share = self._blocked_head()
            return MoveThenStart(head, call.core, share, moved=call, to=to)
        victim = self.preemption_victim(now, pausable)
        if victim is not None:
            head, share = self._blocked_head()
            return PauseThenStart(head, victim.core, share, victim=victim)
        return self._overdue_plan(now, pausable)

    def _blocked_head(self) -> tuple[Call[T], float]:
        """The head of the queue, which a move or pause is for, and its expected share."""
        head = self._head()
        assert head is not None
        return head, self.stats.share(head.function)

    def _start_plan(self, now: float | None = None) -> Start | None:
        """The call that can start now as things are, and where: one that joins a container
        of its group, else the head of the queue, else a light call that passes it onto a
        core beside a heavier call; or None (also while a paused call could resume: it goes
        first). At ``now``, a late call may start ahead of the head (:meth:`_late_plan`)."""
        if self._paused and self._can_resume() is not None:
            return None
        if self._groups.joinable:
            call, shared = self._groups.first_join()
            return Start(call, shared.core, 0.0, shared)
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
        call = heap[0].call
        if not self.policy.exclusive_cores:
            return self._late_plan(now, call) or Start(call, None, 1.0)
        table = self.cores_table
        share = SHARED_SHARE if call.group is not None else self.stats.share(call.function)
        core = table.place(share)
        if core is not None:
            return Start(call, core, share)
        if heap is heavy and light:
            call = light[0].call
            share = self.stats.share(call.function)
            if table.light(share):
                core = table.place(share, beside_heavy=True)
                if core is not None:
                    return Start(call, core, share)
        return None

    def _overdue_plan(self, now: float, pausable: Pausable) -> OverdueStart | None:
        """The longest overdue waiting call (:meth:`Preemption.deadline` passed), onto a
        core it shares (:func:`rules.overdue_host`), or None."""
        rule = self.preemption
        due = self.next_overdue()
        if rule is None or due is None or due > now:
            return None
        call = self._overdue[0].call  # never of a group: admit() gives those no deadline
        wanted = self.stats.expected(call.function)
        core = rules.overdue_host(rule, self.cores_table, self._on_core, now, wanted, pausable)
        if core is None:
            return None
        return OverdueStart(call, core, self.stats.share(call.function))

    def _late_plan(self, now: float | None, head: Call[T]) -> LateStart | None:
        """The waiting call longest past its deadline (:attr:`Policy.late`), if it is not
        the head and the calls started late are fewer than the policy's share of the
        running ones with it; else None."""
        heap = self._late
        if now is None or not heap:
            return None
        while heap and not heap[0].call.waiting:
            heapq.heappop(heap)
        if not heap or heap[0].key > now or heap[0].call is head:
            return None
        if self.running_late + 1 > self.policy.late_share * (self.running + 1):
            return None
        return LateStart(heap[0].call, None, 1.0)

    def _drop_stale(self, heap: list[Entry]) -> None:
        while heap and not heap[0].call.waiting:
            heapq.heappop(heap)
            self._stale -= 1

    def peek(self) -> Call[T] | None:
        """The call that would start now without preemption, or None if none can (queue
        empty, or no core has room for it)."""
        start = self._start_plan()
        return start.call if start else None

    def _head(self) -> Call[T] | None:
        """The first call of the queue in policy order (whether or not it can start)."""
        light, heavy = self._light, self._heavy
        if self._stale:
            self._drop_stale(light)
            self._drop_stale(heavy)
        tops = [h[0] for h in (light, heavy) if h]
        return min(tops).call if tops else None

    # -- committing a plan --

    def start(self, now: float) -> Call[T]:
        """Start the call :meth:`peek` names (no preemption): :meth:`commit` of that plan."""
        start = self._start_plan()
        if start is None:
            raise RuntimeError("no call can start: queue empty or no core has room")
        return self._start(start, now)

    def commit(self, decision: Start, now: float) -> Call[T]:
        """Apply what :meth:`plan` just returned (nothing changed since): make its move or
        pause, then start its call on its core (None under the shared baseline), or in the
        container it joins. A call of a group that starts a container of its own opens a
        :class:`Shared` (``call.shared``) that the caller tags with its container
        (``handle``). Returns the call started."""
        if isinstance(decision, MoveThenStart):
            self.move(decision.moved, decision.to)
        elif isinstance(decision, PauseThenStart):
            self.pause(decision.victim, now)
        return self._start(decision, now)

    def _start(self, decision: Start, now: float) -> Call[T]:
        call, core, share, joins = decision.call, decision.core, decision.share, decision.joins
        if not call.waiting:
            raise RuntimeError("commit() of a call that is not waiting: a stale plan")
        if isinstance(decision, OverdueStart):  # its heap entries go stale
            self._stale += 1
            call.shared_core = True
            self.overdue_starts += 1
        elif isinstance(decision, LateStart):
            self._stale += 1
            call.late = True
            self.running_late += 1
            self.late_starts += 1
        elif joins is not None:  # taken off its group's heap: its main entry goes stale
            self._stale += 1
        else:
            light = self._light
            heapq.heappop(light if light and light[0].call is call else self._heavy)
        call.waiting = False
        call.started = call.resumed = now
        self.running += 1
        if call.group is None:
            if core is not None:
                self.cores_table.take(core, call.function, share)
                if self.preemption is not None:
                    call.expected = self.stats.expected(call.function)
                    self._on_core.setdefault(call)
            call.core, call.share = core, share
            return call
        if joins is None and core is not None:
            self.cores_table.take(core, call.function, share)
        shared = self._groups.start(call, joins, core, share)
        call.shared, call.core, call.share = shared, shared.core, 0.0
        return call

    def close(self, shared: Shared) -> None:
        """The container will take no more calls (it is going); those in it finish."""
        self._groups.close(shared)

    # -- preemption --

    def _blocked_head_expected(self) -> float | None:
        """The E[p] of the head of the queue when it cannot start and taking a core from a
        running call could let it (not a call that joins a container of its group)."""
        if self._start_plan() is not None:
            return None  # the head can start without
        head = self._head()
        if head is None or head.group is not None:
            return None
        return self.stats.expected(head.function)

    def preemption_victim(self, now: float, pausable: Pausable = _any) -> Call[T] | None:
        """The running call to pause so that the blocked head of the queue can start
        (:func:`rules.victim`), or None; None while ``max_paused`` calls are paused, or
        while a paused call could resume instead."""
        rule = self.preemption
        if rule is None or len(self._paused) >= rule.max_paused or self._can_resume():
            return None
        wanted = self._blocked_head_expected()
        if wanted is None:
            return None
        table, cost = self.cores_table, self.pause_cost_s
        return rules.victim(rule, table, self._on_core, now, wanted, cost, pausable)

    def sharing_move(self, now: float, pausable: Pausable = _any) -> tuple[Call[T], int] | None:
        """(call, core): instead of a pause, the running call to move onto ``core``, which
        another long call holds, so that the blocked head can start on the core it leaves
        (:func:`rules.sharing_move`); or None. Only with ``share_cores`` > 1 and nothing
        paused (a paused call would take the core first)."""
        rule = self.preemption
        if rule is None or rule.share_cores < 2 or self._paused:
            return None
        wanted = self._blocked_head_expected()
        if wanted is None:
            return None
        return rules.sharing_move(rule, self.cores_table, self._on_core, now, wanted, pausable)

    def spread_move(self, now: float, movable: Pausable = _any) -> tuple[Call[T], int] | None:
        """(call, core): a call of the most crowded core to move onto ``core``, which is
        idle (:func:`rules.spread_move`); or None. A freed core goes back to calls sharing
        one before the queue: the head takes it from them only by the sharing rule (much
        shorter), as a paused call resumes first."""
        rule = self.preemption
        if rule is None or rule.share_cores < 2:
            return None
        return rules.spread_move(rule, self.cores_table, self._on_core, now, movable)

    def pause(self, call: Call[T], now: float) -> None:
        """Take the running call off its core (:meth:`commit` of a :class:`PauseThenStart`
        gives that core to the head); it resumes by :meth:`resume`."""
        core = call.core
        if call not in self._on_core or core is None:
            raise RuntimeError("pause() of a call that does not hold a core alone")
        del self._on_core[call]
        if call.resumed is not None:
            call.ran_s += now - call.resumed
        call.resumed = None
        call.paused_at = now
        call.pauses += 1
        self.cores_table.release(core, call.function, call.share, call.overrun)
        call.overrun = 0.0
        call.core = None
        self._paused.append(call)
        self.preempted += 1

    def move(self, call: Call[T], core: int) -> int:
        """Put a running call (one that :meth:`sharing_move` or :meth:`spread_move` names)
        on ``core``; returns the core it left."""
        old = call.core
        if call not in self._on_core or old is None:
            raise RuntimeError("move() of a call that does not hold a core")
        table = self.cores_table
        table.release(old, call.function, call.share, call.overrun)
        call.overrun = 0.0
        table.take(core, call.function, call.share)
        call.core = core
        call.shared_core = True
        self.moved += 1
        return old

    def _can_resume(self) -> tuple[Call[T], int] | None:
        """(call, core): the paused call to resume now (:func:`rules.resumable`) and where;
        unless the rule resumes first, none expected to need longer than the head."""
        rule = self.preemption
        if rule is None or not self._paused:
            return None
        wanted = None
        if not rule.resume_first:
            head = self._head()
            if head is not None and head.group is None:
                wanted = self.stats.expected(head.function)
        return rules.resumable(rule, self.cores_table, self._paused, wanted)

    def resume(self, now: float) -> Call[T] | None:
        """Put a paused call back on a core (returned; its container is to be resumed on
        ``call.core``), or None if none can resume now."""
        resumable = self._can_resume()
        if resumable is None:
            return None
        call, core = resumable
        self._paused.remove(call)
        self.cores_table.take(core, call.function, call.share)
        call.core, call.resumed, call.paused_at = core, now, None
        self._on_core.setdefault(call)
        return call

    def observe_pause(self, seconds: float) -> None:
        """A pause and resume were measured to cost ``seconds``: the estimate follows."""
        self.pause_cost_s = 0.8 * self.pause_cost_s + 0.2 * max(0.0, seconds)

    # -- running calls --

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
        if call.late:
            self.running_late -= 1
        if self.preemption is not None:
            self._on_core.pop(call, None)
            if call.paused_at is not None:  # ended while paused (shutdown): holds no core
                self._paused.remove(call)
                call.paused_at = None
        shared = call.shared
        if shared is not None:
            if self._groups.leave(call, shared) and shared.core is not None:
                self.cores_table.give(shared.core, shared.function, shared.share, None)
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

    def upcoming(self, n: int) -> list[Call[T]]:
        """The first ``n`` queued calls in policy order: those that start next, as far as
        the queue alone decides (where they fit is the cores' business)."""
        entries = (e for heap in (self._light, self._heavy) for e in heap if e.call.waiting)
        return [e.call for e in heapq.nsmallest(n, entries)]

    def waiting(self) -> list[Call[T]]:
        """The queued calls, in no particular order (a read-only snapshot)."""
        return [e.call for heap in (self._light, self._heavy) for e in heap if e.call.waiting]

    def drain(self) -> list[Call[T]]:
        """Remove and return every queued call, in priority order (for shutdown)."""
        # (key, order, seq) ends every comparison: ``seq`` is unique, as in the heaps.
        entries = sorted(e for e in self._light + self._heavy if e.call.waiting)
        calls = [e.call for e in entries]
        for call in calls:
            call.waiting = False
        self._light.clear()
        self._heavy.clear()
        self._overdue.clear()
        self._late.clear()
        self._stale = 0
        self._groups.drain()
        return calls
