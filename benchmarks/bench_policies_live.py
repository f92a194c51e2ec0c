"""Live policy experiment: the paper's protocol on the real service.

Real Kafka, the real CouchDB-API server, process containers (``--backend docker``: the
Docker backend on the project's dockerd; ``podman``: on Podman), and real action code: one
CPU-bound action per function of the SeBS mix, burning that function's one-core service time
(scaled by ``--scale``). For each policy (FIFO, SEPT, EECT, RECT, FC and the stock
``openwhisk`` baseline) a fresh invoker gets the same seeded call sequence, spread uniformly
over the window and replayed open-loop (each call published at its scheduled time, never
waiting for replies), at an intensity that overloads the action cores. Idle medians are
measured first (one call at a time) for the stretch. Prints mean/median/p95/p99 response and
mean stretch per policy with the ratios to FIFO and to the baseline, all from one run.

``--mix azure`` replays a slice of a real Azure Functions 2019 sample instead (issue 27):
one CPU-bound action per function, each call burning its drawn duration times ``--scale``,
arrivals compressed by ``--time-scale``; the same scaled trace then runs in the simulator
(as many cores, its own scheduler) and both tables are printed, one beside the other.

``--mix io-cpu`` runs issue 14's mix instead: a 1 s sleeping action and a 200 ms CPU-bound
action, each called at 2 calls/s (arrivals uniformly at random over ``--window``, default
40 s), on the same one action core.

    python benchmarks/bench_policies_live.py [--intensity 120] [--window 20] [--scale 0.25]
    python benchmarks/bench_policies_live.py --mix io-cpu --policy fc --policy openwhisk
    python benchmarks/bench_policies_live.py --mix azure --policy openwhisk --policy fc \
        --policy sept-share

A policy given as ``NAME+no-warm-wait`` runs with the invoker's ``--no-warm-wait`` (an
attained-service policy's every call without an idle container starts one).
``--sim-cold-start`` and ``--sim-create-cpu`` give the simulator beside a cold start (its
engine CPU on the action cores), to model the Docker backend's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common import LABEL, kafka_and_couchdb, start_engines

from containers.docker.backend import DockerBackend
from containers.docker.local import BINDS, local_images
from harness.controller import running_invoker
from invoker.azure import SliceSpec, draw_slice, read_azure2019
from invoker.simulate import SimulationSettings, simulate
from invoker.workloads import (
    IO_CPU_MIX,
    SEBS_MIX,
    TraceCall,
    io_cpu_workload,
    uniform_workload,
)
from policies import POLICY_NAMES
from whisk.summary import Outcome, summarize

BUSY = b"""
import time
def main(args):
    end = time.process_time() + float(args["d"])
    x = 0
    while time.process_time() < end:
        x += 1
    return {"spins": x}
"""

SLEEP = b"""
import time
def main(args):
    time.sleep(float(args["d"]))
    return {"slept": args["d"]}
"""


def action_name(fn: str) -> str:
    return "f" + fn.replace(".", "-")


NO_WARM_WAIT = "+no-warm-wait"


def policy_label(text: str) -> str:
    """A policy name, or one with ``+no-warm-wait``."""
    if text.removesuffix(NO_WARM_WAIT) not in POLICY_NAMES:
        raise argparse.ArgumentTypeError(f"{text!r}: a policy ({', '.join(POLICY_NAMES)})")
    return text


async def run_policy(
    label: str, args, kafka, couch, trace, mix, sleeping=frozenset()
) -> tuple[dict, dict]:
    policy = label.removesuffix(NO_WARM_WAIT)
    backend = None
    if args.engine_host:  # the local runtime images, each container in a namespace of its own
        labels = {LABEL: "1"}
        backend = DockerBackend(
            args.engine_host, "wskbench", images=local_images(), binds=BINDS, labels=labels,
            network="none",
        )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        async with running_invoker(
            kafka,
            couch,
            Path(tmp),
            backend,
            policy=policy,
            no_warm_wait=label.endswith(NO_WARM_WAIT),
            action_cores=args.cores,
            user_memory_mb=args.memory_mb,
            pause_grace_s=600,
        ) as (invoker, stub):
            actions = {}
            for fn in mix:
                actions[fn] = await stub.create_action(
                    action_name(fn),
                    SLEEP if fn in sleeping else BUSY,
                    timeout_ms=600_000,
                    logs_mb=0,
                )
            idle: dict[str, float] = {}
            for fn, (action, rev) in actions.items():  # warm containers, learn E[p], idle p
                samples = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    aid = await stub.invoke(action, rev, content={"d": mix[fn]})
                    await stub.wait_acks(aid, timeout_s=120)
                    samples.append(time.perf_counter() - t0)
                idle[fn] = statistics.median(samples)
            loop = asyncio.get_running_loop()

            async def call(c, start: float) -> float:
                await asyncio.sleep(max(0.0, start + c.arrival_s - loop.time()))
                sent = loop.time()
                action, rev = actions[c.function]
                # The controller merges parameters into the content; so does this load source.
                aid = await stub.invoke(action, rev, content={"d": c.duration_s})
                await stub.wait_acks(aid, timeout_s=3600)
                return loop.time() - sent

            if args.warm_pass:  # the same traffic once, unmeasured: the node as it leaves it
                start = loop.time() + 0.5
                await asyncio.gather(*(call(c, start) for c in trace))
            pool = invoker.pool
            cold_before, warm_before = pool.cold_starts, pool.warm_starts  # after the warm-up
            waits = invoker.warm_waits
            parked_before = waits.parked if waits is not None else 0
            start = loop.time() + 0.5
            responses = await asyncio.gather(*(call(c, start) for c in trace))
            order = invoker.cpu_order.status() if invoker.cpu_order is not None else None
            waited = waits.parked - parked_before if waits is not None else None
            cold_s = pool.mean_creation_s
            cold, warm = pool.cold_starts - cold_before, pool.warm_starts - warm_before
    # Stretch over the call's own idle time: its work plus the function's idle overhead.
    outcomes = [
        Outcome(c.function, r, c.duration_s + max(0.0, idle[c.function] - mix[c.function]))
        for c, r in zip(trace, responses, strict=True)
    ]
    summary = summarize(outcomes)
    summary["starts"] = {"cold": cold, "warm": warm, "cold_s": cold_s}
    if waited is not None:  # calls that waited for a busy container
        summary["starts"]["waited"] = waited
    if order is not None:  # what the attained-service order cost the invoker
        summary["cpu_order"] = order
    return summary, idle


@contextmanager
def engine(backend: str) -> Iterator[str | None]:
    """The Docker backend's engine, started for the run; None for the process backend."""
    if backend == "process":
        yield None
        return
    hosts, stop = start_engines([backend])
    try:
        yield hosts[backend]
    finally:
        stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--intensity",
        type=float,
        default=120.0,
        help="calls per core per minute (of the scaled mix)",
    )
    parser.add_argument("--mix", choices=["sebs", "io-cpu", "azure"], default="sebs")
    parser.add_argument(
        "--azure",
        default=str(Path(__file__).parent / "data" / "azure2019-invitro-66"),
        help="the 2019 sample (--mix azure)",
    )
    parser.add_argument("--functions", type=int, default=8, help="functions (--mix azure)")
    parser.add_argument("--start-minute", type=int, default=1200, help="(--mix azure)")
    parser.add_argument("--minutes", type=int, default=2, help="(--mix azure)")
    parser.add_argument("--time-scale", type=float, default=0.5, help="(--mix azure)")
    parser.add_argument(
        "--window", type=float, default=None, help="seconds of arrivals (20; io-cpu: 40)"
    )
    parser.add_argument("--scale", type=float, default=0.25, help="service-time scale")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--cores",
        type=lambda text: tuple(int(c) for c in text.split(",")),
        default=(1,),
        help="the action cores, comma-separated (default: 1)",
    )
    parser.add_argument("--memory-mb", type=int, default=8192, help="user memory")
    parser.add_argument("--policy", action="append", type=policy_label)
    parser.add_argument(
        "--sim-cold-start", type=float, default=0.0, help="the simulator's cold start (s)"
    )
    parser.add_argument(
        "--sim-create-cpu",
        type=float,
        default=0.0,
        help="of the simulator's cold start, the engine's CPU on the action cores (s)",
    )
    parser.add_argument(
        "--backend",
        choices=["process", "docker", "podman"],
        default="process",
        help="the containers: the process backend, or the Docker backend on the project's "
        "dockerd or Podman (started under .state/bench)",
    )
    parser.add_argument(
        "--warm-pass",
        action="store_true",
        help="replay the trace once, unmeasured, before the measured replay: the node's "
        "containers and statistics as the same traffic leaves them (a node in its steady "
        "state, not one fresh from its warm-up calls)",
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    sleeping: frozenset[str] = frozenset()
    if args.mix == "io-cpu":
        args.window = args.window or 40.0
        mix = {fn: d for fn, (d, _) in IO_CPU_MIX.items()}
        sleeping = frozenset(fn for fn, (_, cpu) in IO_CPU_MIX.items() if cpu == 0)
        trace = io_cpu_workload(2.0, args.window, args.seed)
        work = sum(c.cpu_s or 0.0 for c in trace)
    elif args.mix == "azure":
        spec = SliceSpec(
            functions=args.functions,
            start_minute=args.start_minute,
            minutes=args.minutes,
            max_duration_s=20.0,
            time_scale=args.time_scale,
        )
        trace = [
            TraceCall(c.arrival_s, c.function, c.duration_s * args.scale)
            for c in draw_slice(read_azure2019(args.azure), spec)
        ]
        args.window = max(c.arrival_s for c in trace)
        mix = {}  # each function's warm-up duration: its first call's
        for c in trace:
            mix.setdefault(c.function, c.duration_s)
        work = sum(c.duration_s for c in trace)
    else:
        args.window = args.window or 20.0
        mix = {fn: d * args.scale for fn, d in SEBS_MIX.items()}
        # The intensity is per minute of unscaled work: scale it so the overload factor stays.
        trace = uniform_workload(
            args.intensity / args.scale, len(args.cores), args.seed, args.window, mix
        )
        work = sum(c.duration_s for c in trace)
    print(
        f"{len(trace)} calls in {args.window:.0f} s on {len(args.cores)} action core(s): "
        f"{work:.1f} s of CPU work ({work / args.window / len(args.cores):.2f}x the cores)"
    )
    results = {}
    with kafka_and_couchdb() as (kafka, couch), engine(args.backend) as args.engine_host:
        for policy in args.policy or POLICY_NAMES:
            t0 = time.perf_counter()
            results[policy], _ = asyncio.run(
                run_policy(policy, args, kafka, couch, trace, mix, sleeping)
            )
            starts = results[policy]["starts"]
            print(
                f"  {policy}: done in {time.perf_counter() - t0:.0f} s, "
                f"{starts['cold']} cold (made in {starts['cold_s'] * 1000:.0f} ms each, "
                f"lately) and "
                f"{starts['warm']} warm starts"
                + (
                    f", {starts['waited']} waited for a busy container"
                    if "waited" in starts
                    else ""
                ),
                flush=True,
            )
            if order := results[policy].get("cpu_order"):
                writes, spent = order["writes"], order["writeSeconds"]
                print(
                    f"    cpu.weight writes {writes} ({writes / len(trace):.1f} a call, "
                    f"{order['failedWrites']} failed), {spent * 1000:.0f} ms of the invoker's "
                    f"time ({spent / max(writes, 1) * 1e6:.0f} us each)",
                    flush=True,
                )
    base = results.get("fifo")
    stock = results.get("openwhisk")
    print(
        f"{'policy':<10} {'mean R':>8} {'p50 R':>8} {'p95 R':>8} {'p99 R':>8} {'mean S':>8}"
        f" {'R/FIFO':>7} {'S/FIFO':>7} {'R/ow':>6} {'S/ow':>6}"
    )
    for policy, r in results.items():
        ratios = []
        for ref in (base, stock):
            for key in ("mean_response_s", "mean_stretch"):
                ratios.append(r[key] / ref[key] if ref else float("nan"))
        print(
            f"{policy:<10} {r['mean_response_s']:8.2f} {r['p50_response_s']:8.2f} "
            f"{r['p95_response_s']:8.2f} {r['p99_response_s']:8.2f} {r['mean_stretch']:8.1f} "
            f"{ratios[0]:7.2f} {ratios[1]:7.2f} {ratios[2]:6.2f} {ratios[3]:6.2f}"
        )
    worst = {
        p: max(v["mean_response_s"] for v in r["per_function"].values()) for p, r in results.items()
    }
    print("mean response per function (s), and ratio to openwhisk:")
    for policy, r in results.items():
        per = r["per_function"]
        print(
            f"  {policy:<10} "
            + ", ".join(
                f"{fn} {v['mean_response_s']:.2f}"
                + (
                    f" ({v['mean_response_s'] / stock['per_function'][fn]['mean_response_s']:.2f})"
                    if stock
                    else ""
                )
                for fn, v in per.items()
            )
        )
    print(
        "worst per-function mean response (no function starved): "
        + ", ".join(f"{p} {w:.1f} s" for p, w in worst.items())
    )
    if args.mix == "azure":
        cores = len(args.cores)
        cold = (
            f"cold start {args.sim_cold_start:g} s, {args.sim_create_cpu:g} s of it engine CPU"
            if args.sim_cold_start or args.sim_create_cpu
            else "no cold start"
        )
        print(f"the same trace in the simulator ({cores} core(s), {cold}):")
        for policy in results:
            settings = SimulationSettings(
                cores=cores,
                user_memory_mb=args.memory_mb,
                cold_start_s=args.sim_cold_start,
                create_cpu_s=args.sim_create_cpu,
                warm_wait=not policy.endswith(NO_WARM_WAIT),
            )
            r = simulate(trace, policy.removesuffix(NO_WARM_WAIT), settings)
            print(
                f"  {policy:<10} mean R {r['mean_response_s']:.2f}, p99 R "
                f"{r['p99_response_s']:.2f}, mean S {r['mean_stretch']:.1f}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
