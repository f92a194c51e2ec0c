"""Attained-service ordering of the running calls' CPU: a Gittins index per call, from its
function's past durations and the service the call has had so far.

Pure (no I/O, no clock): :class:`DurationHistory` keeps, per function, a bounded window of
the last finished calls' own processing times (their time waiting for a CPU left out) and
answers the Gittins index of a call of that function that has run ``age`` seconds;
:func:`cpu_weights` turns the calls' ranks into cgroup-v2 ``cpu.weight`` values, which the
invoker's driver (:mod:`invoker.cpu_order`) writes and the kernel enforces.

Why Gittins: on one server, among the policies that do not know a call's own duration,
the Gittins index policy has the least mean response (Gittins; Aalto et al. 2009); with
the heavy-tailed durations of FaaS functions it runs a new call first (most end soon) and
demotes a call as it outlives its function's short calls, while a function whose calls
are all about equally long keeps its started call ahead of new ones (a FIFO where that is
better). With every call of one kind it is LAS on a decreasing-hazard distribution and
SRPT on a deterministic one.

Why weights in tiers rather than one per rank: the best-ranked calls get :data:`HIGH`
until the CPU they use fills the cores (each runs as if alone), the next as many get
:data:`MID` (they take what the first leave: a call waiting on I/O, a core with nothing
better) and the rest :data:`LOW`. Three values suffice for an almost strict priority of
the first tier over the rest, and a call's weight changes only when it crosses a tier,
so each re-ranking writes few cgroup files. CFS is not strict: a :data:`LOW` call still
gets its weight over the total of a core, which the simulator models.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

K = TypeVar("K")

HIGH, MID, LOW = 10_000, 100, 1  # cgroup v2 cpu.weight: 1..10000, default 100
AGE_GRID = 1.05  # indexes are computed at ages on a geometric grid (a 5 % step)
AGE_FLOOR_S = 0.001  # ages below this share the index at age 0
TAIL = 2.0  # hazard x age of a call past every sample of its function (gittins_index)
SLACK = 4.0  # gittins-aged: a call's deadline is its receipt + SLACK / its index
OVERDUE_SHARE = 0.25  # gittins-aged: the cores that calls past their deadline go first on
MIN_PART = 0.01  # gittins-aged: a part of a core worth giving a late call
KINDS = ("gittins", "gittins-aged", "las")


@dataclass(frozen=True, slots=True)
class Attained:
    """A policy's attained-service ordering: ``kind`` ``gittins`` (the index from the
    function's past durations), ``gittins-aged`` (the index, but calls past a virtual
    deadline first on a bounded share of the cores: :func:`aged_ranking`, with ``slack``
    and ``overdue_share``) or ``las`` (least attained service first, any function),
    re-ranked every ``quantum_s`` and at every start and end of a call."""

    kind: str = "gittins"
    quantum_s: float = 0.2
    slack: float = SLACK
    overdue_share: float | None = OVERDUE_SHARE  # None: every call by its deadline

    def __post_init__(self) -> None:
        share = self.overdue_share
        if (
            self.kind not in KINDS
            or self.quantum_s <= 0
            or self.slack <= 0
            or (share is not None and not 0 < share <= 1)
        ):
            raise ValueError(f"bad attained-service ordering {self}")


def gittins_index(sorted_durations: list[float], prefix: list[float], age: float) -> float:
    """The Gittins index of a call with these past durations (ascending, ``prefix`` their
    running sums from 0) that has run ``age``: the best, over the quanta Δ that end at a
    sample, of P(it ends within Δ | it ran ``age``) / E[time it uses of Δ | it ran
    ``age``]. Higher runs first.

    A call that has outrun every past call is where the history has no sample: it gets
    ``TAIL / age``, the hazard of a Pareto tail of shape ``TAIL`` at that age (the index of
    a decreasing hazard is its hazard). 2, not a heavy tail's 0.5: a window's longest
    duration is short of its function's longest by about one sample in the window, so a
    call just past it is more often near its end than deep in a tail (docs/policies.md,
    heavy tails, has the comparison)."""
    n = len(sorted_durations)
    first = bisect.bisect_right(sorted_durations, age)
    if first == n:
        return TAIL / max(age, AGE_FLOOR_S)
    best, base = 0.0, prefix[first]
    for i in range(first, n):  # every sample here is above ``age``: ``used`` > 0
        done = i - first + 1
        used = prefix[i + 1] - base - done * age + (n - i - 1) * (sorted_durations[i] - age)
        best = max(best, done / used)
    return best


def aged_deadline(received: float, index: float, slack: float) -> float:
    """A call's virtual deadline under ``gittins-aged``: its receipt time plus ``slack``
    times its Gittins rank (1 / index, about the service it still needs; 0 while nothing
    has finished). A call of a long function, or one that has outrun its function's short
    calls, gets a later deadline, but a fixed one while it gets no CPU: it cannot be
    passed by newer calls for ever."""
    return received + (0.0 if math.isinf(index) else slack / index)


class Aged(NamedTuple, Generic[K]):
    """A running call as ``gittins-aged`` ranks it."""

    key: K
    received: float
    gittins: float  # its Gittins index
    share: float = 1.0
    order: int = 0


def aged_ranking(
    calls: Iterable[Aged[K]], now: float, cores: int, slack: float, overdue_share: float | None
) -> tuple[list[tuple[K, float]], tuple[K, float] | None]:
    """``gittins-aged``'s order, best first, each call with its CPU share (for
    :func:`cpu_weights`): the calls past their deadline (:func:`aged_deadline`) first,
    earliest first, while they fit in ``overdue_share`` of the cores; then the rest by
    index, as ``gittins``. Second, the late call that fits only in part, with the part of a
    core left for it (:func:`partial_weight`), which is not in the order. ``overdue_share``
    None: every call by its deadline.

    Why: by the index alone, under sustained overload the whole backlog lands on the
    oldest calls of long functions, which new shorter calls keep passing (the p99 2.3-3.6x
    processor sharing's on the Azure slices). Deadlines bound how long newer calls pass a
    call, as FIFO does; by deadlines alone, though, once the overload has made every call
    late the order is about FIFO and the short calls wait too (the mean up to 1.65x the
    better baseline's with a slack of 4). A bounded share gives the late calls a
    guaranteed part of the CPU, the oldest deadline first, and leaves the short calls
    the rest: a cap on starvation, the Gittins order kept elsewhere. The part of a core is
    what makes this work on a small node, where a quarter of the cores is less than one
    call. (The deadline is an arrival time shifted by the call's rank, as in Boost
    scheduling, Yu and Scully 2024; the order depends on the wait, so it is not a SOAP
    policy.)"""
    listed = list(calls)
    deadline = [aged_deadline(c.received, c.gittins, slack) for c in listed]
    by_deadline = sorted(range(len(listed)), key=lambda i: (deadline[i], listed[i].order))
    if overdue_share is None:
        return [(listed[i].key, listed[i].share) for i in by_deadline], None
    first: list[int] = []
    partial: tuple[K, float] | None = None
    used, cap = 0.0, overdue_share * cores
    taken: set[int] = set()
    for i in by_deadline:
        if deadline[i] > now or cap - used < MIN_PART:
            break
        taken.add(i)
        if used + listed[i].share > cap + MIN_PART:
            partial = (listed[i].key, cap - used)
            break
        first.append(i)
        used += listed[i].share
    rest = sorted(
        (i for i in range(len(listed)) if i not in taken),
        key=lambda i: (-listed[i].gittins, listed[i].order),
    )
    return [(listed[i].key, listed[i].share) for i in first + rest], partial


def partial_weight(part: float) -> int:
    """The ``cpu.weight`` that gives a call ``part`` of a core it shares with one call of
    weight :data:`HIGH` (CFS divides a core by weight): at most :data:`HIGH`, half."""
    part = min(max(part, 0.0), 0.5)
    return max(1, round(HIGH * part / (1.0 - part)))


def aged_weights(
    calls: Iterable[Aged[K]], now: float, cores: int, slack: float, overdue_share: float | None
) -> dict[K, int]:
    """``gittins-aged``'s ``cpu.weight`` of each call: :func:`aged_ranking`'s order by
    :func:`cpu_weights`, and its partly fitting late call by :func:`partial_weight`."""
    ranked, partial = aged_ranking(calls, now, cores, slack, overdue_share)
    weights = cpu_weights(ranked, cores)
    if partial is not None:
        weights[partial[0]] = partial_weight(partial[1])
    return weights


@dataclass(slots=True)
class _Window:
    durations: deque[float]
    version: int = 0  # finished calls seen
    built: int = -1  # the version the sorted copy is of
    sorted: list[float] = field(default_factory=list)
    prefix: list[float] = field(default_factory=list)
    cache: dict[int, float] = field(default_factory=dict)


class DurationHistory:
    """The last ``samples`` own processing times per function (and of all functions
    together, the prior of a function with fewer than ``min_samples``), for at most
    ``max_functions`` functions (the least recently finished forgotten first).

    A window, not every sample: recent behaviour is what the next call will do, and the
    memory and the cost of an index stay bounded. Two samples are enough to use a
    function's own: the pooled window mixes every function's durations and ranks a call
    of a long function as any call, LAS-like, until its own history is there. The sorted
    copy an index is computed from is rebuilt once a sixteenth of the window is new (not at
    every end of a call), and the index is cached per step of a 5 % geometric grid of ages:
    a re-ranking of a hundred running calls is a hundred dictionary reads, not a hundred
    passes over a window."""

    def __init__(self, samples: int = 256, min_samples: int = 2, max_functions: int = 10_000):
        if samples < 1 or min_samples < 1 or max_functions < 1:
            raise ValueError("samples, min_samples and max_functions must be positive")
        self.samples = samples
        self.min_samples = min_samples
        self.max_functions = max_functions
        self._windows: OrderedDict[str, _Window] = OrderedDict()
        self._pooled = _Window(deque(maxlen=samples * 4))

    def __len__(self) -> int:
        return len(self._windows)

    def add(self, function: str, duration_s: float) -> None:
        """A call of the function finished after ``duration_s`` of its own processing."""
        w = self._windows.get(function)
        if w is None:
            w = self._windows[function] = _Window(deque(maxlen=self.samples))
            if len(self._windows) > self.max_functions:
                self._windows.popitem(last=False)
        else:
            self._windows.move_to_end(function)
        for window in (w, self._pooled):
            window.durations.append(max(0.0, duration_s))
            window.version += 1

    def samples_of(self, function: str) -> int:
        w = self._windows.get(function)
        return 0 if w is None else len(w.durations)

    def _ready(self, w: _Window) -> _Window:
        stale = w.version - w.built
        if w.built < 0 or stale * 16 >= len(w.durations):
            w.sorted = sorted(w.durations)
            w.prefix = [0.0, *itertools.accumulate(w.sorted)]
            w.built = w.version
            w.cache.clear()
        return w

    def index(self, function: str, age: float) -> float:
        """The Gittins index of a call of ``function`` that has run ``age`` seconds, from
        the function's window, or the pooled one while it has fewer than ``min_samples``
        (+inf while nothing at all has finished: every call is new alike)."""
        w = self._windows.get(function)
        if w is None or len(w.durations) < self.min_samples:
            w = self._pooled
            if not w.durations:
                return math.inf
        w = self._ready(w)
        step = -1 if age < AGE_FLOOR_S else int(math.log(age / AGE_FLOOR_S, AGE_GRID))
        value = w.cache.get(step)
        if value is None:
            at = 0.0 if step < 0 else AGE_FLOOR_S * AGE_GRID**step
            value = w.cache[step] = gittins_index(w.sorted, w.prefix, at)
        return value


def cpu_weights(ranked: Iterable[tuple[K, float]], cores: int) -> dict[K, int]:
    """The ``cpu.weight`` of each call, given best-ranked first with its CPU share (0..1,
    the cores it keeps busy): :data:`HIGH` while the calls ranked before it use less than
    ``cores``, then :data:`MID` while they use less than twice that, then :data:`LOW`. With
    CPU-bound calls, the first ``cores`` calls, the next ``cores`` and the rest; calls that
    mostly wait put more in the first tier, so that it still fills the cores."""
    weights, used = {}, 0.0
    for key, share in ranked:  # a measured share may fall short of 1 by a little
        weights[key] = HIGH if used < cores - 0.01 else MID if used < 2 * cores - 0.01 else LOW
        used += share
    return weights
