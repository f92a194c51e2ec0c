"""The action cores as CPU capacity, shared by every queue of the node."""

from __future__ import annotations

from collections.abc import Sequence


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

    def release(self, core: int, function: str, share: float, overrun: float) -> None:
        """A running call left the core to be paused or moved: its measured ``overrun``
        stops counting, and no measurement of its use is taken in."""
        if overrun:
            self.observe(core, share, overrun, share)
        self.give(core, function, share, None)

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
