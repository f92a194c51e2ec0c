"""Control-plane benchmark: no-op actions through real Kafka, the CouchDB-API server and warm
process containers, with the invoker in its own process (``ow-invoker run``), as deployed.

Prints (1) the invoker's own added latency per call at p50/p99 over sequential blocking calls
(from taking the message off the Kafka consumer to the activation record built after /run,
minus /init, /run and the time queued for a core; building and sending the result ack, the
broker and the database are outside it; read from the invoker's admin ``/status``), (2) the
cold start of a python action (spawn + /init, the records' ``initTime``), and (3) sustained
activations per second for a burst of non-blocking calls produced in bulk. The baseline,
measured in the same run, is the bare warm container driven directly over HTTP in a tight
loop (no bus, no database, no invoker).

    python benchmarks/bench_control_plane.py [--calls 10000] [--sequential 500] [--cold 20]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
from pathlib import Path

import aiohttp
from aiokafka import AIOKafkaProducer
from common import kafka_and_couchdb, percentile

from containers.backend import ContainerSpec
from containers.process.backend import ProcessBackend
from front.identities import basic_auth
from harness.controller import controller, make_config
from harness.processes import InvokerProcess
from invoker.config import available_cores
from whisk.protocol import dumps
from whisk.protocol.controller import activation_message

NOOP = b"def main(args):\n    return {}\n"


async def bare_container_rate(calls: int, core: int) -> float:
    """The baseline: /run on one warm process container, back to back."""
    with tempfile.TemporaryDirectory() as d:
        backend = ProcessBackend(state_dir=Path(d), name_prefix="benchbare")
        await backend.start()
        c = await backend.create(
            ContainerSpec(name="benchbare_1_noop", kind="python:3.11", memory_mb=256)
        )
        value = {"name": "noop", "main": "main", "binary": False, "code": NOOP.decode(), "env": {}}
        await c.init(dumps({"value": value}), 10)
        await c.assign_cores(frozenset({core}))
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


async def status(proc: InvokerProcess) -> dict:
    auth = {"Authorization": basic_auth("invoker.user:invoker.pass")}
    async with (
        aiohttp.ClientSession(headers=auth) as http,
        http.get(f"http://127.0.0.1:{proc.admin_port}/status") as r,
    ):
        return await r.json()


async def main_async(args: argparse.Namespace, kafka, couch, tmp: Path) -> None:
    core = available_cores()[-1]
    config = make_config(tmp, policy="fifo", action_cores=(core,))
    proc = InvokerProcess(config, kafka.bootstrap, couch, tmp / "invoker.log")
    try:
        async with controller(kafka, couch, config) as ctl:
            proc.start()
            action, rev = await ctl.create_action("noop", NOOP)
            aid = await ctl.invoke(action, rev)
            await ctl.wait_acks(aid, timeout_s=120)  # the invoker is up and the container warm
            # 1. Added latency: sequential blocking calls of a warm no-op action.
            e2e = []
            for _ in range(args.sequential):
                t0 = time.perf_counter()
                await ctl.wait_acks(await ctl.invoke(action, rev, blocking=True))
                e2e.append((time.perf_counter() - t0) * 1000)
            added = (await status(proc))["addedLatency"]
            # 2. Cold starts: a fresh action each time, so each call spawns and inits.
            init_times = []
            for i in range(args.cold):
                cold, crev = await ctl.create_action(f"cold{i}", NOOP)
                aid = await ctl.invoke(cold, crev, blocking=True)
                record = (await ctl.wait_acks(aid))[0]["response"]
                init_times += [a["value"] for a in record["annotations"] if a["key"] == "initTime"]
            # 3. Throughput: a burst produced in bulk, as a loaded controller would.
            producer = AIOKafkaProducer(
                bootstrap_servers=kafka.bootstrap, linger_ms=5, max_batch_size=1 << 20
            )
            await producer.start()
            aids = []
            t0 = time.perf_counter()
            for _ in range(args.calls):
                msg = activation_message(action, rev, start_ms=1, blocking=False)
                aids.append(msg.activation_id)
                await producer.send(config.invoker_topic, dumps(msg.to_json()))
            await producer.flush()
            produced = time.perf_counter() - t0
            await producer.stop()
            for aid in aids:
                await ctl.wait_completion(aid, timeout_s=600)
            elapsed = time.perf_counter() - t0
    finally:
        proc.terminate()
    bare = await bare_container_rate(min(args.calls, 5000), core)
    rate = args.calls / elapsed
    print("== control plane (ow-invoker run; real Kafka, CouchDB-API server, process containers)")
    print(
        f"added latency, sequential: p50 {added['p50_ms']:.3f} ms, p99 {added['p99_ms']:.3f} ms "
        f"(goal p50 <= 1 ms, p99 <= 5 ms; published, not measured here: the stock Scala "
        f"invoker 12-40 ms p50, Ilúvatar 1-3 ms); "
        f"client round trip through Kafka p50 {percentile(e2e, 50):.2f} ms"
    )
    print(
        f"python cold start: median /init {percentile(init_times, 50):.1f} ms "
        f"(goal <= 20 ms for the process backend)"
    )
    print(
        f"sustained: {rate:.0f} activations/s ({args.calls} calls in {elapsed:.2f} s, "
        f"produced in {produced:.2f} s) (goal >= 1000/s)"
    )
    print(
        f"baseline, bare warm container over HTTP: {bare:.0f} calls/s; "
        f"invoker/bare = {rate / bare:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--sequential", type=int, default=500)
    parser.add_argument("--cold", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with kafka_and_couchdb() as (kafka, couch), tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main_async(args, kafka, couch, Path(tmp)))


if __name__ == "__main__":
    main()
