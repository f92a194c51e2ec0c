"""What the sandbox costs: the sandboxed process backend against the unsandboxed one and Docker.

    python benchmarks/bench_sandbox.py [--cold 20] [--warm 1000] [--burst 10] [--no-docker]

Prints, in one run on this machine, for each of ``sandboxed`` (the default process backend:
namespaces, a uid per container, seccomp, slirp4netns), ``unsandboxed`` (``--sandbox none``)
and ``docker`` (dockerd with the hardened defaults, the local stock-style images; started by
the tests' service class under ``.state/bench``):

- python and Node.js cold start (create → /init → first /run), median and p90: with a spare
  ready (50 ms between cold starts lets the zygote refill), with no spare (a zygote keeping
  none: forked on demand; Docker has no spares, so its figure is the same cold start), and a
  burst of ``--burst`` python cold starts fired at once;
- the warm python /run round trip p50 and p99;

and the ratios sandboxed / unsandboxed and docker / sandboxed. The backends take turns, so a
load that changes during the run weighs on all of them alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_docker_backend import PY_CODE, RUN, cold_starts, init_body, start_engines, warm
from common import exclusive_machine, percentile

from containers.backend import ContainerSpec
from containers.docker.backend import DockerBackend
from containers.docker.local import BINDS, local_images
from containers.process.backend import ProcessBackend

NODE_CODE = "function main(params) { console.log('hi'); return params; }"
LABEL = "ow-invoker-bench"


async def burst(backend: Any, n: int, tag: str) -> list[float]:
    """``n`` python cold starts fired at once, from the steady state (spares refilled)."""
    await asyncio.sleep(0.5)
    made: list[Any] = []

    async def one(i: int) -> float:
        t0 = time.perf_counter()
        c = await backend.create(
            ContainerSpec(f"{backend.name_prefix}_{i}_{tag}", "python:3.11", 256)
        )
        made.append(c)
        r1 = await c.init(init_body(PY_CODE), 30)
        r2 = await c.run(RUN, 30)
        assert r1.status == 200 and r2.status == 200, (r1, r2)
        return time.perf_counter() - t0

    out = await asyncio.gather(*(one(i) for i in range(n)))
    for c in made:
        await c.read_logs(1 << 20, True)
        await c.destroy()
    return list(out)


def line(what: str, xs: list[float], scale: float = 1e3, unit: str = "ms", p: float = 90) -> str:
    return (
        f"  {what:<12} median {statistics.median(xs) * scale:8.2f} {unit}, "
        f"p{p:g} {percentile(xs, p) * scale:8.2f} {unit} (n={len(xs)})"
    )


def ratio(a: list[float], b: list[float]) -> str:
    return f"{statistics.median(a) / statistics.median(b):.2f}"


async def measure(args: argparse.Namespace, docker_host: str | None, state: Path) -> None:
    prefix = f"wsksb{os.getpid()}"
    ready: dict[str, Any] = {
        "sandboxed": ProcessBackend(state / "s", prefix + "s"),
        "unsandboxed": ProcessBackend(state / "u", prefix + "u", sandbox=False),
    }
    nospare: dict[str, Any] = {
        "sandboxed": ProcessBackend(state / "sn", prefix + "sn", spares=0),
        "unsandboxed": ProcessBackend(state / "un", prefix + "un", sandbox=False, spares=0),
    }
    if docker_host is not None:
        docker = DockerBackend(
            docker_host,
            prefix + "d",
            images=local_images(),
            binds=BINDS,
            labels={LABEL: "1"},
            network="none",  # no bridge on this dockerd: reached in its own namespace (netns)
        )
        ready["docker"] = nospare["docker"] = docker
    everything = {id(b): b for b in (*ready.values(), *nospare.values())}.values()
    try:
        for b in everything:
            await b.start()
        print(f"cpus: {os.cpu_count()}; load average: {os.getloadavg()[0]:.2f}")
        await asyncio.sleep(0.5)
        n, nodes = args.cold, max(5, args.cold // 2)
        results: dict[str, dict[str, list[float]]] = {name: {} for name in ready}
        for label, backends, kind, code, count in (
            ("python", ready, "python:3.11", PY_CODE, n),
            ("python-nospare", nospare, "python:3.11", PY_CODE, n),
            ("node", ready, "nodejs:20", NODE_CODE, nodes),
            ("node-nospare", nospare, "nodejs:20", NODE_CODE, nodes),
        ):
            total, _ = await cold_starts(backends, kind, code, count, label.replace("-", ""))
            for name, xs in total.items():
                results[name][label] = xs
        for name, b in ready.items():
            results[name]["burst"] = await burst(b, args.burst, "burst")
        runs, _ = await warm(ready, args.warm)
        for name, xs in runs.items():
            results[name]["warm"] = xs
        for name, r in results.items():
            print(f"{name}:")
            for what in ("python", "python-nospare", "node", "node-nospare", "burst"):
                print(line(what, r[what]))
            print(line("warm /run", r["warm"], 1e6, "us", 99))
        s, u = results["sandboxed"], results["unsandboxed"]
        what = ("python", "python-nospare", "node", "node-nospare", "burst", "warm")
        print("sandboxed / unsandboxed: " + ", ".join(f"{w} {ratio(s[w], u[w])}" for w in what))
        if "docker" in results:
            d = results["docker"]
            print("docker / sandboxed: " + ", ".join(f"{w} {ratio(d[w], s[w])}" for w in what))
    finally:
        for b in everything:
            await b.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cold", type=int, default=20, help="python cold starts per variant")
    ap.add_argument("--warm", type=int, default=1000, help="warm /run round trips per variant")
    ap.add_argument("--burst", type=int, default=10, help="python cold starts fired at once")
    ap.add_argument("--no-docker", dest="docker", action="store_false", help="skip Docker")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("the sandbox needs root: run this benchmark as root")
    with exclusive_machine():
        hosts, stop = start_engines(["docker"]) if args.docker else ({}, lambda: None)
        state = Path(tempfile.mkdtemp(prefix="owbench-", dir="/var/tmp"))
        try:
            asyncio.run(measure(args, hosts.get("docker"), state))
        finally:
            shutil.rmtree(state, ignore_errors=True)
            stop()


if __name__ == "__main__":
    main()
