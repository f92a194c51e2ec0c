"""Many distinct actions (issue 42): throughput when actions outnumber warm slots.

    python benchmarks/bench_many_actions.py                    # N = 1, 10, 100, 1000; both backends
    python benchmarks/bench_many_actions.py --actions 100 --backends process --seconds 30
    python benchmarks/bench_many_actions.py --platform embedded --backends process

apache/openwhisk#3501: a node serving one action answers thousands of calls a second, one
serving 100 distinct actions a few dozen, because every call needs a new container. Here, for
each backend (the process backend, sandboxed as by default; the Docker backend on the
project's dockerd, as production runs it), each N and each keep-alive accounting, a fresh
invoker on real Kafka and CouchDB (the controller stub of ``harness/controller.py``
publishes the activations and reads the acks, as a controller would), with the stock
invoker's 2048 MB of user memory (eight 256 MB containers at their limits) and the default
policy and cores. N python actions burning a few ms of CPU each; C closed-loop clients each
invoke a random one of them (seeded) blocking, back to back, for ``--seconds``.

The accountings, one beside the other in the same run: ``limit`` (every container counts at
its limit, idle ones evicted least recently used first: the stock invoker's) and
``footprint`` (idle containers count at what they use, evicted by value only for a call
that needs their memory: ours, the default; docs/operations.md, keep-alive).

``--platform embedded`` runs the same through ``ow-invoker standalone`` instead (the
controller-compatible front and the invoker in one process, its in-process bus and SQLite
store; the process backend only), each client calling ``POST .../actions/aN?blocking=true``
on its REST API as ``wsk`` would; the pool's memory is not sampled there.

Prints, per backend, N and accounting: calls/s, p50 and p99 latency, the cold-start fraction
(calls whose record has ``initTime``), calls not answered within the actions' 60 s limit,
the pool's held and kept memory (mean and max of samples every 0.5 s), the containers kept
at the end; and the ratio of ``footprint`` to ``limit`` throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_docker_backend import LABEL, start_engines
from common import kafka_and_couchdb, percentile

from containers.docker.backend import DockerBackend
from containers.docker.local import BINDS, local_images
from front.identities import basic_auth
from harness.controller import ControllerStub, running_invoker
from harness.processes import Platform, running_platform

TIME_LIMIT_S = 60.0  # the actions' time limit: a call unanswered by then is lost
BUSY_PY = """
import time
def main(args):
    end = time.process_time() + 0.003
    while time.process_time() < end:
        pass
    return {"ok": True}
"""


@dataclass
class Cell:
    """What one (backend, N, accounting) run measured."""

    latencies: list[float] = field(default_factory=list)
    cold: int = 0
    unanswered: int = 0
    elapsed_s: float = 0.0
    used_mb: list[int] = field(default_factory=list)
    kept_mb: list[int] = field(default_factory=list)
    containers: int = 0

    @property
    def calls_per_s(self) -> float:
        return len(self.latencies) / self.elapsed_s if self.elapsed_s else 0.0

    def row(self) -> str:
        answered = len(self.latencies)
        lat = sorted(self.latencies) or [float("nan")]
        calls = (
            f"{self.calls_per_s:8.1f} {percentile(lat, 50) * 1e3:8.0f} "
            f"{percentile(lat, 99) * 1e3:8.0f} {self.cold / max(1, answered):6.1%} "
            f"{self.unanswered:6d}"
        )
        if not self.used_mb:  # the pool was not sampled (the embedded platform)
            return f"{calls} {'-':>7} {'-':>6} {'-':>7} {'-':>5}"
        return (
            f"{calls} {statistics.mean(self.used_mb):7.0f} {max(self.used_mb):6d} "
            f"{statistics.mean(self.kept_mb):7.0f} {self.containers:5d}"
        )


def is_cold(record: dict[str, Any]) -> bool:
    """Whether the call's activation record says it initialised its container."""
    return any(a.get("key") == "initTime" for a in record.get("annotations") or [])


Invoke = Callable[[int, int], Awaitable[dict[str, Any] | None]]  # (action, client) -> record


async def closed_loop(invoke: Invoke, n: int, clients: int, seconds: float, seed: int) -> Cell:
    """``clients`` clients, each invoking a random one of the ``n`` actions (seeded) and
    waiting for its record (None: not answered within the time limit), for ``seconds``."""
    cell = Cell()
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds

    async def client(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        while loop.time() < end:
            sent = loop.time()
            record = await invoke(rng.randrange(n), i)
            if record is None:
                cell.unanswered += 1
                continue
            cell.latencies.append(loop.time() - sent)
            cell.cold += is_cold(record)

    start = loop.time()
    await asyncio.gather(*(client(i) for i in range(clients)))
    cell.elapsed_s = loop.time() - start
    return cell


def through_stub(stub: ControllerStub, actions: list[tuple[Any, str]]) -> Invoke:
    """Blocking calls published on ``invoker<N>`` by the controller stub."""

    async def invoke(k: int, client: int) -> dict[str, Any] | None:
        action, revision = actions[k]
        aid = await stub.invoke(action, revision, blocking=True, content={"client": client})
        try:
            acks = await stub.wait_acks(aid, timeout_s=TIME_LIMIT_S)
        except TimeoutError:
            return None
        return acks[0].get("response") or {}

    return invoke


async def sample(cell: Cell, invoker: Any, stop: asyncio.Event) -> None:
    while not stop.is_set():
        cell.used_mb.append(invoker.pool.used_memory_mb)
        cell.kept_mb.append(invoker.pool.kept_memory_mb)
        await asyncio.sleep(0.5)


async def run_cell(
    kafka: Any,
    couch: Any,
    backend_for: Callable[[str], Any] | None,
    n: int,
    keep_alive: str,
    args: argparse.Namespace,
    ahead: int = 0,
) -> Cell:
    with tempfile.TemporaryDirectory(prefix="ow-many-", dir="/var/tmp") as tmp:
        unique = f"m{os.getpid() % 10000}{keep_alive[0]}{ahead}n{n}"
        backend = backend_for(f"wsk{unique}0") if backend_for else None
        async with running_invoker(
            kafka,
            couch,
            Path(tmp),
            backend=backend,
            unique_name=unique,
            keep_alive=keep_alive,
            create_ahead=ahead,
            user_memory_mb=args.memory_mb,
            policy="fc",
            action_cores=args.action_cores,
        ) as (invoker, stub):
            actions = [
                await stub.create_action(
                    f"a{i}", BUSY_PY.encode(), timeout_ms=int(TIME_LIMIT_S * 1000), logs_mb=0
                )
                for i in range(n)
            ]
            stop = asyncio.Event()
            cell = Cell()
            sampler = asyncio.create_task(sample(cell, invoker, stop))
            measured = await closed_loop(
                through_stub(stub, actions), n, args.clients, args.seconds, args.seed
            )
            stop.set()
            await sampler
            measured.used_mb, measured.kept_mb = cell.used_mb, cell.kept_mb
            measured.containers = len(invoker.pool.slots)
            return measured


async def embedded_cell(platform: Platform, n: int, args: argparse.Namespace) -> Cell:
    """One cell through the standalone's REST API."""
    headers = {"Authorization": basic_auth(platform.auth)}
    base = f"{platform.url}/api/v1/namespaces/_/actions"
    limit = aiohttp.ClientTimeout(total=TIME_LIMIT_S + 10)
    async with aiohttp.ClientSession(headers=headers, timeout=limit) as http:
        for i in range(n):
            body = {
                "exec": {"kind": "python:3.11", "code": BUSY_PY},
                "limits": {"timeout": int(TIME_LIMIT_S * 1000)},
            }
            async with http.put(f"{base}/a{i}?overwrite=true", json=body) as r:
                if r.status != 200:
                    raise RuntimeError(f"creating a{i}: {r.status} {await r.text()}")

        async def invoke(k: int, client: int) -> dict[str, Any] | None:
            try:
                async with http.post(f"{base}/a{k}?blocking=true", json={"client": client}) as r:
                    record = await r.json()
            except (aiohttp.ClientError, TimeoutError):
                return None
            return record if r.status == 200 and "annotations" in record else None

        return await closed_loop(invoke, n, args.clients, args.seconds, args.seed)


def measure_embedded(args: argparse.Namespace) -> None:
    print(
        f"embedded platform (ow-invoker standalone), process backend; {args.clients} "
        f"closed-loop clients, {args.seconds:g} s per cell, {args.memory_mb} MB of user "
        f"memory, action cores {args.action_cores}; cpus: {os.cpu_count()}, load "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(HEADER)
    cores = ",".join(map(str, args.action_cores)) + ","
    for n in args.actions:
        cells = {}
        for keep_alive in ("limit", "footprint"):
            extra = (
                *("--keep-alive", keep_alive, "--user-memory-mb", str(args.memory_mb)),
                *("--policy", "fc", "--action-cores", cores),
            )
            with (
                tempfile.TemporaryDirectory(prefix="ow-many-", dir="/var/tmp") as tmp,
                running_platform("embedded", Path(tmp), extra=extra) as platform,
            ):
                cells[keep_alive, 0] = cell = asyncio.run(embedded_cell(platform, n, args))
            print(f"{'process':<8} {n:5d} {keep_alive:<10} {0:5d} {cell.row()}", flush=True)
        print_ratios(n, cells)


def print_ratios(n: int, cells: dict[tuple[str, int], Cell]) -> None:
    """footprint / limit at each create-ahead, then each create-ahead / none (Docker)."""

    def ratio(a: Cell, b: Cell) -> str:
        return f"{a.calls_per_s / b.calls_per_s:.2f}x" if b.calls_per_s else "nan"

    aheads = sorted({ahead for _, ahead in cells})
    for ahead in aheads:
        said = f" (create-ahead {ahead})" if len(aheads) > 1 else ""
        fl = ratio(cells["footprint", ahead], cells["limit", ahead])
        print(f"{'':<8} {n:5d} footprint / limit throughput{said}: {fl}", flush=True)
    for keep_alive in ("limit", "footprint"):
        for ahead in aheads[1:]:
            r = ratio(cells[keep_alive, ahead], cells[keep_alive, aheads[0]])
            print(
                f"{'':<8} {n:5d} {keep_alive}: create-ahead {ahead} / {aheads[0]} throughput: {r}",
                flush=True,
            )


HEADER = (
    f"{'backend':<8} {'N':>5} {'keep-alive':<10} {'ahead':>5} {'calls/s':>8} {'p50 ms':>8} "
    f"{'p99 ms':>8} {'cold':>6} {'lost':>6} {'used MB':>7} {'max MB':>6} "
    f"{'kept MB':>7} {'kept':>5}"
)


async def measure(args: argparse.Namespace, kafka: Any, couch: Any, hosts: dict[str, str]) -> None:
    backends: dict[str, Callable[[str], Any] | None] = {}
    if "process" in args.backends:
        backends["process"] = None  # running_invoker's default: the sandboxed process backend
    if "docker" in args.backends:
        host = hosts["docker"]
        backends["docker"] = lambda prefix: DockerBackend(
            host,
            prefix,
            reach="netns",
            network="none",
            images=local_images(),
            binds=BINDS,
            labels={LABEL: "1"},
        )
    print(
        f"{args.clients} closed-loop clients, {args.seconds:g} s per cell, "
        f"{args.memory_mb} MB of user memory, action cores {args.action_cores}; "
        f"cpus: {os.cpu_count()}, load {os.getloadavg()[0]:.2f}"
    )
    print(HEADER)
    for name, backend_for in backends.items():
        aheads = args.create_ahead if name == "docker" else [0]  # process: forks, never ahead
        for n in args.actions:
            cells = {}
            for keep_alive in ("limit", "footprint"):
                for ahead in aheads:
                    t0 = time.perf_counter()
                    cells[keep_alive, ahead] = cell = await run_cell(
                        kafka, couch, backend_for, n, keep_alive, args, ahead
                    )
                    print(f"{name:<8} {n:5d} {keep_alive:<10} {ahead:5d} {cell.row()}", flush=True)
                    logging.info("cell took %.0f s", time.perf_counter() - t0)
            print_ratios(n, cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--actions",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 10, 100, 1000],
        help="distinct actions per cell, comma-separated (default 1,10,100,1000)",
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0, help="of calls per cell")
    parser.add_argument(
        "--backends",
        type=lambda text: text.split(","),
        default=["process", "docker"],
        help="process, docker or both (default)",
    )
    parser.add_argument("--memory-mb", type=int, default=2048, help="user memory (stock: 2048)")
    parser.add_argument(
        "--action-cores",
        type=lambda text: tuple(int(c) for c in text.split(",")),
        default=None,
        help="comma-separated (default: the invoker's, all cores but the first)",
    )
    parser.add_argument(
        "--create-ahead",
        type=lambda text: sorted({int(n) for n in text.split(",")}),
        default=[0, 8],
        help="Docker: containers created ahead for waiting calls, comma-separated values "
        "each run (default 0,8: none, as the stock invoker, and the invoker's default)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--platform",
        choices=["kafka", "embedded"],
        default="kafka",
        help="kafka: an invoker on real Kafka and CouchDB (default); embedded: the "
        "standalone's REST API (process backend)",
    )
    args = parser.parse_args()
    if args.action_cores is None:
        from invoker.config import default_cores

        args.action_cores = default_cores()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # topics made on first use
    if args.platform == "embedded":
        measure_embedded(args)
        return
    with kafka_and_couchdb() as (kafka, couch):
        hosts, stop = start_engines(["docker"] if "docker" in args.backends else [])
        try:
            asyncio.run(measure(args, kafka, couch, hosts))
        finally:
            stop()


if __name__ == "__main__":
    main()
