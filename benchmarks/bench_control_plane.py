"""Control-plane benchmark: no-op actions through real Kafka, the CouchDB-API server and warm
process containers.

Prints (1) the cold start of a python action (spawn + /init + first /run, from the records'
``initTime`` and the invoker's run time), (2) the invoker's own added latency per call at
p50/p99 (receipt to result ack handed to Kafka, minus /init, /run and queueing; broker and
database excluded) over sequential blocking calls, and (3) sustained activations per second
for a burst of non-blocking calls. The baseline, measured in the same run, is the bare warm
container driven directly over HTTP in a tight loop (no bus, no database, no invoker).

    python benchmarks/bench_control_plane.py [--calls 5000] [--sequential 500] [--cold 20]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
from pathlib import Path

from common import kafka_and_couchdb, percentile

from containers.backend import ContainerSpec
from containers.process import ProcessBackend
from invoker.config import available_cores
from invoker.protocol import dumps
from tests.integration.harness import running_invoker

NOOP = b"def main(args):\n    return {}\n"


async def bare_container_rate(calls: int) -> float:
    """The baseline: /run on one warm process container, back to back."""
    with tempfile.TemporaryDirectory() as d:
        backend = ProcessBackend(state_dir=Path(d), name_prefix="benchbare")
        await backend.start()
        c = await backend.create(
            ContainerSpec(name="benchbare_1_noop", kind="python:3.11", memory_mb=256)
        )
        value = {"name": "noop", "main": "main", "binary": False, "code": NOOP.decode(), "env": {}}
        await c.init(dumps({"value": value}), 10)
        await c.assign_cores(frozenset({available_cores()[-1]}))
        body = b'{"value":{}}'
        for _ in range(200):
            await c.run(body, 10)
        start = time.perf_counter()
        for _ in range(calls):
            await c.run(body, 10)
        elapsed = time.perf_counter() - start
        await c.destroy()
        await backend.close()
    return calls / elapsed


async def main_async(args: argparse.Namespace, kafka, couch) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with running_invoker(kafka, couch, Path(tmp), policy="fifo", max_pending=100_000) as (
            invoker,
            ctl,
        ):
            # 1. Cold starts: a fresh action each time, so each call spawns and inits.
            cold = []
            for i in range(args.cold):
                action, rev = await ctl.create_action(f"cold{i}", NOOP, logs_mb=0)
                t0 = time.perf_counter()
                aid = await ctl.invoke(action, rev, blocking=True)
                await ctl.wait_acks(aid)
                cold.append((time.perf_counter() - t0) * 1000)
            init_times = []
            for acks in ctl.acks.values():
                rec = acks[0].get("response")
                if isinstance(rec, dict):
                    init_times += [a["value"] for a in rec["annotations"] if a["key"] == "initTime"]
            # 2. Added latency: sequential blocking calls of a warm no-op action.
            action, rev = await ctl.create_action("noop", NOOP)
            for _ in range(20):
                await ctl.wait_completion(await ctl.invoke(action, rev))
            invoker.metrics.added_latency_samples.clear()
            e2e = []
            for _ in range(args.sequential):
                t0 = time.perf_counter()
                aid = await ctl.invoke(action, rev, blocking=True)
                await ctl.wait_acks(aid)
                e2e.append((time.perf_counter() - t0) * 1000)
            added = [s * 1000 for s in invoker.metrics.added_latency_samples]
            # 3. Throughput: a burst of non-blocking calls, produced as fast as Kafka takes them.
            invoker.metrics.added_latency_samples.clear()
            t0 = time.perf_counter()
            aids = await asyncio.gather(
                *(ctl.invoke(action, rev, blocking=False) for _ in range(args.calls))
            )
            produced = time.perf_counter() - t0
            for aid in aids:
                await ctl.wait_completion(aid, timeout_s=600)
            elapsed = time.perf_counter() - t0
            burst_added = [s * 1000 for s in invoker.metrics.added_latency_samples]
    bare = await bare_container_rate(args.calls)
    rate = args.calls / elapsed
    print("== control plane (real Kafka, CouchDB-API server, warm process containers)")
    print(
        f"python cold start: median {percentile(init_times, 50):.1f} ms /init, "
        f"{percentile(cold, 50):.1f} ms end to end (goal <= 20 ms for the process backend)"
    )
    print(
        f"added latency, sequential: p50 {percentile(added, 50):.3f} ms, "
        f"p99 {percentile(added, 99):.3f} ms (goal p50 <= 1 ms, p99 <= 5 ms; "
        f"stock invoker 12-40 ms p50); client round trip p50 {percentile(e2e, 50):.2f} ms"
    )
    print(
        f"added latency under the burst: p50 {percentile(burst_added, 50):.3f} ms, "
        f"p99 {percentile(burst_added, 99):.3f} ms"
    )
    print(
        f"sustained: {rate:.0f} activations/s ({args.calls} calls in {elapsed:.2f} s; "
        f"produced in {produced:.2f} s) (goal >= 1000/s)"
    )
    print(
        f"baseline, bare warm container over HTTP: {bare:.0f} calls/s; "
        f"invoker/bare = {rate / bare:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--sequential", type=int, default=500)
    parser.add_argument("--cold", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with kafka_and_couchdb() as (kafka, couch):
        asyncio.run(main_async(args, kafka, couch))


if __name__ == "__main__":
    main()
