"""Warm blocking-invoke latency (one client) and throughput (several clients) through the
controller-compatible front, embedded mode vs Kafka mode, measured in one run.

Embedded: ``ow-invoker standalone`` (in-process bus, SQLite). Kafka: ``ow-invoker front`` and
``ow-invoker run`` as separate processes over the real Kafka broker and CouchDB-API server.
Each client sends ``POST .../actions/noop?blocking=true&result=true`` back to back. The
baseline for the Kafka mode is the bare broker: two produce → consume hops (activation out,
result back), echoed by our own Kafka client code with nothing else in between.

    python benchmarks/bench_front.py [--sequential 300] [--clients 8] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import aiohttp
from common import kafka_and_couchdb, percentile

from front.identities import basic_auth
from harness.processes import Platform, running_platform
from whisk.bus.kafka import KafkaBus

NOOP = "def main(args):\n    return {}\n"
PATH = "/api/v1/namespaces/_/actions/noop"


async def measure(p: Platform, sequential: int, clients: int, seconds: float) -> dict:
    headers = {"Authorization": basic_auth(p.auth)}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.put(
            f"{p.url}{PATH}?overwrite=true", json={"exec": {"kind": "python:3.11", "code": NOOP}}
        ) as r:
            assert r.status == 200, await r.text()
        url = f"{p.url}{PATH}?blocking=true&result=true"

        async def invoke() -> None:
            async with http.post(url, json={}) as r:
                await r.read()
                assert r.status == 200, r.status

        for _ in range(30):
            await invoke()
        lat = []
        for _ in range(sequential):
            t0 = time.perf_counter()
            await invoke()
            lat.append((time.perf_counter() - t0) * 1000)
        done = 0
        stop = time.perf_counter() + seconds

        async def client() -> None:
            nonlocal done
            while time.perf_counter() < stop:
                await invoke()
                done += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        rate = done / (time.perf_counter() - t0)
    return {"p50": percentile(lat, 50), "p99": percentile(lat, 99), "rate": rate}


async def kafka_round_trip(bootstrap: str, n: int) -> float:
    """p50 ms of a message sent to one topic, echoed to a second, consumed from there."""
    bus = KafkaBus(bootstrap)
    for topic in ("bench-out", "bench-back"):
        await bus.ensure_topic(topic, {})
    out, back = bus.producer(), bus.producer()
    inbox, outbox = bus.consumer("bench-out", "bench-echo"), bus.consumer("bench-back", "bench")
    parts = (out, back, inbox, outbox)
    for part in parts:
        await part.start()

    async def echo() -> None:
        while True:
            for r in await inbox.poll(100, 1.0):
                await back.send("bench-back", r.value)

    task = asyncio.create_task(echo())
    lat = []
    try:
        for i in range(n + 30):  # the first 30 wait for the groups to form and warm up
            t0 = time.perf_counter()
            await out.send("bench-out", b"%d" % i)
            while not await outbox.poll(10, 1.0):
                pass
            lat.append((time.perf_counter() - t0) * 1000)
    finally:
        task.cancel()
        for part in parts:
            await part.stop()
    return percentile(lat[30:], 50)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    results = {}
    with kafka_and_couchdb() as (kafka, couch), tempfile.TemporaryDirectory() as tmp:
        for mode in ("embedded", "kafka"):
            with running_platform(mode, Path(tmp) / mode, kafka, couch) as p:
                results[mode] = asyncio.run(measure(p, args.sequential, args.clients, args.seconds))
        bare = asyncio.run(kafka_round_trip(kafka.bootstrap, args.sequential))
    print("== front: warm blocking invokes of a no-op python action (result=true)")
    for mode, r in results.items():
        print(
            f"{mode:<9} latency p50 {r['p50']:.2f} ms, p99 {r['p99']:.2f} ms; "
            f"throughput with {args.clients} clients {r['rate']:.0f} invokes/s"
        )
    e, k = results["embedded"], results["kafka"]
    print(
        f"kafka/embedded: latency p50 x{k['p50'] / e['p50']:.2f}, "
        f"throughput x{k['rate'] / e['rate']:.2f}"
    )
    print(
        f"bare Kafka, two produce->consume hops: p50 {bare:.2f} ms; kafka mode / bare "
        f"x{k['p50'] / bare:.2f} (the front and the invoker add {k['p50'] - bare:.2f} ms)"
    )


if __name__ == "__main__":
    main()
