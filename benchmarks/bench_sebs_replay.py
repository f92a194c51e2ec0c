"""How fast the Python open-loop replayer can send on time.

A separate process serves invokes that answer after ``--delay`` seconds (so replies pile up
as open connections, as under overload); the replayer sends ``--rate`` calls per second for
``--seconds`` and reports send lateness p50/p99/max per rate. ``--gatling`` replays the same
calls with the Gatling simulation too (``mvn gatling:test``; the JVM's start is not counted, as
lateness is measured from the simulation's own start).

    .venv/bin/python benchmarks/bench_sebs_replay.py [--rates 50 200 500] [--seconds 5] [--gatling]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gatling import runner
from gatling.replay import ReplayResult, replay
from gatling.scenario import Call, write_scenario
from sebs_wrappers.procs import free_port
from whisk.client import OpenWhisk

SERVER = """
import asyncio, sys, uuid
from aiohttp import web
delay = float(sys.argv[2])
async def invoke(request):
    await request.read()
    await asyncio.sleep(delay)
    return web.json_response({"activationId": uuid.uuid4().hex})
app = web.Application()
app.router.add_post("/api/v1/namespaces/_/actions/{name}", invoke)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def calls_at(rate: float, seconds: float) -> list[Call]:
    return [Call(i, i / rate, "a", {"i": i}) for i in range(int(rate * seconds))]


async def one_rate(url: str, rate: float, seconds: float) -> dict[str, float]:
    calls = calls_at(rate, seconds)
    async with OpenWhisk(url, timeout_s=120) as ow:
        res = await replay(calls, ow)
    bad = sum(t.status != 200 for t in res.timings)
    return {**res.lateness(), "calls": len(calls), "errors": bad}


def gatling_rate(url: str, rate: float, seconds: float) -> dict[str, float]:
    calls = calls_at(rate, seconds)
    with tempfile.TemporaryDirectory() as tmp:
        write_scenario(Path(tmp) / "s.jsonl", calls)
        timings = runner.run(Path(tmp) / "s.jsonl", Path(tmp) / "t.csv", url, "u:k", timeout_s=600)
    bad = sum(t.status != 200 for t in timings)
    return {**ReplayResult(timings).lateness(), "calls": len(calls), "errors": bad}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", nargs="+", type=float, default=[50, 200, 500])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--delay", type=float, default=2.0)
    parser.add_argument("--gatling", action="store_true", help="also replay with Gatling")
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(args.delay)])
    try:
        time.sleep(1.5)
        url = f"http://127.0.0.1:{port}"
        print(f"replies after {args.delay:g} s; send lateness:")
        print(
            f"{'driver':>8} {'rate/s':>7} {'calls':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
            "errors"
        )
        drivers = [("python", lambda rate: asyncio.run(one_rate(url, rate, args.seconds)))]
        if args.gatling:
            drivers.append(("gatling", lambda rate: gatling_rate(url, rate, args.seconds)))
        for name, drive in drivers:
            for rate in args.rates:
                r = drive(rate)
                print(
                    f"{name:>8} {rate:7g} {r['calls']:6d} {r['p50_ms']:7.1f} {r['p99_ms']:7.1f} "
                    f"{r['max_ms']:7.1f} {r['errors']}"
                )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
