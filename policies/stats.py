"""What the node learns about each function: recent durations and recent arrivals.

Pure and bounded: at most ``history`` durations and the arrivals of the last ``window_s``
seconds per function, and at most ``max_functions`` functions (least recently seen are
forgotten first).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from policies.base import CallInfo


@dataclass(slots=True)
class _Function:
    durations: deque[float]
    total: float = 0.0
    last_received: float | None = None
    arrivals: deque[float] = field(default_factory=deque)

    @property
    def known(self) -> bool:
        return bool(self.durations)

    @property
    def mean(self) -> float:
        return self.total / len(self.durations)


class FunctionStats:
    """Per-function statistics for the policies.

    ``E[p]`` is the mean of the last ``history`` (10) finished calls. A function with no
    finished call yet gets the *node-wide prior*: the mean of the estimates of all functions
    the node knows (0.0 while it knows none). The prior neither favours nor penalises a new
    function, and the first finished call replaces it.

    Time only moves forward here: a ``now`` earlier than one already seen (a clock jump
    backwards) is treated as the latest time seen, so decisions stay deterministic.
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
            fn = _Function(deque(maxlen=self.history))
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

    def arrive(self, function: str, now: float) -> CallInfo:
        """Record a received call and return what its priority may depend on."""
        if now < self._latest:
            now = self._latest
        self._latest = now
        fn = self._functions.get(function)
        if fn is None:
            fn = self._get(function)
        else:
            self._functions.move_to_end(function)
        previous = fn.last_received
        if previous is None:
            previous = now
        fn.last_received = now
        arrivals = fn.arrivals
        arrivals.append(now)
        horizon = now - self.window_s
        while arrivals[0] <= horizon:
            arrivals.popleft()
        durations = fn.durations
        expected = fn.total / len(durations) if durations else self.prior()
        return CallInfo(now, expected, previous, len(arrivals))

    def finish(self, function: str, duration_s: float) -> None:
        """Record the processing time of a finished call."""
        duration_s = max(0.0, duration_s)
        fn = self._get(function)
        if fn.known:
            self._sum_of_means -= fn.mean
        else:
            self._known += 1
        fn.durations.append(duration_s)
        fn.total = sum(fn.durations)  # at most `history` terms; no drift over long uptimes
        self._sum_of_means += fn.mean

    def snapshot(self) -> dict[str, dict[str, float | int]]:
        """Per-function estimates, for the admin endpoint and reports."""
        return {
            name: {
                "expected_s": fn.mean if fn.known else self.prior(),
                "samples": len(fn.durations),
                "recent_calls": len(fn.arrivals),
            }
            for name, fn in self._functions.items()
        }
