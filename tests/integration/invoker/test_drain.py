"""Graceful drain under load (issue 31): SIGTERM with 500 calls queued and 8 running. The
running calls finish within the stop deadline (or, longer than it, are stopped and handed
back), the queued ones go back to Kafka uncommitted (none of them runs), and the next
invoker on the same id runs exactly what was handed back: every call is answered once and
recorded once, none lost and none run twice."""

from __future__ import annotations

import asyncio
import time

import pytest

from harness.controller import controller, make_config
from harness.processes import InvokerProcess
from tests.integration.invoker.helpers import processes_with_marker
from tests.integration.invoker.test_faults import count_records, invoker_status, wait_for

pytestmark = pytest.mark.services

# A nodejs action: its runtime serves overlapping /runs, so four calls share a container.
SLEEPY_JS = b"""
function main(a) {
  return new Promise(done => setTimeout(() => done({i: a.i}), (a.s || 0.2) * 1000));
}
"""
RUNNING, QUEUED = 8, 500
DEADLINE_S = 10.0  # the harness's --shutdown-deadline


def completions(stub, aids: list[str]) -> dict[str, int]:
    """Per activation, how many acks said it finished (a completion or a combined ack)."""
    return {a: sum(1 for k in stub.acks.get(a, []) if "instance" in k) for a in aids}


# The running calls last long enough for the 500 to be published and received before the
# SIGTERM (about a second here), even on a loaded machine: 8 s, within the deadline, or 20 s,
# beyond it whenever the SIGTERM comes in their first 10 s.
@pytest.mark.parametrize(
    "long_s", [8.0, 20.0], ids=["running-finish-in-time", "running-outlast-the-deadline"]
)
async def test_sigterm_with_500_queued_and_8_running_loses_and_repeats_nothing(
    kafka, couchdb, tmp_path, long_s
):
    # Two action cores, four calls per container: eight calls run at once.
    config = make_config(tmp_path, action_cores=(0, 1))
    first = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker1.log")
    second = InvokerProcess(config, kafka.bootstrap, couchdb, tmp_path / "invoker2.log")
    try:
        async with controller(kafka, couchdb, config) as stub:
            action, rev = await stub.create_action(
                "sleepy", SLEEPY_JS, kind="nodejs:20", concurrency=4
            )
            first.start()
            long = [
                await stub.invoke(action, rev, blocking=False, content={"i": i, "s": long_s})
                for i in range(RUNNING)
            ]
            await wait_for(lambda: _status_at_least(first, "running", RUNNING), 60)
            short = [
                await stub.invoke(action, rev, blocking=False, content={"i": i, "s": 0.02})
                for i in range(QUEUED)
            ]
            await wait_for(lambda: _status_at_least(first, "queued", QUEUED), 30)
            assert sum(completions(stub, long).values()) == 0, "published too slowly"
            t0 = time.monotonic()
            assert await asyncio.to_thread(first.terminate, 60) == 0
            stopped_s = time.monotonic() - t0
            assert stopped_s < DEADLINE_S + 5, first.log()[-3000:]
            assert "handing back 500 queued activations" in first.log()
            # The running calls finished and were answered, or were stopped at the deadline
            # and handed back unanswered; no queued call ran.
            in_time = long_s < DEADLINE_S
            assert completions(stub, long) == dict.fromkeys(long, 1 if in_time else 0)
            assert sum(completions(stub, short).values()) == 0
            assert stub.pings[-1]["isEnabled"] is False
            assert not processes_with_marker(config.container_prefix)
            # The next invoker on the same id gets exactly the handed-back calls.
            t1 = time.monotonic()
            second.start()
            await wait_for(lambda: _all_answered(stub, long + short), 180)
            rerun_s = time.monotonic() - t1
            assert completions(stub, short) == dict.fromkeys(short, 1)
            assert completions(stub, long) == dict.fromkeys(long, 1)  # once, by one of them
            assert "re-acknowledging" not in second.log()
            assert await count_records(stub, long + short) == RUNNING + QUEUED
            print(
                f"drain: stopped in {stopped_s:.1f} s; "
                f"the next invoker ran what was handed back in {rerun_s:.1f} s"
            )
        assert second.terminate() == 0
    finally:
        first.stop()
        second.stop()


async def _status_at_least(proc: InvokerProcess, field: str, n: int) -> bool:
    status = await invoker_status(proc)
    return status is not None and status[field] >= n


async def _all_answered(stub, aids: list[str]) -> bool:
    return all(completions(stub, aids).values())
