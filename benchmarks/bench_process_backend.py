"""Process backend figures: cold start, warm round trip, and the HTTP client's cost.

    python benchmarks/bench_process_backend.py [--cold 30] [--warm 2000] [--burst 10]

Prints, in one run on this machine:

- python cold start (create → /init of a small action → first /run), median of N, with the
  zygote and with a fresh interpreter per container (the baseline), and their ratio; the
  zygote figure is with a pre-forked spare ready (50 ms between cold starts lets it refill);
- python cold starts with no spare ready: one at a time from a zygote that keeps no spares
  (forked on demand), and a burst of ``--burst`` fired at once at the default zygote (two
  spares ready at its start, refilled one at a time), each with its ratio to the spare-ready
  median;
- the warm /run round trip p50/p99 (and with log collection);
- node cold start;
- the invoker-side CPU per /run of the built-in asyncio client vs aiohttp (keep-alive).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from containers.backend import ContainerSpec
from containers.process.backend import ProcessBackend
from whisk.summary import percentile

PY_CODE = "def main(args):\n    return {'greeting': 'Hello ' + args.get('name', 'x')}\n"
PY_INIT = json.dumps(
    {"value": {"name": "hello", "main": "main", "binary": False, "env": {}, "code": PY_CODE}}
).encode()
NODE_INIT = json.dumps(
    {"value": {"name": "health", "main": "main", "binary": False, "env": {},
               "code": "function main(params) { return params; }"}}
).encode()  # fmt: skip
RUN = json.dumps({"value": {"name": "World"}, "activation_id": "a" * 32, "deadline": "0"}).encode()


def report(what: str, xs: list[float], scale: float, unit: str, p: float = 0.9) -> None:
    med, tail = statistics.median(xs) * scale, percentile(xs, p * 100) * scale
    print(f"{what}: median {med:.2f} {unit}, p{int(p * 100)} {tail:.2f} {unit} (n={len(xs)})")


async def cold_starts(
    backend: ProcessBackend, kind: str, init: bytes, n: int, tag: str
) -> list[float]:
    out = []
    for i in range(n):
        await asyncio.sleep(0.05)  # let the zygote refill its spares, as between real cold starts
        t0 = time.perf_counter()
        c = await backend.create(ContainerSpec(f"{backend.name_prefix}_{i}_{tag}", kind, 256))
        r1 = await c.init(init, 30)
        r2 = await c.run(RUN, 30)
        out.append(time.perf_counter() - t0)
        assert r1.status == 200 and r2.status == 200, (r1, r2)
        await c.read_logs(1 << 20, True)
        await c.destroy()
    return out


async def burst(backend: ProcessBackend, n: int, tag: str) -> tuple[list[float], float]:
    """``n`` python cold starts fired at once: per-call latencies and the whole burst's time."""
    await asyncio.sleep(0.5)  # spares refilled: the burst starts from the steady state
    made: list = []

    async def one(i: int) -> float:
        t0 = time.perf_counter()
        c = await backend.create(
            ContainerSpec(f"{backend.name_prefix}_{i}_{tag}", "python:3.11", 256)
        )
        made.append(c)
        r1 = await c.init(PY_INIT, 30)
        r2 = await c.run(RUN, 30)
        assert r1.status == 200 and r2.status == 200, (r1, r2)
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    out = await asyncio.gather(*(one(i) for i in range(n)))
    total = time.perf_counter() - t0
    for c in made:
        await c.read_logs(1 << 20, True)
        await c.destroy()
    return list(out), total


async def warm(backend: ProcessBackend, n: int) -> tuple[list[float], list[float], float]:
    c = await backend.create(ContainerSpec(f"{backend.name_prefix}_w_warm", "python:3.11", 256))
    await c.init(PY_INIT, 30)
    runs, with_logs = [], []
    cpu0 = time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        await c.run(RUN, 30)
        t1 = time.perf_counter()
        await c.read_logs(1 << 20, True)
        runs.append(t1 - t0)
        with_logs.append(time.perf_counter() - t0)
    cpu = (time.process_time() - cpu0) / n
    await c.destroy()
    return runs, with_logs, cpu


async def clients(backend: ProcessBackend, n: int) -> dict[str, tuple[float, float]]:
    """Invoker CPU per request and p50 latency: built-in client vs aiohttp."""
    c = await backend.create(ContainerSpec(f"{backend.name_prefix}_c_client", "python:3.11", 256))
    await c.init(PY_INIT, 30)
    host, port = c.address
    results: dict[str, tuple[float, float]] = {}

    async def measure(name: str, call) -> None:
        for _ in range(50):
            await call()
        lat = []
        cpu0 = time.process_time()
        for _ in range(n):
            t0 = time.perf_counter()
            await call()
            lat.append(time.perf_counter() - t0)
        results[name] = ((time.process_time() - cpu0) / n, statistics.median(lat))

    await measure("asyncio client (containers.http)", lambda: c.run(RUN, 30))
    try:
        import aiohttp
    except ImportError:
        aiohttp = None
    if aiohttp is not None:
        # A sandboxed runtime (the default) listens on a Unix socket, not a port.
        conn: aiohttp.BaseConnector = (
            aiohttp.UnixConnector(path=c.socket_path, limit=1, force_close=False)
            if c.socket_path
            else aiohttp.TCPConnector(limit=1, force_close=False)
        )
        async with aiohttp.ClientSession(connector=conn) as session:
            url = f"http://{host}:{port}/run" if port else "http://runtime/run"
            headers = {"Content-Type": "application/json", "Accept": "application/json"}

            async def post() -> None:
                async with session.post(url, data=RUN, headers=headers) as resp:
                    await resp.read()

            await measure("aiohttp ClientSession", post)
    await c.destroy()
    return results


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cold", type=int, default=30, help="cold starts per variant")
    ap.add_argument("--warm", type=int, default=2000, help="warm /run round trips")
    ap.add_argument("--burst", type=int, default=10, help="python cold starts fired at once")
    ap.add_argument("--state-dir", default=None, help="default: a fresh dir under /var/tmp")
    args = ap.parse_args()
    state = Path(args.state_dir or tempfile.mkdtemp(prefix="owbench-", dir="/var/tmp"))
    prefix = f"wskbench{os.getpid()}"
    zyg = ProcessBackend(state / "zygote", prefix)
    fresh = ProcessBackend(state / "fresh", prefix + "f", zygote_fork=False)
    nospare = ProcessBackend(state / "nospare", prefix + "n", spares=0)
    try:
        await zyg.start()
        await fresh.start()
        await nospare.start()
        cg = zyg.cgroup_support
        print(
            f"cgroups: v{cg.version} {cg.memory_parent}"
            if cg.usable
            else f"cgroups: none, {cg.reason}"
        )
        load = os.getloadavg()[0]
        print(f"private /tmp: {zyg.private_tmp}; cpus: {os.cpu_count()}; load average: {load:.2f}")
        await asyncio.sleep(0.5)
        z = await cold_starts(zyg, "python:3.11", PY_INIT, args.cold, "py")
        f = await cold_starts(fresh, "python:3.11", PY_INIT, args.cold, "pyfresh")
        report("python cold start (create+init+run), zygote", z, 1e3, "ms")
        report("python cold start, fresh interpreter (baseline)", f, 1e3, "ms")
        zm, fm = statistics.median(z), statistics.median(f)
        print(f"zygote / fresh interpreter: {zm / fm:.3f} ({fm / zm:.1f}x faster)")
        ns = await cold_starts(nospare, "python:3.11", PY_INIT, args.cold, "pyns")
        report("python cold start, zygote, no spare ready (forked on demand)", ns, 1e3, "ms")
        print(f"  no spare / spare ready: {statistics.median(ns) / zm:.2f}")
        b, total = await burst(zyg, args.burst, "pyburst")
        report(f"python cold start, burst of {args.burst} at once", b, 1e3, "ms")
        print(
            f"  max {max(b) * 1e3:.2f} ms, whole burst {total * 1e3:.1f} ms; "
            f"burst median / spare ready: {statistics.median(b) / zm:.2f}"
        )
        runs, with_logs, cpu = await warm(zyg, args.warm)
        report("warm /run round trip", runs, 1e6, "us", p=0.99)
        report("warm /run + read_logs", with_logs, 1e6, "us", p=0.99)
        print(f"  invoker CPU per /run + read_logs: {cpu * 1e6:.0f} us")
        nd = await cold_starts(zyg, "nodejs:20", NODE_INIT, max(5, args.cold // 3), "node")
        report("node cold start (create+init+run)", nd, 1e3, "ms")
        costs = await clients(zyg, args.warm)
        for name, (cpu_s, p50) in costs.items():
            print(f"{name}: invoker CPU {cpu_s * 1e6:.1f} us/request, p50 {p50 * 1e6:.1f} us")
        if len(costs) == 2:
            (ours, _), (theirs, _) = costs.values()
            print(f"  CPU per request, ours / aiohttp: {ours / theirs:.2f}")
    finally:
        await zyg.close()
        await fresh.close()
        await nospare.close()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
