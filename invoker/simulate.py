"""``ow-invoker simulate``: the real invoker on a virtual clock.

The simulator runs the production :class:`~invoker.service.Invoker` — feed, node scheduler,
policies, container pool, activation runner — on a :class:`~whisk.clock.VirtualTimeLoop`,
with an in-process bus, an in-memory store and the simulated container backend. A small
controller publishes the trace's calls at their arrival times and measures each response
time from the ack that carries the result. No scheduling logic is reimplemented here.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import math
import os
import pickle
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from containers.simulated import SIM_CPU, SIM_DURATION, SimulatedBackend
from invoker.azure import SliceSpec, draw_slice, offered_load, read_azure2019, read_azure2021
from invoker.config import InvokerConfig
from invoker.service import Cadence, Invoker
from invoker.workloads import (
    SEBS_CPU_SHARE,
    TraceCall,
    io_cpu_workload,
    read_trace,
    uniform_workload,
    write_trace,
)
from policies import POLICY_NAMES
from whisk.argtypes import nonnegative_float, nonnegative_int, positive_float, positive_int
from whisk.bus.memory import MemoryBus
from whisk.clock import LoopClock, SystemClock, VirtualTimeLoop
from whisk.protocol import QualifiedName, dumps, loads
from whisk.protocol.controller import action_document, activation_message
from whisk.store import WriteResult
from whisk.store.embedded import EmbeddedStore
from whisk.summary import Outcome, summarize
from whisk.supervisor import child

HELP = "simulate the node scheduler and policies on a trace, with a virtual clock"
NAMESPACE = "guest"
# No controller reads pings and nothing fails here: health and pings once a virtual minute,
# and records, which the store drops, are not held back to make batches. Offsets are
# committed as in service (five times a second): where the virtual clock stops moves later
# timers by a float's last digit, so fewer commits would change some schedules.
CADENCE = Cadence(health_s=60.0, ping_s=60.0, record_linger_s=0.0)
CACHE_ENV = "OW_SIMULATION_CACHE"  # a directory of runs already made (see simulate)
STALL_S = 3600.0  # virtual seconds with calls waiting, none running and none answered


class SimulationStalled(RuntimeError):
    """Calls wait that nothing will ever start: virtual time moves (the periodic loops run)
    but the simulation would never end."""


async def _watch_progress(invoker: Invoker, answered: list[int], waiting: dict[str, Any]) -> None:
    """Raise :class:`SimulationStalled` when calls are outstanding, none runs and none has
    been answered for :data:`STALL_S` (the loop's own watchdog sees time move, so not this)."""
    seen = -1
    while True:
        await asyncio.sleep(STALL_S)
        if waiting and answered[0] == seen and not invoker.running_calls():
            head = invoker.scheduler.peek()
            what = (
                f"the first, {head.payload.action.docid}, needs "
                f"{head.payload.action.limits.memory_mb} MB"
                if head is not None
                else "none is queued"
            )
            slots = Counter(s.state.value for s in invoker.pool.slots.values())
            raise SimulationStalled(
                f"{len(waiting)} calls outstanding, none running and none answered for "
                f"{STALL_S:g} virtual s; {what}; containers: {dict(slots)}, "
                f"{invoker.pool.used_memory_mb} of {invoker.config.user_memory_mb} MB held"
            )
        seen = answered[0]


class RecordlessStore(EmbeddedStore):
    """The embedded store, less the activation records: the invoker writes them as in
    service (batched by its record writer), but nobody reads them in a simulation, and
    storing them was an eighth of a simulated day's work."""

    def __init__(self, path: Path, records_db: str, **options: Any) -> None:
        super().__init__(path, **options)
        self.records_db = records_db
        self.records_dropped = 0

    async def bulk(self, db: str, docs: list[dict[str, Any]]) -> list[WriteResult]:
        if db != self.records_db:
            return await super().bulk(db, docs)
        self.records_dropped += len(docs)
        return [WriteResult(doc["_id"], "1-simulated") for doc in docs]


@dataclass(frozen=True)
class SimulationSettings:
    cores: int = 4
    cold_start_s: float = 0.0
    # Of a cold start, the engine's CPU on the action cores beside the calls (Docker's
    # dockerd, containerd and runc; 0: a delay that takes no CPU, as a fork's).
    create_cpu_s: float = 0.0
    user_memory_mb: int = 32 * 1024
    action_memory_mb: int = 256
    warmup: bool = True
    preempt: bool = False  # pause long calls for short ones (Preemption's defaults)
    pause_s: float = 0.01  # what a pause and resume of a container cost
    weight_s: float = 30e-6  # what writing a container's cpu.weight costs (a cgroup write)
    # Keep-alive by footprint: what an idle container is measured to use (None: it counts at
    # its limit, the stock invoker's accounting).
    footprint_mb: int | None = None
    # Containers created ahead for waiting calls (the invoker's --create-ahead; 0, as the
    # process backend: a cold start holds its call's core, as every documented figure has it).
    create_ahead: int = 0
    # Attained-service policies: where a creation costs, a call waits rather than have a
    # container made while it would get no CPU, or while a busy one of its action is
    # expected sooner (the invoker's default; False: its --no-warm-wait).
    warm_wait: bool = True


async def _simulate(
    trace: list[TraceCall], policy: str, settings: SimulationSettings
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, epoch_ms_at_start=1_700_000_000_000)
    bus = MemoryBus()
    backend = SimulatedBackend(
        cold_start_s=settings.cold_start_s,
        create_cpu_s=settings.create_cpu_s,
        engine_cores=frozenset(range(settings.cores)),
        pause_s=settings.pause_s,
        weight_s=settings.weight_s,
        footprint_mb=settings.footprint_mb,
    )
    with tempfile.TemporaryDirectory(prefix="ow-sim-") as state:
        config = InvokerConfig(
            policy=policy,
            action_cores=tuple(range(settings.cores)),
            user_memory_mb=settings.user_memory_mb,
            state_dir=state,
            pause_grace_s=1e9,
            idle_timeout_s=1e9,
            max_pending=10**9,
            preempt=settings.preempt,
            create_ahead=settings.create_ahead,
            no_warm_wait=not settings.warm_wait,
        )
        store = RecordlessStore(
            Path(state) / "store.sqlite", config.activations_db, threaded=False, durable=False
        )
        invoker = Invoker(
            config, bus=bus, store=store, backend=backend, clock=clock, cadence=CADENCE
        )
        revisions = {}
        memory = {c.function: c.memory_mb for c in trace}
        for fn in sorted(memory):
            doc = action_document(
                NAMESPACE,
                fn,
                kind="python:3.11",
                code=b"simulated",
                timeout_ms=24 * 3600 * 1000,
                memory_mb=memory[fn] or settings.action_memory_mb,
                logs_mb=0,
            )
            await store.ensure_db(config.whisks_db)
            revisions[fn] = await store.put(config.whisks_db, doc)
        await invoker.start()
        producer = bus.producer()
        acks = bus.consumer("completed0", "simulator")
        await acks.start()
        # Each call in flight: its activation id -> (its index in the trace, or -1 for a
        # warm-up call, and when it was sent). No task or future per call: the collector
        # answers it from the ack (a task each was a good part of a simulated day's work).
        outstanding: dict[str, tuple[int, float]] = {}
        responses = [0.0] * len(trace)
        answered = [0]  # acks of calls read, for the progress watchdog
        drained: asyncio.Future[None] | None = None

        async def collect() -> None:
            while True:
                records = await acks.poll(1000, 3600.0)
                if records:  # the bus drops what every group has committed past
                    await acks.commit({0: records[-1].offset + 1})
                for record in records:
                    response = loads(record.value).get("response")
                    if response is None:
                        continue
                    aid = response if isinstance(response, str) else response["activationId"]
                    entry = outstanding.pop(aid, None)
                    answered[0] += 1
                    if entry is not None and entry[0] >= 0:
                        responses[entry[0]] = loop.time() - entry[1]
                if not outstanding and drained is not None and not drained.done():
                    drained.set_result(None)

        async def send(i: int, call: TraceCall) -> None:
            content = {SIM_DURATION: call.duration_s}
            if call.cpu_s is not None:
                content[SIM_CPU] = call.cpu_s
            msg = activation_message(
                QualifiedName(NAMESPACE, call.function),
                revisions[call.function],
                start_ms=clock.epoch_ms(),
                content=content,
            )
            outstanding[msg.activation_id] = (i, loop.time())
            await producer.send(config.invoker_topic, dumps(msg.to_json()))

        async def all_answered() -> None:
            nonlocal drained
            if outstanding:
                drained = loop.create_future()
                await asyncio.wait((drained, watchdog), return_when=asyncio.FIRST_COMPLETED)
                if watchdog.done():
                    watchdog.result()  # raises SimulationStalled

        pings = bus.consumer(config.health_topic, "simulator")
        await pings.start()

        async def drop_pings() -> None:
            # A controller reads the pings; here they are only let go (bounded memory).
            while True:
                records = await pings.poll(10_000, 3600.0)
                if records:
                    await pings.commit({0: records[-1].offset + 1})

        collector = child(collect(), name="collect-acks")
        pinger = child(drop_pings(), name="drop-pings")
        watchdog = child(_watch_progress(invoker, answered, outstanding), name="watch-progress")
        if settings.warmup:
            # As the paper: containers warmed and E[p] learnt before measuring.
            last = {c.function: c for c in trace}
            for c in last.values():
                for _ in range(settings.cores):
                    await send(-1, TraceCall(0.0, c.function, c.duration_s, c.cpu_s, c.memory_mb))
            await all_answered()
        cold_before = invoker.pool.cold_starts
        t0 = loop.time()
        # Sent at their arrivals: memory follows the calls in the node, not the trace.
        for i, c in enumerate(trace):
            delay = t0 + c.arrival_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await send(i, c)
        await all_answered()
        makespan = loop.time() - t0
        for task in (collector, pinger, watchdog):
            task.cancel()
        await asyncio.gather(collector, pinger, watchdog, return_exceptions=True)
        cold = invoker.pool.cold_starts - cold_before
        preemptions = invoker.scheduler.preempted
        moved = invoker.scheduler.moved
        overdue = invoker.scheduler.overdue_starts
        busy = backend.cpu.busy_core_seconds
        await invoker.stop(deadline_s=0)
        records = invoker.records.written
        await store.close()
    outcomes = [Outcome(c.function, r, c.duration_s) for c, r in zip(trace, responses, strict=True)]
    return {
        "policy": policy,
        "preempt": settings.preempt,
        "cores": settings.cores,
        **summarize(outcomes),
        "cold_starts": cold,
        "preemptions": preemptions,
        "moved": moved,
        "overdue_starts": overdue,
        "makespan_s": makespan,
        "busy_core_seconds": busy,
        "records_written": records,
    }


def simulate(
    trace: list[TraceCall], policy: str, settings: SimulationSettings | None = None
) -> dict[str, Any]:
    """Run one policy over a trace on a fresh virtual-time loop; returns the summary, with
    the real seconds it took (``wall_s``) and the trace's calls per real second.

    With ``OW_SIMULATION_CACHE`` naming a directory (the test session sets one of its own),
    a run already made with the same trace, policy and settings is read back from it: the
    simulator is deterministic, so benchmarks that share runs (the heavy-tail tables and
    their bounds) pay for each once. ``wall_s`` is then the first run's."""
    settings = settings or SimulationSettings()
    cached = _cache_file(trace, policy, settings)
    if cached is not None and cached.exists():
        result: dict[str, Any] = pickle.loads(cached.read_bytes())
        return result
    result = _simulate_now(trace, policy, settings)
    if cached is not None:
        partial = cached.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(pickle.dumps(result))
        partial.replace(cached)  # whole or absent, whoever else writes the same run
    return result


def _cache_file(trace: list[TraceCall], policy: str, settings: SimulationSettings) -> Path | None:
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        return None
    key = hashlib.sha256(pickle.dumps((trace, policy, settings))).hexdigest()
    return Path(folder) / f"{key}.pickle"


def _simulate_now(
    trace: list[TraceCall], policy: str, settings: SimulationSettings
) -> dict[str, Any]:
    loop = VirtualTimeLoop()
    wall = SystemClock()
    started = wall.now()
    try:
        result = loop.run(_simulate(trace, policy, settings))
    finally:
        loop.close()
    result["wall_s"] = elapsed = wall.now() - started
    result["calls_per_s"] = len(trace) / elapsed if elapsed > 0 else math.inf
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--trace", help="CSV with header arrival_s,function,duration_s[,cpu_s][,memory_mb]"
    )
    src.add_argument(
        "--azure",
        metavar="DIR",
        help="a slice of the Azure Functions 2019 dataset in DIR (its three CSV files of "
        "--day), drawn as --functions/--start-minute/--minutes/--max-duration/--spread/--seed "
        "say (docs/policies.md)",
    )
    src.add_argument(
        "--azure2021",
        metavar="FILE",
        help="the Azure Functions 2021 per-invocation trace (app,func,end_timestamp,"
        "duration), the window --start-minute/--minutes",
    )
    src.add_argument(
        "--workload",
        choices=["sebs", "sebs-cpu", "io-cpu"],
        help="built-in generator: the paper's SeBS mix with its functions' measured CPU "
        "shares, the same mix all CPU-bound, or a 1 s sleeping + a 200 ms CPU function "
        "at 2 calls/s each (--window, default 40 s)",
    )
    parser.add_argument(
        "--intensity",
        type=positive_float,
        default=120.0,
        help="calls per core per minute of window (generator)",
    )
    parser.add_argument(
        "--window",
        type=positive_float,
        default=None,
        help="window in seconds (generator; default 60)",
    )
    parser.add_argument("--seed", type=int, default=1, help="generator or slice seed")
    azure = parser.add_argument_group("Azure slices (--azure, --azure2021)")
    azure.add_argument("--day", type=int, default=1, help="day of the 2019 dataset (1-14)")
    azure.add_argument("--functions", type=positive_int, default=66, help="functions drawn")
    azure.add_argument("--start-minute", type=int, default=0, help="first minute of the window")
    azure.add_argument("--minutes", type=positive_int, default=10, help="minutes in the window")
    azure.add_argument(
        "--max-duration",
        type=positive_float,
        default=600.0,
        help="seconds: longer durations are cut (and, 2019, no function with a longer median)",
    )
    azure.add_argument(
        "--spread",
        choices=["uniform", "even"],
        default="uniform",
        help="where a minute's calls fall in it (2019)",
    )
    azure.add_argument(
        "--time-scale",
        type=positive_float,
        default=1.0,
        help="arrivals multiplied by it (0.5: twice as fast)",
    )
    parser.add_argument(
        "--write-trace", metavar="CSV", help="also write the calls simulated as a trace CSV"
    )
    parser.add_argument(
        "--policy",
        action="append",
        choices=POLICY_NAMES,
        help="policy to simulate (repeatable; default: all)",
    )
    parser.add_argument("--cores", type=positive_int, default=4, help="action cores")
    parser.add_argument(
        "--cold-start",
        type=nonnegative_float,
        default=0.0,
        help="seconds to create a container (the baseline pays it most)",
    )
    parser.add_argument(
        "--create-cpu",
        type=nonnegative_float,
        default=0.0,
        help="seconds of the engine's CPU a container creation takes on the action cores, "
        "beside the calls (Docker's; default 0: --cold-start is a delay)",
    )
    parser.add_argument(
        "--no-warm-wait",
        action="store_true",
        help="attained-service policies: every call without an idle container has one made "
        "as soon as memory allows (the invoker's --no-warm-wait)",
    )
    parser.add_argument("--memory-mb", type=positive_int, default=32 * 1024, help="user memory")
    parser.add_argument(
        "--footprint-mb",
        type=positive_int,
        default=None,
        help="keep-alive by footprint: an idle container uses this much (default: it counts "
        "at its limit, the stock invoker's accounting)",
    )
    parser.add_argument(
        "--create-ahead",
        type=nonnegative_int,
        default=0,
        help="containers created ahead for the calls next in line (the Docker backend's "
        "default is 8): a --cold-start then holds no core (default 0: it does)",
    )
    parser.add_argument("--no-warmup", action="store_true", help="start cold, with no learnt E[p]")
    parser.add_argument(
        "--preempt",
        action="store_true",
        help="pause a running call for a much shorter waiting one (docs/policies.md)",
    )
    parser.add_argument(
        "--pause-cost",
        type=nonnegative_float,
        default=0.01,
        help="seconds a container's pause and resume take (with --preempt)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per policy")


def load_trace(args: argparse.Namespace) -> list[TraceCall]:
    """The calls that the command line names."""
    if args.trace:
        return read_trace(args.trace)
    if args.azure:
        spec = SliceSpec(
            functions=args.functions,
            start_minute=args.start_minute,
            minutes=args.minutes,
            max_duration_s=args.max_duration,
            spread=args.spread,
            seed=args.seed,
            time_scale=args.time_scale,
        )
        return draw_slice(read_azure2019(args.azure, args.day), spec)
    if args.azure2021:
        return read_azure2021(
            args.azure2021,
            start_s=args.start_minute * 60.0,
            window_s=args.minutes * 60.0,
            max_duration_s=args.max_duration,
            time_scale=args.time_scale,
        )
    if args.workload == "io-cpu":
        return io_cpu_workload(2.0, args.window or 40.0, args.seed)
    shares = SEBS_CPU_SHARE if args.workload == "sebs" else None
    return uniform_workload(
        args.intensity, args.cores, args.seed, args.window or 60.0, cpu_share=shares
    )


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.ERROR)
    trace = load_trace(args)
    if not trace:
        raise ValueError("no calls to simulate: raise --intensity, --window or --minutes")
    if args.write_trace:
        write_trace(trace, args.write_trace)
    settings = SimulationSettings(
        cores=args.cores,
        cold_start_s=args.cold_start,
        create_cpu_s=args.create_cpu,
        user_memory_mb=args.memory_mb,
        warmup=not args.no_warmup,
        preempt=args.preempt,
        pause_s=args.pause_cost,
        footprint_mb=args.footprint_mb,
        create_ahead=args.create_ahead,
        warm_wait=not args.no_warm_wait,
    )
    results = [simulate(trace, p, settings) for p in (args.policy or POLICY_NAMES)]
    if args.json:
        for r in results:
            print(json.dumps(r))
        return 0
    by_policy = {r["policy"]: r for r in results}
    base, stock = by_policy.get("fifo"), by_policy.get("openwhisk")
    mode = f", preemption (pause {args.pause_cost:g} s)" if args.preempt else ""
    span = max(c.arrival_s for c in trace) or 1.0
    load = offered_load(trace, args.cores, span)
    print(
        f"{len(trace)} calls, {args.cores} cores{mode}, offered load {load:.2f} over {span:.0f} s"
    )
    print(
        f"{'policy':<10} {'mean R':>9} {'p50 R':>8} {'p95 R':>8} {'p99 R':>8} "
        f"{'mean S':>9} {'cold':>5} {'R/FIFO':>7} {'R/ow':>6} {'S/ow':>6} {'calls/s':>8}"
    )
    nan = float("nan")
    for r in results:
        ratio = r["mean_response_s"] / base["mean_response_s"] if base else nan
        r_ow = r["mean_response_s"] / stock["mean_response_s"] if stock else nan
        s_ow = r["mean_stretch"] / stock["mean_stretch"] if stock else nan
        print(
            f"{r['policy']:<10} {r['mean_response_s']:9.2f} {r['p50_response_s']:8.2f} "
            f"{r['p95_response_s']:8.2f} {r['p99_response_s']:8.2f} {r['mean_stretch']:9.1f} "
            f"{r['cold_starts']:5d} {ratio:7.2f} {r_ow:6.2f} {s_ow:6.2f} {r['calls_per_s']:8.0f}"
        )
    functions = sorted({c.function for c in trace})
    if len(functions) <= 12:
        print("mean response per function (s):")
        print(f"{'policy':<10} " + " ".join(f"{fn[:10]:>10}" for fn in functions))
        for r in results:
            per = r["per_function"]
            print(
                f"{r['policy']:<10} "
                + " ".join(f"{per[fn]['mean_response_s']:10.2f}" for fn in functions)
            )
    sys.stdout.flush()
    return 0
