"""Docker backend vs process backend: cold and warm starts, measured in one run.

    python benchmarks/bench_docker_backend.py [--cold 15] [--warm 500] [--docker-host URL]

Without ``--docker-host`` (or ``DOCKER_HOST``) it starts Podman's Docker API on its own socket
under ``.state/bench`` and builds the local runtime images (``scripts/runtime-images.sh``);
kinds map to them with ``containers.docker_local``. Prints, for python:3.11 (and fewer node
cold starts):

- cold start = create → /init of a small action → first /run, median and p90, per backend,
  with the Docker create split out, and the ratio docker / process;
- warm /run round trip and warm /run + read_logs (p50, p99), and the ratios;
- the Docker-only costs the pool adds around calls: assign_cores (cpuset + quota update),
  pause + resume, destroy.

Every container carries the label ``ow-invoker-bench`` and is removed by it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, STATE, percentile

from containers.backend import ContainerSpec
from containers.docker import DockerBackend
from containers.docker_local import BINDS, local_images
from containers.process import ProcessBackend

LABEL = "ow-invoker-bench"
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


async def cold_starts(
    backend: Any, kind: str, code: str, n: int, tag: str
) -> tuple[list[float], list[float]]:
    """(create → init → first run, create alone) per container; the logs are read and the
    container destroyed outside the measured time."""
    total, create = [], []
    for i in range(n):
        await asyncio.sleep(0.05)  # the process backend's zygote refills its spares meanwhile
        t0 = time.perf_counter()
        c = await backend.create(ContainerSpec(f"{backend.name_prefix}_{i}_{tag}", kind, 256))
        t1 = time.perf_counter()
        r1 = await c.init(init_body(code), 30)
        r2 = await c.run(RUN, 30)
        total.append(time.perf_counter() - t0)
        create.append(t1 - t0)
        assert r1.status == 200 and r2.status == 200, (r1, r2)
        await c.read_logs(1 << 20, True)
        await c.destroy()
    return total, create


async def warm(backend: Any, n: int) -> tuple[list[float], list[float]]:
    """Warm /run round trips, and /run + read_logs (the invoker's per-call container work)."""
    c = await backend.create(ContainerSpec(f"{backend.name_prefix}_w_warm", "python:3.11", 256))
    await c.init(init_body(PY_CODE), 30)
    await c.assign_cores(frozenset({0}))
    for _ in range(20):
        await c.run(RUN, 30)
        await c.read_logs(1 << 20, True)
    runs, with_logs = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        await c.run(RUN, 30)
        t1 = time.perf_counter()
        await c.read_logs(1 << 20, True)
        runs.append(t1 - t0)
        with_logs.append(time.perf_counter() - t0)
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


def start_engine() -> tuple[str, Callable[[], None]]:
    """Podman's Docker API under .state/bench (the tests' helper class), images built."""
    sys.path.insert(0, str(ROOT / "tests"))
    from services import PodmanService

    podman = PodmanService(STATE)
    podman.setup()

    def stop() -> None:
        podman.remove_containers(LABEL)
        podman.teardown()

    return podman.docker_host, stop


def build_images() -> None:
    proc = subprocess.run(
        [str(ROOT / "scripts" / "runtime-images.sh")], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        sys.exit(f"scripts/runtime-images.sh failed:\n{proc.stdout}{proc.stderr}")


async def measure(args: argparse.Namespace, docker_host: str, state: Path) -> None:
    prefix = f"wskbench{os.getpid()}"
    proc_b = ProcessBackend(state, prefix + "p")
    dock_b = DockerBackend(
        docker_host, prefix + "d", images=local_images(), binds=BINDS, labels={LABEL: "1"}
    )
    try:
        await proc_b.start()
        await dock_b.start()
        await dock_b.remove_leftovers()
        print(
            f"engine: {dock_b.engine.version}; cpus: {os.cpu_count()}; "
            f"load average: {os.getloadavg()[0]:.2f}"
        )
        await asyncio.sleep(0.5)
        dc, dcreate = await cold_starts(dock_b, "python:3.11", PY_CODE, args.cold, "py")
        pc, pcreate = await cold_starts(proc_b, "python:3.11", PY_CODE, args.cold, "py")
        print("python cold start (create + /init + first /run):")
        print(f"  docker   {summary(dc, 1e3, 'ms')}")
        print(f"    of which create+start+inspect {summary(dcreate, 1e3, 'ms')}")
        print(f"  process  {summary(pc, 1e3, 'ms')}")
        print(f"    of which create               {summary(pcreate, 1e3, 'ms')}")
        ratio = statistics.median(dc) / statistics.median(pc)
        print(f"  docker / process (medians): {ratio:.1f}")
        nodes = max(3, args.cold // 3)
        dn, _ = await cold_starts(dock_b, "nodejs:20", NODE_CODE, nodes, "node")
        pn, _ = await cold_starts(proc_b, "nodejs:20", NODE_CODE, nodes, "node")
        print("node cold start:")
        print(f"  docker   {summary(dn, 1e3, 'ms')}")
        print(f"  process  {summary(pn, 1e3, 'ms')}")
        print(f"  docker / process (medians): {statistics.median(dn) / statistics.median(pn):.1f}")
        dw, dwl = await warm(dock_b, args.warm)
        pw, pwl = await warm(proc_b, args.warm)
        print("python warm start (an initialised container):")
        print(f"  /run             docker  {summary(dw, 1e6, 'us', 99)}")
        print(f"  /run             process {summary(pw, 1e6, 'us', 99)}")
        ratio = statistics.median(dw) / statistics.median(pw)
        print(f"    docker / process (medians): {ratio:.2f}")
        print(f"  /run + read_logs docker  {summary(dwl, 1e6, 'us', 99)}")
        print(f"  /run + read_logs process {summary(pwl, 1e6, 'us', 99)}")
        ratio = statistics.median(dwl) / statistics.median(pwl)
        print(f"    docker / process (medians): {ratio:.2f}")
        extras = await docker_extras(dock_b, max(5, args.cold // 2))
        print(f"docker-only costs around calls (CPU updates via {dock_b.engine.cpu_method}):")
        for name, xs in extras.items():
            print(f"  {name:<14} {summary(xs, 1e3, 'ms')}")
    finally:
        await dock_b.close()
        await proc_b.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cold", type=int, default=15, help="python cold starts per backend")
    ap.add_argument("--warm", type=int, default=500, help="warm /run round trips per backend")
    ap.add_argument("--docker-host", default=os.environ.get("DOCKER_HOST"))
    args = ap.parse_args()
    stop: Callable[[], None] = lambda: None  # noqa: E731
    host = args.docker_host
    if host is None:
        host, stop = start_engine()
    build_images()
    state = Path(tempfile.mkdtemp(prefix="owbench-", dir="/var/tmp"))
    try:
        asyncio.run(measure(args, host, state))
    finally:
        shutil.rmtree(state, ignore_errors=True)
        stop()


if __name__ == "__main__":
    main()
