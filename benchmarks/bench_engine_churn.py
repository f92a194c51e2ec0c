"""How many containers a Docker Engine creates and removes a second (issue 42's churn), and
what each engine call of a cold start and a warm reuse costs.

    python benchmarks/bench_engine_churn.py [--containers 24] [--concurrency 1,4,8]

Starts the project's dockerd under ``.state/bench`` (as ``bench_docker_backend.py``) and,
for each concurrency, creates (create + start + inspect, as the Docker backend does for a
cold start, python runtime, hardened, ``netns``) and removes ``--containers`` containers,
that many at once. Prints the rate, the median create and remove times, and each rate's ratio
to one-at-a-time in the same run. Where a node churns, this rate bounds its cold starts
whatever the invoker does: docs/benchmarks.md (many distinct actions).

Then, for each concurrency again, ``--containers`` containers go through the calls the
invoker makes on them, in its order (invoker/activation.py, containers/pool.py), each timed:
a cold start (create; ``assign_cores``, the cpuset + quota update every call makes before
``/init``; ``/init``; ``cpu_times``, whose first read finds the container's cgroup with an
inspect; the first ``/run``), the pool's idle pause, a warm reuse of the paused container
(resume; ``assign_cores`` to another core; ``/run``), then ``set_cpu_weight`` (what an
attained-service policy writes, in the background) and the removal. Prints each call's
median and p90 and its share of the cold starts' time (create → first ``/run`` answered;
the other calls' too, for scale), the engine calls inside create, the cgroup lookup and the
removal split out; and the rate of these lifecycles with its ratio to one at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Coroutine
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_docker_backend import LABEL, PY_CODE, RUN, init_body, start_engines
from common import exclusive_machine, percentile

from containers.backend import ContainerSpec
from containers.docker.backend import DockerBackend, DockerContainer
from containers.docker.engine import Engine
from containers.docker.local import BINDS, local_images

T = TypeVar("T")
Record = dict[str, float]  # seconds per step, and per "step/engine call" within a step

# (key, label) in the invoker's order. A cold start: pool.prepare creates the container,
# ActivationRunner.run pins it to the call's core, /init, reads its CPU counters, /run.
COLD = (
    ("create", "create (+start+inspect)"),
    ("assign_cores", "assign_cores: cpuset+quota"),
    ("/init", "/init"),
    ("cpu_times", "cpu_times: cgroup lookup"),
    ("/run", "first /run"),
)
# The pool pauses an idle container; a warm reuse resumes it, pins it (to another core
# here: the same one makes no call) and runs it.
WARM = (
    ("resume", "resume (unpause)"),
    ("repin", "assign_cores: other core"),
    ("warm /run", "warm /run"),
)
# Off a call's path: the pool's idle pause, CpuOrder's reweighting, the removal.
OFF_PATH = (
    ("pause", "pause (idle)"),
    ("set_cpu_weight", "set_cpu_weight: shares"),
    ("destroy", "remove (destroy)"),
)
SPLIT = ("create", "cpu_times", "destroy")  # backend calls made of several engine calls
ENGINE_CALLS: ContextVar[Record | None] = ContextVar("engine_calls", default=None)


class TimedEngine(Engine):
    """An engine that adds each API call's time to the current step's record: create and
    destroy make several engine calls, and which of them costs is the question."""

    @staticmethod
    async def _call(what: str, coro: Any, timeout_s: float) -> Any:
        t0 = time.perf_counter()
        try:
            return await Engine._call(what, coro, timeout_s)
        finally:
            record = ENGINE_CALLS.get()
            if record is not None:
                key = what.split()[0]
                record[key] = record.get(key, 0.0) + time.perf_counter() - t0


async def cycle(backend: DockerBackend, name: str, times: tuple[list[float], list[float]]) -> None:
    """Create one container as a cold start does, then remove it; record both times."""
    t0 = time.perf_counter()
    c = await backend.create(ContainerSpec(name=name, kind="python:3.11", memory_mb=256))
    t1 = time.perf_counter()
    await c.destroy()
    times[0].append(t1 - t0)
    times[1].append(time.perf_counter() - t1)


async def limited(slots: asyncio.Semaphore, work: Awaitable[None]) -> None:
    async with slots:
        await work


async def step(record: Record, key: str, call: Coroutine[Any, Any, T]) -> T:
    """Await one backend call, recording its time and the engine calls it made."""
    calls: Record = {}
    token = ENGINE_CALLS.set(calls)
    t0 = time.perf_counter()
    try:
        return await call
    finally:
        record[key] = time.perf_counter() - t0
        ENGINE_CALLS.reset(token)
        record.update({f"{key}/{what}": s for what, s in calls.items()})


async def lifecycle(
    backend: DockerBackend, name: str, cores: tuple[int, int], record: Record
) -> None:
    """One container through the invoker's calls (module docstring), each timed; it runs
    on ``cores[0]``, then on ``cores[1]`` when reused."""
    spec = ContainerSpec(name=name, kind="python:3.11", memory_mb=256)
    c: DockerContainer = await step(record, "create", backend.create(spec))
    try:
        await step(record, "assign_cores", c.assign_cores(frozenset({cores[0]})))
        init = await step(record, "/init", c.init(init_body(PY_CODE), 30))
        await step(record, "cpu_times", c.cpu_times())
        run = await step(record, "/run", c.run(RUN, 30))
        assert init.status == 200 and run.status == 200, (init, run)
        await step(record, "pause", c.pause())
        await step(record, "resume", c.resume())
        await step(record, "repin", c.assign_cores(frozenset({cores[1]})))
        run = await step(record, "warm /run", c.run(RUN, 30))
        assert run.status == 200, run
        await step(record, "set_cpu_weight", c.set_cpu_weight(200))
    finally:
        await step(record, "destroy", c.destroy())


async def lifecycles(backend: DockerBackend, n: int, containers: int) -> tuple[list[Record], float]:
    """``containers`` lifecycles, ``n`` at once, on the cores in turn; and their rate."""
    cpus = sorted(os.sched_getaffinity(0))
    slots = asyncio.Semaphore(n)
    records: list[Record] = [{} for _ in range(containers)]
    t0 = time.perf_counter()
    await asyncio.gather(
        *(
            limited(
                slots,
                lifecycle(
                    backend,
                    f"wskchurn0_calls{n}_{i}",
                    (cpus[i % len(cpus)], cpus[(i + 1) % len(cpus)]),
                    record,
                ),
            )
            for i, record in enumerate(records)
        )
    )
    return records, containers / (time.perf_counter() - t0)


def rows(records: list[Record]) -> list[tuple[str, list[float], float]]:
    """(label, seconds per container, share of the cold starts' time) per call, with the
    engine calls of the split ones below them, and the cold start and warm reuse totals."""
    cold = [sum(r[k] for k, _ in COLD) for r in records]
    warm = [sum(r[k] for k, _ in WARM) for r in records]
    out: list[tuple[str, list[float], float]] = []

    def add(label: str, xs: list[float]) -> None:
        out.append((label, xs, sum(xs) / sum(cold)))

    for group, total, total_label in (
        (COLD, cold, "cold start"),
        (WARM, warm, "warm reuse"),
        (OFF_PATH, None, ""),
    ):
        for key, label in group:
            add(label, [r[key] for r in records])
            if key not in SPLIT:
                continue
            made = list(dict.fromkeys(k for r in records for k in r if k.startswith(key + "/")))
            for sub in made:
                add(f"  engine {sub.split('/', 1)[1]}", [r.get(sub, 0.0) for r in records])
            if key == "create":
                add(
                    "  netns, log file",
                    [r[key] - sum(r.get(s, 0.0) for s in made) for r in records],
                )
        if total is not None:
            add(total_label, total)
    return out


def print_calls(results: dict[int, tuple[list[Record], float]], containers: int) -> None:
    """The lifecycles' rates (ratio to the first concurrency) and the per-call table."""
    print(
        f"each call of a cold start, a warm reuse and a removal, {containers} containers each; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print(f"{'concurrency':>11} {'lifecycle/s':>12} {'cold ms':>9} {'warm ms':>9} {'ratio':>9}")
    base = None
    for n, (records, rate) in results.items():
        base = base or rate
        cold = statistics.median(sum(r[k] for k, _ in COLD) for r in records) * 1000
        warm = statistics.median(sum(r[k] for k, _ in WARM) for r in records) * 1000
        print(f"{n:11d} {rate:12.1f} {cold:9.0f} {warm:9.0f} {rate / base:8.2f}x")
    print("ms per call (median, p90) and share of the cold starts' time, by concurrency")
    tables = {n: rows(records) for n, (records, _) in results.items()}
    print(f"{'':27}" + "".join(f" {f'{n} at once':>20}" for n in tables))
    print(f"{'call':27}" + f" {'median':>7} {'p90':>6} {'share':>5}" * len(tables))
    for i, (label, _, _) in enumerate(next(iter(tables.values()))):
        cells = ""
        for table in tables.values():
            _, xs, share = table[i]
            median, p90 = statistics.median(xs) * 1000, percentile(xs, 90) * 1000
            cells += f" {median:7.1f} {p90:6.1f} {share:5.0%}"
        print(f"{label:27}{cells}")


async def churn(host: str, containers: int, concurrencies: list[int]) -> None:
    backend = DockerBackend(
        host,
        "wskchurn0",
        reach="netns",
        network="none",
        images=local_images(),
        binds=BINDS,
        labels={LABEL: "1"},
    )
    backend.engine = TimedEngine(host)  # records only inside a lifecycle step
    await backend.start()
    base = None
    try:
        for n in concurrencies:
            slots = asyncio.Semaphore(n)
            times: tuple[list[float], list[float]] = ([], [])
            t0 = time.perf_counter()
            await asyncio.gather(
                *(
                    limited(slots, cycle(backend, f"wskchurn0_{n}_{i}", times))
                    for i in range(containers)
                )
            )
            rate = containers / (time.perf_counter() - t0)
            base = base or rate
            created, removed = (statistics.median(t) * 1000 for t in times)
            print(f"{n:11d} {rate:12.1f} {created:9.0f} {removed:9.0f} {rate / base:8.2f}x")
        cpu = min(os.sched_getaffinity(0))  # one untimed first: the CPU update method's probe
        await lifecycle(backend, "wskchurn0_calls_warmup", (cpu, cpu), {})
        results = {n: await lifecycles(backend, n, containers) for n in concurrencies}
        print_calls(results, containers)
    finally:
        await backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--containers", type=int, default=24, help="per concurrency")
    parser.add_argument(
        "--concurrency",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 4, 8],
        help="containers created and removed at once, comma-separated (the first: baseline)",
    )
    args = parser.parse_args()
    print(
        f"dockerd, python runtime, {args.containers} containers each; cpus: {os.cpu_count()}, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'concurrency':>11} {'created+rm/s':>12} {'create ms':>9} {'remove ms':>9} {'ratio':>9}"
    )
    with exclusive_machine():  # another benchmark's load would be in the figures
        hosts, stop = start_engines(["docker"])
        try:
            asyncio.run(churn(hosts["docker"], args.containers, args.concurrency))
        finally:
            stop()


if __name__ == "__main__":
    main()
