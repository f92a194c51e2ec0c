"""Docker Engine, Podman and the process backend: cold and warm starts, in one run.

    python benchmarks/bench_docker_backend.py [--cold 15] [--warm 500] [--engines docker,podman]

Holds the machine-wide benchmark lock, starts a Docker Engine (dockerd) and Podman's Docker
API on their own sockets under ``.state/bench`` (scripts/services.sh; the local runtime
images are built in each by scripts/runtime-images.sh; kinds map to them with
``containers.docker.local``) and measures, for python:3.11 (and fewer node cold starts):

- cold start = create → /init of a small action → first /run, median and p90, per backend,
  with the engine's create + start + inspect split out, and the ratio to the process backend;
- warm /run round trip and warm /run + read_logs (p50, p99), and the ratios;
  the backends take turns (one cold start each, rounds of warm calls), so a load that
  changes during the run weighs on all of them alike;
- the Docker-only costs the pool adds around calls: assign_cores (cpuset + quota update),
  pause + resume, destroy.

On dockerd the runtimes are reached with host networking (a loopback port each: that dockerd
has no default bridge); ``docker-publish`` is the same dockerd with port 8080 published on
127.0.0.1 of a bridge network this run creates (through Docker's userland proxy, as on a
stock dockerd). Podman publishes on 127.0.0.1. Every container carries the label
``ow-invoker-bench`` and is removed by it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LABEL, exclusive_machine, percentile, start_engines

from containers.backend import ContainerSpec
from containers.docker.backend import DockerBackend
from containers.docker.engine import Engine
from containers.docker.local import BINDS, local_images
from containers.process.backend import ProcessBackend

PY_CODE = (
    "def main(args):\n    print('hi')\n    return {'greeting': 'Hello ' + args.get('name', 'x')}\n"
)
NODE_CODE = "function main(params) { console.log('hi'); return params; }"
RUN = json.dumps({"value": {"name": "World"}, "activation_id": "a" * 32, "deadline": "0"}).encode()


def init_body(code: str) -> bytes:
    value = {"name": "bench", "main": "main", "binary": False, "env": {}, "code": code}
    return json.dumps({"value": value}).encode()


def summary(xs: list[float], scale: float, unit: str, p: float = 90) -> str:
    return (
        f"median {statistics.median(xs) * scale:8.2f} {unit}, "
        f"p{p:g} {percentile(xs, p) * scale:8.2f} {unit} (n={len(xs)})"
    )


async def cold_start(backend: Any, kind: str, code: str, name: str) -> tuple[float, float]:
    """(create → init → first run, create alone) of one container; the logs are read and the
    container destroyed outside the measured time."""
    await asyncio.sleep(0.05)  # the process backend's zygote refills its spares meanwhile
    t0 = time.perf_counter()
    c = await backend.create(ContainerSpec(f"{backend.name_prefix}_{name}", kind, 256))
    t1 = time.perf_counter()
    r1 = await c.init(init_body(code), 30)
    r2 = await c.run(RUN, 30)
    total = time.perf_counter() - t0
    assert r1.status == 200 and r2.status == 200, (r1, r2)
    await c.read_logs(1 << 20, True)
    await c.destroy()
    return total, t1 - t0


async def cold_starts(
    backends: dict[str, Any], kind: str, code: str, n: int, tag: str
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """n cold starts per backend, the backends taking turns (a load that changes during the
    run then weighs on all of them alike)."""
    total: dict[str, list[float]] = {b: [] for b in backends}
    create: dict[str, list[float]] = {b: [] for b in backends}
    for i in range(n):
        for name, backend in backends.items():
            t, c = await cold_start(backend, kind, code, f"{i}_{tag}")
            total[name].append(t)
            create[name].append(c)
    return total, create


async def warm(
    backends: dict[str, Any], n: int, rounds: int = 10
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Warm /run round trips, and /run + read_logs (the invoker's per-call container work):
    one initialised container per backend pinned to the same core, n calls each, in rounds
    that take turns."""
    containers = {}
    for name, backend in backends.items():
        c = await backend.create(ContainerSpec(f"{backend.name_prefix}_w_warm", "python:3.11", 256))
        await c.init(init_body(PY_CODE), 30)
        await c.assign_cores(frozenset({0}))
        for _ in range(20):
            await c.run(RUN, 30)
            await c.read_logs(1 << 20, True)
        containers[name] = c
    runs: dict[str, list[float]] = {b: [] for b in backends}
    with_logs: dict[str, list[float]] = {b: [] for b in backends}
    for _ in range(rounds):
        for name, c in containers.items():
            for _ in range(max(1, n // rounds)):
                t0 = time.perf_counter()
                await c.run(RUN, 30)
                t1 = time.perf_counter()
                await c.read_logs(1 << 20, True)
                runs[name].append(t1 - t0)
                with_logs[name].append(time.perf_counter() - t0)
    for c in containers.values():
        await c.destroy()
    return runs, with_logs


async def docker_extras(backend: DockerBackend, n: int) -> dict[str, list[float]]:
    """What the pool adds around calls with Docker: core changes, pause/resume, destroy."""
    out: dict[str, list[float]] = {"assign_cores": [], "pause+resume": [], "destroy": []}
    cores = sorted(os.sched_getaffinity(0))
    for i in range(n):
        c = await backend.create(ContainerSpec(f"{backend.name_prefix}_x{i}_x", "python:3.11", 256))
        await c.init(init_body(PY_CODE), 30)
        out["assign_cores"].append(await timed(c.assign_cores(frozenset({cores[i % len(cores)]}))))
        t0 = time.perf_counter()
        await c.pause()
        await c.resume()
        out["pause+resume"].append(time.perf_counter() - t0)
        out["destroy"].append(await timed(c.destroy()))
    return out


async def timed(call: Awaitable[Any]) -> float:
    t0 = time.perf_counter()
    await call
    return time.perf_counter() - t0


async def bridge_network(host: str) -> tuple[str, Callable[[], Awaitable[None]]]:
    """A bridge network on a random private /24 of the bench dockerd (it has no default one)."""
    engine = Engine(host)
    await engine.start()
    name = f"ow-bench-{os.getpid()}"
    for _ in range(5):
        subnet = f"10.{random.randint(160, 250)}.{random.randint(0, 255)}.0/24"
        config = {"Name": name, "Driver": "bridge", "IPAM": {"Config": [{"Subnet": subnet}]}}
        try:
            network = await engine.docker.networks.create(config)
            break
        except Exception as e:  # an overlapping subnet: try another
            error = e
    else:
        await engine.close()
        raise RuntimeError(f"cannot create a bridge network: {error}")

    async def remove() -> None:
        try:
            await network.delete()
        finally:
            await engine.close()

    return name, remove


def ratio(xs: list[float], base: list[float]) -> str:
    return f"{statistics.median(xs) / statistics.median(base):.2f}"


async def measure(args: argparse.Namespace, hosts: dict[str, str], state: Path) -> None:
    prefix = f"wskbench{os.getpid()}"
    backends: dict[str, Any] = {"process": ProcessBackend(state, prefix + "p")}
    cleanup: list[Callable[[], Awaitable[None]]] = []
    common = {"images": local_images(), "binds": BINDS, "labels": {LABEL: "1"}}
    if "docker" in hosts:
        backends["docker"] = DockerBackend(hosts["docker"], prefix + "d", reach="host", **common)
        if args.publish:
            network, remove = await bridge_network(hosts["docker"])
            cleanup.append(remove)
            backends["docker-publish"] = DockerBackend(
                hosts["docker"], prefix + "b", reach="publish", network=network, **common
            )
    if "podman" in hosts:
        backends["podman"] = DockerBackend(hosts["podman"], prefix + "m", reach="publish", **common)
    names = [n for n in backends if n != "process"] + ["process"]
    try:
        for b in backends.values():
            await b.start()
            if isinstance(b, DockerBackend):
                await b.remove_leftovers()
        engines = {n: b.engine.version for n, b in backends.items() if isinstance(b, DockerBackend)}
        print(f"engines: {engines}; cpus: {os.cpu_count()}; load: {os.getloadavg()[0]:.2f}")
        await asyncio.sleep(0.5)
        ordered = {n: backends[n] for n in names}
        nodes = max(3, args.cold // 3)
        cold, create = await cold_starts(ordered, "python:3.11", PY_CODE, args.cold, "py")
        node, _ = await cold_starts(ordered, "nodejs:20", NODE_CODE, nodes, "node")
        runs, logs = await warm(ordered, args.warm)
        base = "process"
        print("python cold start (create + /init + first /run); ratio to the process backend:")
        for n in names:
            print(f"  {n:<15} {summary(cold[n], 1e3, 'ms')}  x{ratio(cold[n], cold[base])}")
            print(f"    {'create':<13} {summary(create[n], 1e3, 'ms')}")
        print("node cold start:")
        for n in names:
            print(f"  {n:<15} {summary(node[n], 1e3, 'ms')}  x{ratio(node[n], node[base])}")
        print("python warm /run (an initialised container):")
        for n in names:
            print(f"  {n:<15} {summary(runs[n], 1e6, 'us', 99)}  x{ratio(runs[n], runs[base])}")
        print("python warm /run + read_logs:")
        for n in names:
            print(f"  {n:<15} {summary(logs[n], 1e6, 'us', 99)}  x{ratio(logs[n], logs[base])}")
        for n in names:
            b = backends[n]
            if not isinstance(b, DockerBackend) or n == "docker-publish":
                continue
            extras = await docker_extras(b, max(5, args.cold // 2))
            print(f"{n}-only costs around calls (CPU updates via {b.engine.cpu_method}):")
            for what, xs in extras.items():
                print(f"  {what:<14} {summary(xs, 1e3, 'ms')}")
    finally:
        for b in backends.values():
            await b.close()
        for remove in cleanup:
            await remove()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cold", type=int, default=15, help="python cold starts per backend")
    ap.add_argument("--warm", type=int, default=500, help="warm /run round trips per backend")
    ap.add_argument("--engines", default="docker,podman", help="docker, podman or both")
    ap.add_argument(
        "--no-publish",
        dest="publish",
        action="store_false",
        help="skip dockerd with ports published through its userland proxy",
    )
    args = ap.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if not set(engines) <= {"docker", "podman"}:
        sys.exit("--engines: docker, podman or docker,podman")
    with exclusive_machine():
        hosts, stop = start_engines(engines)
        state = Path(tempfile.mkdtemp(prefix="owbench-", dir="/var/tmp"))
        try:
            asyncio.run(measure(args, hosts, state))
        finally:
            shutil.rmtree(state, ignore_errors=True)
            stop()


if __name__ == "__main__":
    main()
