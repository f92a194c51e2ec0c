"""``ow-invoker replay``: open-loop replay of a scenario file with asyncio + aiohttp.

Each call is sent at its absolute scheduled time (common start + ``t``) and never waits for an
earlier reply, as in Gatling's open model: slow responses pile up as open connections, not as
delayed sends. Per-request timings go to a CSV (``gatling.scenario.TIMING_COLUMNS``); the send
lateness (sent - scheduled) is reported so a run whose client fell behind is visible.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gatling.scenario import Call, Timing, read_scenario, write_timings
from whisk.argtypes import input_file, positive_float
from whisk.client import OpenWhisk
from whisk.summary import percentile

HELP = "replay a scenario file open-loop against an OpenWhisk API and write per-request timings"


@dataclass
class ReplayResult:
    timings: list[Timing]
    # activation records that came back in blocking replies (result=false), by call seq
    records: dict[int, dict] = field(default_factory=dict)
    epoch_start_s: float = 0.0

    def lateness(self) -> dict[str, float]:
        """Send lateness p50/p99/max in milliseconds."""
        values = sorted(max(0.0, t.lateness_s) * 1e3 for t in self.timings)
        if not values:
            return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
        return {
            "p50_ms": percentile(values, 50),
            "p99_ms": percentile(values, 99),
            "max_ms": values[-1],
        }

    def statuses(self) -> Counter[int]:
        return Counter(t.status for t in self.timings)

    def summary(self) -> str:
        late = self.lateness()
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses().items()))
        return (
            f"replayed {len(self.timings)} requests ({statuses}); send lateness "
            f"p50 {late['p50_ms']:.1f} ms, p99 {late['p99_ms']:.1f} ms, max {late['max_ms']:.1f} ms"
        )


async def replay(
    calls: Sequence[Call],
    ow: OpenWhisk,
    *,
    web: bool = False,
    result: bool = False,
    poll_accepted: bool = True,
    on_done: Callable[[Timing], None] | None = None,
) -> ReplayResult:
    """Send every call at its scheduled time through ``ow``.

    A ``202 Accepted`` (stock OpenWhisk answers so when a blocking invoke runs past its wait
    limit) is followed by polling the activation record; the request's done time is then the
    record's ``end``, so response times stay comparable.
    """
    import aiohttp

    loop = asyncio.get_running_loop()
    out = ReplayResult(timings=[])
    start = loop.time()
    out.epoch_start_s = time.time()

    async def send(call: Call) -> None:
        sent = loop.time() - start
        status, aid, error, record = 0, "", "", None
        try:
            reply = await ow.invoke(call.action, call.params, result=result, web=web)
            done = loop.time() - start
            status, aid, record = reply.status, reply.activation_id, reply.record
            if status >= 400:
                error = f"http {status}"
            elif status == 202 and poll_accepted and aid:
                record = await ow.wait_activation(aid, timeout_s=ow.timeout_s)
                if record is not None and record.get("end"):
                    done = record["end"] / 1e3 - out.epoch_start_s
                    error = "accepted; done from record end"
                else:
                    error = "accepted; no record"
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            done = loop.time() - start
            error = f"{type(e).__name__}: {e}"[:200].replace(",", ";").replace("\n", " ")
        timing = Timing(call.seq, call.action, call.t, sent, done, status, aid, error)
        timing.epoch_start_s = out.epoch_start_s
        out.timings.append(timing)
        if record is not None:
            out.records[call.seq] = record
        if on_done is not None:
            on_done(timing)

    tasks: list[asyncio.Task[None]] = []
    for call in sorted(calls, key=lambda c: (c.t, c.seq)):
        delay = start + call.t - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(send(call)))
    await asyncio.gather(*tasks)
    out.timings.sort(key=lambda t: t.seq)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from whisk.client import default_apihost, default_auth

    parser.add_argument(
        "scenario", type=input_file, help="scenario file (JSON Lines: seq, t, action, params)"
    )
    parser.add_argument("--apihost", default=default_apihost(), help="OpenWhisk API base URL")
    parser.add_argument("--auth", default=default_auth(), help="uuid:key (default: the guest key)")
    parser.add_argument("--namespace", default="_")
    parser.add_argument(
        "--out", type=Path, default=Path("timings.csv"), help="timings CSV to write"
    )
    parser.add_argument("--web", action="store_true", help="invoke as web actions (<name>.json)")
    parser.add_argument(
        "--result",
        action="store_true",
        help="ask for the result only (result=true), not the record",
    )
    parser.add_argument(
        "--timeout", type=positive_float, default=600.0, help="per-request timeout, s"
    )
    parser.add_argument(
        "--no-poll", action="store_true", help="do not poll records of 202 Accepted replies"
    )


def main(args: argparse.Namespace) -> int:

    calls = read_scenario(args.scenario)

    async def run() -> ReplayResult:
        async with OpenWhisk(args.apihost, args.auth, args.namespace, args.timeout) as ow:
            return await replay(
                calls, ow, web=args.web, result=args.result, poll_accepted=not args.no_poll
            )

    res = asyncio.run(run())
    write_timings(args.out, res.timings)
    print(res.summary())
    print(f"timings: {args.out}")
    return 0
