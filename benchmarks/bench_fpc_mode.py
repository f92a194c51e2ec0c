"""The scheduler ("FPC") mode against the sharding mode, in one run (issue 39).

    python benchmarks/bench_fpc_mode.py [--warm 40] [--cold 8] [--window 20] [--scale 0.25]
                                        [--policy gittins-aged ...]

Real Kafka and CouchDB, process containers, the same invoker code in both modes, on one
action core (``--cores``): the sharding mode and the scheduler mode with policy ``fc``, and
the scheduler mode with ``openwhisk`` (every pulled call runs at once, sharing the core, as
the stock FPC invoker runs them); ``--policy`` adds scheduler-mode runs of other policies
(an attained-service one orders the pulled calls' CPU as it orders pushed ones'). In the
sharding mode the controller stub of ``harness/controller.py`` publishes each activation on
``invoker<N>``; in the scheduler mode the stand-in scheduler of ``harness/fpc_scheduler.py``
(the real gRPC ActivationService and Kafka creation messages, not the Scala scheduler)
queues it, and the node's containers pull it. Prints, per mode and policy, with the ratio to
the sharding mode's:

- warm blocking latency: ``--warm`` calls of a python echo action one after the other, from
  publishing (enqueueing) the activation to its result ack (p50, mean);
- cold blocking latency: ``--cold`` new actions called once; in the scheduler mode the
  activation is queued and a container asked for, as the scheduler does for an action with
  none (p50, mean);
- the paper's CPU-bound overload: the SeBS mix of ``bench_policies_live.py`` (each function a
  CPU-burning action, service times scaled by ``--scale``) replayed open-loop at
  ``--intensity`` for ``--window`` s: mean response and mean stretch. The scheduler mode's
  node gets ``--containers`` containers per function first (the stand-in creates no more on
  its own), so that several pulled calls wait in its queue for the policy to order.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_policies_live import BUSY, action_name
from common import kafka_and_couchdb

from harness.controller import ControllerStub, running_invoker
from harness.fpc_scheduler import StandInScheduler, stand_in_scheduler
from invoker.workloads import SEBS_MIX, TraceCall, uniform_workload
from whisk.clock import SystemClock
from whisk.protocol import QualifiedName
from whisk.protocol.controller import activation_message
from whisk.summary import Outcome, summarize

ECHO = b"def main(args):\n    return args\n"


class Mode:
    """How calls reach the node: published on invoker<N>, or queued at the scheduler."""

    def __init__(self, stub: ControllerStub, scheduler: StandInScheduler | None) -> None:
        self.stub, self.scheduler = stub, scheduler

    async def invoke(self, action: QualifiedName, rev: str, content: dict[str, Any]) -> str:
        if self.scheduler is None:
            return await self.stub.invoke(action, rev, content=content)
        msg = activation_message(
            action, rev, start_ms=SystemClock().epoch_ms(), blocking=True, content=content
        )
        self.scheduler.enqueue("guest", action, rev, msg.to_json())
        return msg.activation_id

    async def containers(self, action: QualifiedName, rev: str, n: int) -> None:
        """Scheduler mode: ``n`` containers of the action, acked."""
        if self.scheduler is not None:
            for _ in range(n):
                creation = await self.scheduler.create_container(0, "guest", action, rev)
                ack = await self.scheduler.wait_ack(creation.creation_id)
                if ack.error is not None:
                    raise RuntimeError(f"creation refused: {ack.error} {ack.reason}")

    async def call(self, action: QualifiedName, rev: str, content: dict[str, Any]) -> float:
        """One blocking call: seconds from publishing it to its result."""
        t0 = time.perf_counter()
        aid = await self.invoke(action, rev, content)
        await self.stub.wait_acks(aid, timeout_s=600)
        return time.perf_counter() - t0


async def latencies(mode: Mode, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    action, rev = await mode.stub.create_action("echo", ECHO, logs_mb=0)
    await mode.containers(action, rev, 1)
    await mode.call(action, rev, {"i": -1})  # initialised
    warm = [await mode.call(action, rev, {"i": i}) for i in range(args.warm)]
    cold = []
    for i in range(args.cold):
        action, rev = await mode.stub.create_action(f"cold{i}", ECHO, logs_mb=0)
        if mode.scheduler is None:
            cold.append(await mode.call(action, rev, {"i": i}))
            continue
        t0 = time.perf_counter()  # queued first, then a container asked for
        aid = await mode.invoke(action, rev, {"i": i})
        await mode.containers(action, rev, 1)
        await mode.stub.wait_acks(aid, timeout_s=600)
        cold.append(time.perf_counter() - t0)
    return warm, cold


async def overload(
    mode: Mode, args: argparse.Namespace, trace: list[TraceCall], mix: dict[str, float]
) -> dict[str, Any]:
    actions = {}
    for fn in mix:
        action, rev = await mode.stub.create_action(
            action_name(fn), BUSY, timeout_ms=600_000, logs_mb=0
        )
        actions[fn] = (action, rev)
        await mode.containers(action, rev, args.containers)
    idle = {}
    for fn, (action, rev) in actions.items():  # warm, learn E[p], idle time for the stretch
        idle[fn] = statistics.median([await mode.call(action, rev, {"d": mix[fn]}) for _ in "abc"])
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.5

    async def call(c: TraceCall) -> float:
        await asyncio.sleep(max(0.0, start + c.arrival_s - loop.time()))
        return await mode.call(*actions[c.function], {"d": c.duration_s})

    responses = await asyncio.gather(*(call(c) for c in trace))
    return summarize(
        [
            Outcome(c.function, r, c.duration_s + max(0.0, idle[c.function] - mix[c.function]))
            for c, r in zip(trace, responses, strict=True)
        ]
    )


async def measure(
    name: str,
    policy: str,
    kafka: Any,
    couch: Any,
    args: argparse.Namespace,
    trace: list,
    mix: dict,
) -> dict[str, Any]:
    settings = {
        "mode": name,
        "policy": policy,
        "action_cores": args.cores,
        "user_memory_mb": args.memory_mb,
        "pause_grace_s": 600.0,
    }
    with tempfile.TemporaryDirectory(prefix="ow-fpc-bench-", dir="/var/tmp") as tmp:
        async with running_invoker(kafka, couch, Path(tmp), **settings) as (inv, stub):
            if name == "sharding":
                mode = Mode(stub, None)
                warm, cold = await latencies(mode, args)
                return {"warm": warm, "cold": cold, "load": await overload(mode, args, trace, mix)}
            prefix = inv.config.topic_prefix
            async with stand_in_scheduler(kafka.bootstrap, topic_prefix=prefix) as scheduler:
                mode = Mode(stub, scheduler)
                warm, cold = await latencies(mode, args)
                load = await overload(mode, args, trace, mix)
                await inv.stop(deadline_s=5)  # while the scheduler still answers the goodbyes
                return {"warm": warm, "cold": cold, "load": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=40, help="warm calls, one at a time")
    parser.add_argument("--cold", type=int, default=8, help="new actions, one call each")
    parser.add_argument("--intensity", type=float, default=120.0, help="calls per core-minute")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of arrivals")
    parser.add_argument("--scale", type=float, default=0.25, help="service-time scale")
    parser.add_argument("--containers", type=int, default=4, help="per function (scheduler)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--cores",
        type=lambda text: tuple(int(c) for c in text.split(",")),
        default=(1,),
        help="the action cores, comma-separated (default: 1)",
    )
    parser.add_argument("--memory-mb", type=int, default=16384, help="user memory")
    parser.add_argument(
        "--policy", action="append", default=[], help="another policy in the scheduler mode"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    mix = {fn: d * args.scale for fn, d in SEBS_MIX.items()}
    trace = uniform_workload(
        args.intensity / args.scale, len(args.cores), args.seed, args.window, mix
    )
    work = sum(c.duration_s for c in trace)
    print(
        f"policy fc, {len(args.cores)} action core(s); warm: {args.warm} calls, cold: "
        f"{args.cold} actions; overload: {len(trace)} calls in {args.window:.0f} s, "
        f"{work / args.window / len(args.cores):.2f}x the cores"
    )
    results = {}
    with kafka_and_couchdb() as (kafka, couch):
        for name, policy in (*RUNS, *(("fpc", p) for p in args.policy)):
            t0 = time.perf_counter()
            run = measure(name, policy, kafka, couch, args, trace, mix)
            results[f"{name} {policy}"] = asyncio.run(run)
            print(f"  {name} {policy}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    width = max(14, *(len(name) for name in results))
    print(
        f"{'mode':<{width}} {'warm p50 ms':>11} {'warm mean':>9} {'cold p50 ms':>11} "
        f"{'cold mean':>9} {'load mean R s':>13} {'mean S':>7}"
    )
    rows = {}
    for name, r in results.items():
        rows[name] = [
            statistics.median(r["warm"]) * 1000,
            statistics.fmean(r["warm"]) * 1000,
            statistics.median(r["cold"]) * 1000,
            statistics.fmean(r["cold"]) * 1000,
            r["load"]["mean_response_s"],
            r["load"]["mean_stretch"],
        ]
        print(
            f"{name:<{width}} "
            + " ".join(f"{v:>{w}.{p}f}" for v, (w, p) in zip(rows[name], FORMAT, strict=True))
        )
    base = rows["sharding fc"]
    for name, row in list(rows.items())[1:]:
        ratios = [v / b for v, b in zip(row, base, strict=True)]
        said = " ".join(f"{v:>{w}.2f}" for v, (w, _) in zip(ratios, FORMAT, strict=True))
        print(f"{name + ' / sharding fc:':<{width + 14}} {said}")


RUNS = (("sharding", "fc"), ("fpc", "fc"), ("fpc", "openwhisk"))
FORMAT = ((11, 1), (9, 1), (11, 1), (9, 1), (13, 2), (7, 1))


if __name__ == "__main__":
    main()
