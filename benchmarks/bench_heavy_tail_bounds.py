"""How far below the baselines any policy can go on the heavy-tail slices: ideal reference
models beside the service's `openwhisk` and `fc` in the simulator.

    python benchmarks/bench_heavy_tail_bounds.py              # seeds 1-5, loads 0.9 and 1.1
    python benchmarks/bench_heavy_tail_bounds.py --seeds 1

The slices are ``bench_heavy_tail.py``'s (16 functions of the Azure 2019 sample, 20 minutes,
durations capped at 60 s, 256 MB each, cores for an offered load of about 0.9 and 1.1), and
``openwhisk`` and ``fc`` run on them in the simulator as there, at 32 GB. Beside them, an
idealised node: ``k`` cores, free and instant preemption, no memory limit, no cold start:

- ``PS``: processor sharing of every call (what ``openwhisk`` does, without its memory
  admission; a check of the model: it should be close to ``openwhisk``);
- ``Gittins``: the k calls with the highest Gittins index run, re-ranked every 0.5 s and at
  every arrival and completion. The index of a call is computed from its function's
  durations *in the slice itself* and the service the call has had: more than any real
  policy can know (a node learns a distribution from the past, not the future), and on one
  server the index policy has the least mean response of all policies that do not know a
  call's own duration (Gittins; Aalto et al. 2009);
- ``SRPT``: the k calls with the least remaining time run (clairvoyant: it knows every
  call's duration; optimal for the mean on one server).

Prints, per slice, mean R, p99 R, mean stretch and the ratios of issue 27's goal (mean and
p99 to the better of ``openwhisk`` and ``fc``, stretch to ``openwhisk``'s). Deterministic.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import logging
import statistics
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from invoker.azure import SliceSpec, draw_slice, read_azure2019
from invoker.simulate import SimulationSettings, simulate
from invoker.workloads import TraceCall
from whisk.summary import percentile

SAMPLE = Path(__file__).parent / "data" / "azure2019-invitro-66"
LOADS = (0.9, 1.1)
QUANTUM_S = 0.5  # how often the Gittins model re-ranks between events
AGE_STEP_S = 0.05  # the attained service an index is computed at is rounded down to this


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
    """Each call's response time on the idealised node under ``policy`` (PS, Gittins or
    SRPT), in the order of ``calls``."""
    order = sorted(range(len(calls)), key=lambda j: calls[j].arrival_s)
    size = [max(c.duration_s, 1e-6) for c in calls]
    by_function: dict[str, list[float]] = {}
    for c, d in zip(calls, size, strict=True):
        by_function.setdefault(c.function, []).append(d)
    index = {f: gittins_index(ds) for f, ds in by_function.items()}
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
            else:
                ranked = sorted(active, key=lambda j: -index[calls[j].function](ran[j]))
            rates = dict.fromkeys(ranked[:cores], 1.0)
        step = calls[order[nxt]].arrival_s - now if nxt < len(order) else float("inf")
        for j, rate in rates.items():
            step = min(step, (size[j] - ran[j]) / rate)
        if policy == "Gittins" and rates:
            step = min(step, QUANTUM_S)
        now += step
        for j, rate in rates.items():
            ran[j] += rate * step
        for j in [j for j in rates if ran[j] >= size[j] - 1e-9]:
            response[j] = now - calls[j].arrival_s
            active.remove(j)
        while nxt < len(order) and calls[order[nxt]].arrival_s <= now + 1e-12:
            active.append(order[nxt])
            nxt += 1
    return response


def figures(calls: list[TraceCall], response: list[float]) -> tuple[float, float, float]:
    """Mean response, p99 response and mean stretch."""
    stretch = [r / max(c.duration_s, 1e-6) for c, r in zip(calls, response, strict=True)]
    return statistics.fmean(response), percentile(sorted(response), 99), statistics.fmean(stretch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="slices, seeded 1..N (default 5)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    functions = read_azure2019(SAMPLE)
    print(
        f"{'slice':<24} {'policy':<18} {'mean R':>8} {'p99 R':>8} {'mean S':>8} "
        f"{'R/best':>7} {'p99/best':>8} {'S/ow':>6}"
    )
    for seed in range(1, args.seeds + 1):
        spec = SliceSpec(functions=16, start_minute=0, minutes=20, max_duration_s=60.0, seed=seed)
        calls = [replace(c, memory_mb=256) for c in draw_slice(functions, spec)]
        span = max(c.arrival_s for c in calls)
        work = sum(c.duration_s for c in calls) / span
        for load in LOADS:
            cores = max(1, round(work / load))
            rows: dict[str, tuple[float, float, float]] = {}
            for policy in ("openwhisk", "fc"):
                r = simulate(calls, policy, SimulationSettings(cores=cores, user_memory_mb=32768))
                rows[f"{policy} (simulator)"] = (
                    r["mean_response_s"],
                    r["p99_response_s"],
                    r["mean_stretch"],
                )
            for model in ("PS", "Gittins", "SRPT"):
                rows[f"{model} (ideal)"] = figures(calls, ideal(calls, cores, model))
            ow, fc = rows["openwhisk (simulator)"], rows["fc (simulator)"]
            best, best_p99 = min(ow[0], fc[0]), min(ow[1], fc[1])
            name = f"seed {seed}, {work / cores:.2f}, {cores} cores"
            for label, (mean, p99, stretch) in rows.items():
                print(
                    f"{name:<24} {label:<18} {mean:8.2f} {p99:8.2f} {stretch:8.2f} "
                    f"{mean / best:7.2f} {p99 / best_p99:8.2f} {stretch / ow[2]:6.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
