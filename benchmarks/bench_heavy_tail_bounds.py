"""How far below the baselines any policy can go on the heavy-tail slices: ideal reference
models beside the service's `openwhisk`, `fc` and `gittins` in the simulator.

    python benchmarks/bench_heavy_tail_bounds.py              # seeds 1-5, loads 0.9 and 1.1
    python benchmarks/bench_heavy_tail_bounds.py --seeds 1
    python benchmarks/bench_heavy_tail_bounds.py --policy gittins --policy gittins-aged
    python benchmarks/bench_heavy_tail_bounds.py --first-seed 6 --policy gittins-aged  # held out
    python benchmarks/bench_heavy_tail_bounds.py --memory-mb 2048 --policy gittins-aged
    python benchmarks/bench_heavy_tail_bounds.py --small-node --policy gittins-aged

The slices are ``bench_heavy_tail.py``'s (16 functions of the Azure 2019 sample, 20 minutes,
durations capped at 60 s, 256 MB each, cores for an offered load of about 0.9 and 1.1), and
``openwhisk``, ``fc`` and ``gittins`` (or the ``--policy`` ones) run on them in the simulator
as there, at 32 GB.
Beside them, an idealised node: ``k`` cores, free and instant preemption, no memory limit,
no cold start:

- ``PS``: processor sharing of every call (what ``openwhisk`` does, without its memory
  admission; a check of the model: it should be close to ``openwhisk``);
- ``LAS``: the k calls with the least attained service run (re-ranked as Gittins
  below): what a node can do knowing nothing of the functions;
- ``Gittins-past``: as ``Gittins`` below, but each call's index is computed from the
  durations of its function's calls that finished before now (all of them; those of
  every function while it has fewer than 2, :class:`policies.attained.DurationHistory`):
  what a real node could reach, the reference of the ``gittins`` policy;
- ``Gittins``: the k calls with the highest Gittins index run, re-ranked every 0.5 s and at
  every arrival and completion. The index of a call is computed from its function's
  durations *in the slice itself* and the service the call has had: more than any real
  policy can know (a node learns a distribution from the past, not the future), and on one
  server the index policy has the least mean response of all policies that do not know a
  call's own duration (Gittins; Aalto et al. 2009);
- ``SRPT``: the k calls with the least remaining time run (clairvoyant: it knows every
  call's duration; optimal for the mean on one server).

With ``--memory-mb 2048`` memory binds first (8 containers of 256 MB for 8 to 31 cores): a
call holds its container to its end and pausing it frees no memory, so the idealised node
there runs at most that many calls at once, each to its end, and only the order in which
waiting calls start is free (no cold start either):

- ``FIFO``: in order of arrival (the stock invoker's admission; ``openwhisk`` there);
- ``Gittins-past``: the highest Gittins index at age 0, from the durations of the
  function's calls that finished before the call arrived: what the past alone gives;
- ``SJF``: the shortest call first (clairvoyant; on one server the least mean response of
  every order that runs calls to their end);
- ``SJF-aged``: as ``SJF``, but a call that has waited longer than ``FIFO``'s p99 response
  on the same slice starts first, the longest waiting first: the p99 that arrival order
  gives, with SJF's order below it (clairvoyant twice: durations, and that p99).

With ``--small-node``, small nodes instead: per seed, 8 functions drawn from 10 minutes of
the evening (minute 1200, durations capped at 20 s: ``bench_policies_live.py``'s family),
on 1, 2 and 3 cores, the arrivals compressed to an offered load of 0.9 and 1.1 (the slice's
own traffic would leave a core mostly idle).

Prints, per slice, mean R, p99 R, mean stretch, the ratios of issue 27's goal (mean and
p99 to the better of ``openwhisk`` and ``fc``, stretch to ``openwhisk``'s) and issue 40's
distance to what the past alone gives (mean R to ``Gittins-past``'s). Deterministic.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import itertools
import logging
import math
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_heavy_tail import heavy_tail_slice

from invoker.azure import AzureFunction, SliceSpec, draw_slice, read_azure2019
from invoker.simulate import SimulationSettings, simulate
from invoker.workloads import TraceCall
from policies.attained import DurationHistory
from whisk.summary import percentile

SAMPLE = Path(__file__).parent / "data" / "azure2019-invitro-66"
LOADS = (0.9, 1.1)
QUANTUM_S = 0.5  # how often the Gittins model re-ranks between events
AGE_STEP_S = 0.05  # the attained service an index is computed at is rounded down to this
MODELS = ("PS", "LAS", "Gittins-past", "Gittins", "SRPT")
QUEUE_MODELS = ("FIFO", "Gittins-past", "SJF", "SJF-aged")
CONTAINER_MB = 256


def gittins_index(durations: list[float]) -> Callable[[float], float]:
    """The Gittins index of a call of this duration distribution that has run ``age``:
    the best, over quanta Δ, of P(it ends within Δ) / E[time it uses of Δ]. Cached per
    ``AGE_STEP_S`` of age."""
    s = sorted(durations)
    prefix = [0.0, *itertools.accumulate(s)]
    cache: dict[int, float] = {}

    def index(age: float) -> float:
        step = int(age / AGE_STEP_S)
        if step not in cache:
            a = step * AGE_STEP_S
            first = bisect.bisect_right(s, a)
            best = float("inf") if first == len(s) else 0.0  # outran them all: ends now
            for i in range(first, len(s)):
                done = i - first + 1
                used = prefix[i + 1] - prefix[first] - done * a + (len(s) - i - 1) * (s[i] - a)
                if used > 0:
                    best = max(best, done / used)
            cache[step] = best
        return cache[step]

    return index


def ideal(calls: list[TraceCall], cores: int, policy: str) -> list[float]:
    """Each call's response time on the idealised node under ``policy`` (one of
    :data:`MODELS`), in the order of ``calls``."""
    order = sorted(range(len(calls)), key=lambda j: calls[j].arrival_s)
    size = [max(c.duration_s, 1e-6) for c in calls]
    by_function: dict[str, list[float]] = {}
    for c, d in zip(calls, size, strict=True):
        by_function.setdefault(c.function, []).append(d)
    index = {f: gittins_index(ds) for f, ds in by_function.items()}
    past = DurationHistory(samples=len(calls))  # every finished call, none to come
    ran = [0.0] * len(calls)
    response = [0.0] * len(calls)
    active: list[int] = []
    now, nxt = 0.0, 0
    while nxt < len(order) or active:
        if policy == "PS":
            rates = {j: min(1.0, cores / len(active)) for j in active}
        else:
            if policy == "SRPT":
                ranked = sorted(active, key=lambda j: size[j] - ran[j])
            elif policy == "LAS":
                ranked = sorted(active, key=lambda j: (ran[j], j))
            elif policy == "Gittins-past":
                ranked = sorted(active, key=lambda j: (-past.index(calls[j].function, ran[j]), j))
            else:
                ranked = sorted(active, key=lambda j: -index[calls[j].function](ran[j]))
            rates = dict.fromkeys(ranked[:cores], 1.0)
        step = calls[order[nxt]].arrival_s - now if nxt < len(order) else float("inf")
        for j, rate in rates.items():
            step = min(step, (size[j] - ran[j]) / rate)
        if policy not in ("PS", "SRPT") and rates:
            step = min(step, QUANTUM_S)
        now += step
        for j, rate in rates.items():
            ran[j] += rate * step
        for j in [j for j in rates if ran[j] >= size[j] - 1e-9]:
            response[j] = now - calls[j].arrival_s
            active.remove(j)
            past.add(calls[j].function, size[j])
        while nxt < len(order) and calls[order[nxt]].arrival_s <= now + 1e-12:
            active.append(order[nxt])
            nxt += 1
    return response


def queued(
    calls: list[TraceCall], slots: int, policy: str, overdue_s: float = math.inf
) -> list[float]:
    """Each call's response time on the idealised node that runs at most ``slots`` calls at
    once, each to its end, the waiting ones started by ``policy`` (one of
    :data:`QUEUE_MODELS`), in the order of ``calls``. ``SJF-aged``: as ``SJF``, but a call
    that has waited longer than ``overdue_s`` starts first, the longest waiting first."""
    order = sorted(range(len(calls)), key=lambda j: calls[j].arrival_s)
    past = DurationHistory(samples=len(calls))
    waiting: list[tuple[float, int]] = []  # (rank, call)
    oldest: list[tuple[float, int]] = []  # (arrival, call), for SJF-aged
    started: set[int] = set()
    running: list[tuple[float, int]] = []  # (end, call)
    response = [0.0] * len(calls)
    nxt = 0
    while nxt < len(order) or running:
        arrival = calls[order[nxt]].arrival_s if nxt < len(order) else math.inf
        if running and running[0][0] <= arrival:
            now, j = heapq.heappop(running)
            response[j] = now - calls[j].arrival_s
            past.add(calls[j].function, calls[j].duration_s)
        else:
            now, j = arrival, order[nxt]
            nxt += 1
            c = calls[j]
            if policy == "FIFO":
                rank = now
            elif policy == "Gittins-past":
                rank = -past.index(c.function, 0.0)
            else:
                rank = c.duration_s
            heapq.heappush(waiting, (rank, j))
            heapq.heappush(oldest, (now, j))
        while len(running) < slots:
            for heap in (waiting, oldest):  # drop what started from the other heap
                while heap and heap[0][1] in started:
                    heapq.heappop(heap)
            if not waiting:
                break
            _, j = heapq.heappop(oldest if now - oldest[0][0] > overdue_s else waiting)
            started.add(j)
            heapq.heappush(running, (now + calls[j].duration_s, j))
    return response


def figures(calls: list[TraceCall], response: list[float]) -> tuple[float, float, float]:
    """Mean response, p99 response and mean stretch."""
    stretch = [r / max(c.duration_s, 1e-6) for c, r in zip(calls, response, strict=True)]
    return statistics.fmean(response), percentile(sorted(response), 99), statistics.fmean(stretch)


def small_node_slices(
    functions: list[AzureFunction], seed: int
) -> Iterator[tuple[list[TraceCall], int]]:
    """``--small-node``'s slices of this seed: the same calls on 1, 2 and 3 cores at each
    load, the arrivals compressed to reach it."""
    spec = SliceSpec(functions=8, start_minute=1200, minutes=10, max_duration_s=20.0, seed=seed)
    calls = [replace(c, memory_mb=CONTAINER_MB) for c in draw_slice(functions, spec)]
    work = sum(c.duration_s for c in calls) / (60.0 * spec.minutes)
    for cores in (1, 2, 3):
        for load in LOADS:
            scale = work / (cores * load)
            yield [replace(c, arrival_s=c.arrival_s * scale) for c in calls], cores


def heavy_tail_slices(
    functions: list[AzureFunction], seed: int
) -> Iterator[tuple[list[TraceCall], int]]:
    """``bench_heavy_tail.py``'s slice of this seed, on the cores for each load."""
    calls = heavy_tail_slice(functions, seed)
    work = sum(c.duration_s for c in calls) / max(c.arrival_s for c in calls)
    for load in LOADS:
        yield calls, max(1, round(work / load))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="slices, seeded 1..N (default 5)")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=1,
        help="seed the slices from this one instead (6: bench_heavy_tail.py's held-out slices)",
    )
    parser.add_argument(
        "--policy",
        action="append",
        help="a policy to run beside openwhisk and fc (repeatable; default gittins)",
    )
    parser.add_argument(
        "--memory-mb", type=int, default=32768, help="the node's user memory (default 32768)"
    )
    parser.add_argument(
        "--small-node", action="store_true", help="1 to 3 cores, 8 functions (see above)"
    )
    args = parser.parse_args()
    policies = ["openwhisk", "fc", *(args.policy or ["gittins"])]
    slices = small_node_slices if args.small_node else heavy_tail_slices
    logging.basicConfig(level=logging.CRITICAL)
    functions = read_azure2019(SAMPLE)
    print(
        f"{'slice':<24} {'policy':<24} {'mean R':>8} {'p99 R':>8} {'mean S':>8} "
        f"{'R/best':>7} {'p99/best':>8} {'S/ow':>6} {'R/G-past':>8}"
    )
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for calls, cores in slices(functions, seed):
            work = sum(c.duration_s for c in calls) / max(c.arrival_s for c in calls)
            rows: dict[str, tuple[float, float, float]] = {}
            settings = SimulationSettings(cores=cores, user_memory_mb=args.memory_mb)
            for policy in dict.fromkeys(policies):
                r = simulate(calls, policy, settings)
                rows[f"{policy} (simulator)"] = (
                    r["mean_response_s"],
                    r["p99_response_s"],
                    r["mean_stretch"],
                )
            slots = args.memory_mb // CONTAINER_MB
            queue_bound = slots <= cores  # memory binds before the cores
            for model in QUEUE_MODELS if queue_bound else MODELS:
                if not queue_bound:
                    response = ideal(calls, cores, model)
                elif model == "SJF-aged":  # overdue past the p99 that arrival order gives
                    response = queued(calls, slots, model, rows["FIFO (ideal)"][1])
                else:
                    response = queued(calls, slots, model)
                rows[f"{model} (ideal)"] = figures(calls, response)
            ow, fc = rows["openwhisk (simulator)"], rows["fc (simulator)"]
            best, best_p99 = min(ow[0], fc[0]), min(ow[1], fc[1])
            past = rows["Gittins-past (ideal)"][0]
            name = f"seed {seed}, {work / cores:.2f}, {cores} cores"
            for label, (mean, p99, stretch) in rows.items():
                print(
                    f"{name:<24} {label:<24} {mean:8.2f} {p99:8.2f} {stretch:8.2f} "
                    f"{mean / best:7.2f} {p99 / best_p99:8.2f} {stretch / ow[2]:6.2f} "
                    f"{mean / past:8.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
