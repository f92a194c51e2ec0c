"""What a scheduling policy is: a name and one pure function from what the node knows about
a call at the moment it is received to a sortable priority (smaller runs first)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from policies.attained import Attained
from policies.preemption import Preemption


class CallInfo(NamedTuple):
    """Everything a policy may read, fixed when the invoker receives the call.

    - ``received``: r'(i), when the invoker received the call (monotonic seconds).
    - ``expected``: E[p(i)], mean processing time of the function's last finished calls.
    - ``previous_received``: r̄(i), when the previous call of the same function was received
      (equals ``received`` for a function's first call).
    - ``recent_calls``: #(f(i), -T), calls of the function received in the last T seconds,
      this one included.
    - ``function``: f(i), the function's name (what a policy with a history of its own
      looks the function up by).
    """

    received: float
    expected: float
    previous_received: float
    recent_calls: int
    function: str = ""


@dataclass(frozen=True, slots=True)
class Policy:
    """A named queue order.

    ``exclusive_cores`` is True for the paper's policies (each running call holds one core,
    never more calls than cores) and False for the stock OpenWhisk baseline, whose calls
    share the CPU and are limited by memory only. ``preemption``: the policy's own rule
    for pausing running calls (None: only with ``--preempt``, by its default rule).
    ``attained``: the running calls' CPU is ordered by the service they have attained
    (:mod:`policies.attained`; the invoker weights their containers), not only the queue.
    ``late`` (calls sharing the CPU only): each waiting call's deadline, fixed when it is
    received; once it has passed, the call starts ahead of the queue while the calls so
    started are fewer than ``late_share`` of the running ones (a bounded share for the
    calls an order by priority alone would leave waiting for ever).
    """

    name: str
    priority: Callable[[CallInfo], float]
    exclusive_cores: bool = True
    description: str = ""
    preemption: Preemption | None = None
    attained: Attained | None = None
    late: Callable[[CallInfo], float] | None = None
    late_share: float = 1.0
