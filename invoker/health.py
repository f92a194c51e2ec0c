"""The node's honest view of whether it can work, and the deadline rule that follows from it.

Parts of the invoker report *conditions* (its tasks, creating containers, handing messages to
Kafka); the node is healthy while none has a problem, and only then pings ``health``. Pure
logic with the time passed in.

Deadline rule (apache/openwhisk#5053): a stock ``ActivationMessage`` carries no deadline, but
its ``transid`` carries the time the controller accepted the call. A call is *expired* (answered
with an error instead of being started) when the node was in an *outage* at some moment since
then (not running yet, or unable to run calls: its tasks or its containers failing) and more
than the action's time limit plus :data:`EXPIRY_GRACE_S` has passed. By then the controller has
answered a blocking caller with 202 (it waits the time limit plus one minute), so starting the
call only adds to the storm of containers on recovery. A node that was able to run calls all
along runs every call however long it queued (overload is the scheduler's business), and so do
the controller's own health test actions (``sid_`` ids). Kafka being away is no outage here:
queued calls can still run (their acks wait), and a slow ping under load must not expire the
long queues of an overloaded node.
"""

from __future__ import annotations

from whisk.clock import Clock

EXPIRY_GRACE_S = 60.0
OUTAGE = frozenset({"tasks", "containers"})  # conditions under which calls cannot run


class NodeHealth:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._problems: dict[str, str] = {}
        # The node served nothing before it started: calls older than this count as waiting
        # through an outage.
        self.last_outage_ms = clock.epoch_ms()

    def report(self, condition: str, problem: str | None) -> bool:
        """Record a condition's problem (None: fine). Returns whether it changed."""
        old = self._problems.get(condition)
        if problem is None:
            gone = self._problems.pop(condition, None) is not None
            if gone and condition in OUTAGE and not self.in_outage:
                self.last_outage_ms = self.clock.epoch_ms()  # (maybe) the end of an outage
        else:
            self._problems[condition] = problem
        return old != problem

    @property
    def healthy(self) -> bool:
        return not self._problems

    @property
    def in_outage(self) -> bool:
        return any(c in OUTAGE for c in self._problems)

    @property
    def problems(self) -> dict[str, str]:
        return dict(self._problems)

    def expired(self, transid: object, start_ms: int, timeout_ms: int) -> bool:
        """Whether a call accepted by the controller at ``start_ms`` (epoch milliseconds)
        must not be started any more (see the module docstring)."""
        if isinstance(transid, list) and transid and str(transid[0]).startswith("sid_"):
            return False
        now_ms = self.clock.epoch_ms()
        last_outage = now_ms if self.in_outage else self.last_outage_ms
        waited_through_outage = start_ms <= last_outage
        return waited_through_outage and now_ms - start_ms > timeout_ms + EXPIRY_GRACE_S * 1000
