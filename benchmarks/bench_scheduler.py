"""Cost of the node scheduler itself: enqueue + dequeue per call at 10, 10 000 and 100 000
pending calls, for every policy.

For each size the queue is first filled to N pending calls; then each measured operation
admits one call and starts (dequeues) one, so the queue stays at N. The baseline printed
beside each figure is the same admit/start cycle on a plain ``collections.deque`` FIFO
(no priorities, no statistics), measured in the same run.

    python benchmarks/bench_scheduler.py [--ops 200000]
"""

from __future__ import annotations

import argparse
import random
import time
from collections import deque

from invoker.scheduler import NodeScheduler
from policies import POLICY_NAMES, FunctionStats, get_policy

SIZES = (10, 10_000, 100_000)
FUNCTIONS = [f"fn{i}" for i in range(50)]


def bench_policy(name: str, pending: int, ops: int, seed: int = 1) -> float:
    rng = random.Random(seed)
    stats = FunctionStats()
    for fn in FUNCTIONS:  # every function has a learnt E[p]
        for _ in range(10):
            stats.finish(fn, rng.uniform(0.01, 5.0))
    sched: NodeScheduler[int] = NodeScheduler(get_policy(name), cores=[0], stats=stats)
    now = 0.0
    for i in range(pending):
        now += 0.0001
        sched.admit(rng.choice(FUNCTIONS), i, now)
    names = [rng.choice(FUNCTIONS) for _ in range(ops)]
    start = time.perf_counter()
    for i, fn in enumerate(names):
        now += 0.0001
        sched.admit(fn, i, now)
        call = sched.start(now)
        sched.finish(call, None)
    return (time.perf_counter() - start) / ops


def bench_deque(pending: int, ops: int) -> float:
    q: deque[int] = deque(range(pending))
    start = time.perf_counter()
    for i in range(ops):
        q.append(i)
        q.popleft()
    return (time.perf_counter() - start) / ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200_000, help="measured operations per cell")
    args = parser.parse_args()
    print(f"enqueue+dequeue per call (µs), {args.ops} operations per cell; goal <= 5 µs")
    print(f"{'policy':<10}" + "".join(f"{n:>14,}" for n in SIZES))
    base = {n: bench_deque(n, args.ops) for n in SIZES}
    print(f"{'deque':<10}" + "".join(f"{base[n] * 1e6:14.3f}" for n in SIZES) + "  (baseline)")
    worst = 0.0
    for name in POLICY_NAMES:
        cells = []
        for n in SIZES:
            t = bench_policy(name, n, args.ops)
            worst = max(worst, t) if n == 100_000 else worst
            cells.append(f"{t * 1e6:8.3f} x{t / base[n]:4.0f}")
        print(f"{name:<10}" + "".join(f"{c:>14}" for c in cells))
    print(
        f"worst at 100,000 pending: {worst * 1e6:.2f} µs per call "
        f"({'meets' if worst <= 5e-6 else 'misses'} the 5 µs goal)"
    )


if __name__ == "__main__":
    main()
