"""What the node learns about each function: recent durations, CPU times and arrivals.

Pure and bounded: at most ``history`` durations (and as many CPU-time samples) and the
arrivals of the last ``window_s`` seconds per function, and at most ``max_functions``
functions (least recently seen are forgotten first).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from policies.base import CallInfo


@dataclass(slots=True)
class _Function:
    durations: deque[float]
    total: float = 0.0
    last_received: float | None = None
    arrivals: deque[float] = field(default_factory=deque)
    # (CPU seconds, processing seconds less CPU wait) of the last calls whose CPU was measured
    cpu: deque[tuple[float, float]] = field(default_factory=deque)
    share: float = 1.0  # measured CPU share of those calls (0..1); 1.0 until one is measured

    @property
    def known(self) -> bool:
        return bool(self.durations)

    @property
    def mean(self) -> float:
        return self.total / len(self.durations)

    def add_cpu(self, cpu_s: float, own_s: float) -> None:
        self.cpu.append((cpu_s, own_s))
        wall = sum(d for _, d in self.cpu)  # at most `history` terms
        if wall > 0:
            self.share = min(1.0, sum(c for c, _ in self.cpu) / wall)


class FunctionStats:
    """Per-function statistics for the policies.

    ``E[p]`` is the mean of the last ``history`` (10) finished calls. A function with no
    finished call yet gets the *node-wide prior*: the mean of the estimates of all functions
    the node knows (0.0 while it knows none). The prior neither favours nor penalises a new
    function, and the first finished call replaces it.

    ``share`` is the function's expected CPU share, E[cpu] / E[p] over its last ``history``
    calls whose CPU time was measured (their time waiting for a CPU left out of ``p``): about
    1 for a CPU-bound function, about 0 for one that mostly waits; 1.0 (a full core) until
    one is measured.

    A call keeps the receipt time it is given, even when it is admitted after a later one
    (its action fetch was slow): its priority and place depend on when it arrived, never on
    when it was admitted. The window of recent arrivals is kept sorted.
    """

    def __init__(self, history: int = 10, window_s: float = 60.0, max_functions: int = 10_000):
        if history < 1 or window_s <= 0 or max_functions < 1:
            raise ValueError("history, window_s and max_functions must be positive")
        self.history = history
        self.window_s = window_s
        self.max_functions = max_functions
        self._functions: OrderedDict[str, _Function] = OrderedDict()
        self._latest = float("-inf")
        self._sum_of_means = 0.0
        self._known = 0

    def __len__(self) -> int:
        return len(self._functions)

    def _get(self, function: str) -> _Function:
        fn = self._functions.get(function)
        if fn is None:
            fn = _Function(deque(maxlen=self.history), cpu=deque(maxlen=self.history))
            self._functions[function] = fn
            if len(self._functions) > self.max_functions:
                _, evicted = self._functions.popitem(last=False)
                if evicted.known:
                    self._sum_of_means -= evicted.mean
                    self._known -= 1
        else:
            self._functions.move_to_end(function)
        return fn

    def prior(self) -> float:
        return self._sum_of_means / self._known if self._known else 0.0

    def expected(self, function: str) -> float:
        fn = self._functions.get(function)
        return fn.mean if fn is not None and fn.known else self.prior()

    def share(self, function: str) -> float:
        fn = self._functions.get(function)
        return 1.0 if fn is None else fn.share

    def observed(self, function: str, share: float) -> None:
        """A running call of the function was sampled using ``share`` of a core: the
        estimate rises to it at once (never falls: finished calls' measurements do that)."""
        fn = self._functions.get(function)
        if fn is not None and share > fn.share:
            fn.share = min(1.0, share)

    def arrive(self, function: str, received: float) -> CallInfo:
        """Record a call received at ``received`` and return what its priority may depend on.

        Calls may come in out of receipt order (a slow action fetch); each keeps its own
        receipt time. The window ends at the latest receipt seen."""
        latest = self._latest
        if received > latest:
            self._latest = latest = received
        fn = self._get(function)
        previous = fn.last_received
        if previous is None or previous > received:  # first call, or received out of order
            previous = received
        if fn.last_received is None or received > fn.last_received:
            fn.last_received = received
        arrivals = fn.arrivals
        if not arrivals or received >= arrivals[-1]:
            arrivals.append(received)
        else:
            bisect.insort(arrivals, received)
        horizon = latest - self.window_s
        while arrivals and arrivals[0] <= horizon:
            arrivals.popleft()
        durations = fn.durations
        expected = fn.total / len(durations) if durations else self.prior()
        return CallInfo(received, expected, previous, len(arrivals) or 1, function)

    def finish(
        self, function: str, duration_s: float, cpu_s: float | None = None, waited_s: float = 0.0
    ) -> None:
        """Record the processing time of a finished call, and its CPU time if measured
        (``waited_s``: how long of it the call waited for a CPU; its share is of the rest)."""
        duration_s = max(0.0, duration_s)
        fn = self._get(function)
        if fn.known:
            self._sum_of_means -= fn.mean
        else:
            self._known += 1
        fn.durations.append(duration_s)
        fn.total = sum(fn.durations)  # at most `history` terms; no drift over long uptimes
        self._sum_of_means += fn.mean
        if cpu_s is not None:
            fn.add_cpu(max(0.0, cpu_s), max(0.0, duration_s - max(0.0, waited_s)))

    def snapshot(self) -> dict[str, dict[str, float | int]]:
        """Per-function estimates, for the admin endpoint and reports."""
        return {
            name: {
                "expected_s": fn.mean if fn.known else self.prior(),
                "samples": len(fn.durations),
                "recent_calls": len(fn.arrivals),
                "cpu_share": self.share(name),
                "cpu_samples": len(fn.cpu),
            }
            for name, fn in self._functions.items()
        }
