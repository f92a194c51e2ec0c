"""Response time and stretch of finished calls, per function, as fixed-bucket histograms:
what the console's scheduler view draws (the policies' effect is on these two figures).

Pure and bounded: a fixed list of bucket edges, one pair of histograms per function, at most
``max_functions`` functions (the least recently finished is forgotten first). Recording a
call is a dictionary lookup and two bisections, cheap enough for every call."""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

# Upper bounds (inclusive) of the buckets; one more bucket holds what is above the last.
RESPONSE_EDGES_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# Stretch R / p is 1 for a call that started at once and ran alone.
STRETCH_EDGES = (1.1, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0)


@dataclass(slots=True)
class _Function:
    response: list[int] = field(default_factory=lambda: [0] * (len(RESPONSE_EDGES_S) + 1))
    stretch: list[int] = field(default_factory=lambda: [0] * (len(STRETCH_EDGES) + 1))
    calls: int = 0
    response_sum_s: float = 0.0
    stretched: int = 0  # calls with a stretch (processing time > 0)
    stretch_sum: float = 0.0
    max_response_s: float = 0.0


class CallTimes:
    """Per-function histograms of response time ``R`` (receipt by the invoker to the end of
    the call) and stretch ``R / p`` (``p``: the call's processing time, its ``/run``)."""

    def __init__(self, max_functions: int = 200) -> None:
        if max_functions < 1:
            raise ValueError("max_functions must be >= 1")
        self.max_functions = max_functions
        self._functions: OrderedDict[str, _Function] = OrderedDict()
        self.forgotten = 0  # functions dropped to stay within max_functions

    def __len__(self) -> int:
        return len(self._functions)

    def observe(self, function: str, response_s: float, processing_s: float) -> None:
        """A call of ``function`` finished ``response_s`` after its receipt, having run for
        ``processing_s``; a call that did not run (``processing_s`` <= 0) has no stretch."""
        fn = self._functions.get(function)
        if fn is None:
            fn = self._functions[function] = _Function()
            if len(self._functions) > self.max_functions:
                self._functions.popitem(last=False)
                self.forgotten += 1
        else:
            self._functions.move_to_end(function)
        response_s = max(0.0, response_s)
        fn.calls += 1
        fn.response_sum_s += response_s
        fn.max_response_s = max(fn.max_response_s, response_s)
        fn.response[bisect.bisect_left(RESPONSE_EDGES_S, response_s)] += 1
        if processing_s > 0:
            stretch = max(1.0, response_s / processing_s)  # R >= p but for clock rounding
            fn.stretched += 1
            fn.stretch_sum += stretch
            fn.stretch[bisect.bisect_left(STRETCH_EDGES, stretch)] += 1

    def snapshot(self, limit: int | None = None) -> dict[str, dict[str, Any]]:
        """The histograms (bucket counts, edges in :data:`RESPONSE_EDGES_S` and
        :data:`STRETCH_EDGES`) and means of at most ``limit`` functions, the most recently
        finished first. A copy: nothing returned changes later."""
        out: dict[str, dict[str, Any]] = {}
        for name in reversed(self._functions):
            if limit is not None and len(out) >= limit:
                break
            fn = self._functions[name]
            out[name] = {
                "calls": fn.calls,
                "meanResponseS": fn.response_sum_s / fn.calls,
                "maxResponseS": fn.max_response_s,
                "meanStretch": fn.stretch_sum / fn.stretched if fn.stretched else None,
                "response": list(fn.response),
                "stretch": list(fn.stretch),
            }
        return out
