"""The soak run's CI version (issue 31): ``ow-invoker run`` for 5 minutes at a steady mixed
load on the session's Kafka and CouchDB-API server, the same code as the documented hour
(``benchmarks/soak.py --minutes 60``). It fails when a resource's floor (its lowest value in
each 30 s) rises past its allowance after the one-minute warm-up, or a call is lost, answered
twice or not recorded.
``OW_SOAK_MINUTES`` lengthens it; ``pytest -s`` prints the report."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest

from harness.soak import ALLOWED_GROWTH, GAUGES, Soak, run_soak, write

pytestmark = pytest.mark.services
MINUTES = float(os.environ.get("OW_SOAK_MINUTES", "5"))


@pytest.mark.timeout(MINUTES * 60 + 600)
async def test_resources_stay_bounded_and_every_call_is_answered_once(kafka, couchdb, tmp_path):
    result = await run_soak(kafka, couchdb, tmp_path / "run", minutes=MINUTES, warmup_s=60)
    write(result, tmp_path / "out")
    print(f"\nsoak, {MINUTES:g} min:\n{result.report()}")
    assert result.sent > MINUTES * 60 * 15  # the load was held (20 calls/s asked)
    assert set(result.trends()) == set(GAUGES)
    assert result.statuses.get("application error", 0) > 0, result.statuses  # errors, big ones
    assert result.statuses.get("action developer error", 0) > 0, result.statuses  # timeouts
    assert not result.unbounded(), result.report()
    assert result.healthy(), result.report()


def test_a_resource_that_keeps_growing_is_called_unbounded():
    # The verdict itself, on made-up samples: a descriptor leaked every 10 s for 4 minutes
    # after the warm-up, memory wandering within a few MB.
    samples = []
    for i in range(60):
        t = 5.0 * i
        s = {g: 1.0 for g in GAUGES}
        s.update(t=t, fds=20.0 + max(0.0, t - 60) // 10, rss_mb=100.0 + (i % 3))
        samples.append(s)
    soak = Soak(samples=samples, warmup_s=60, sent=10, answered_once=10, recorded=10)
    assert soak.unbounded() == ["fds"]
    grew, allowed = soak.trends()["fds"]
    assert grew > 20 and allowed == ALLOWED_GROWTH["fds"]
    assert not soak.healthy()
    samples_flat = [{**s, "fds": 20.0} for s in samples]
    assert Soak(samples=samples_flat, warmup_s=60, sent=1, answered_once=1, recorded=1).healthy()


def test_churn_that_peaks_late_in_the_window_is_bounded():
    # The samples of a CI run (2026-12-07, tests/data): 8 container directories and 10
    # cgroups, up to 15 and 17 for a few seconds at a time while evicted containers were
    # replaced, more of those bursts late in the window, back to 8 and 10 at the end. A fit
    # of every sample called that growth (+2.4 and +2.1 against 2); the floor did not move.
    path = Path(__file__).parents[2] / "data" / "soak-ci-churn-2026-12-07.jsonl"
    samples = [json.loads(line) for line in path.read_text().splitlines()]
    after = [s for s in samples if s["t"] >= 60]
    for gauge in ("container_dirs", "cgroups"):
        values = [s[gauge] for s in after]
        fitted = statistics.linear_regression([s["t"] for s in after], values).slope
        assert fitted * (after[-1]["t"] - after[0]["t"]) > ALLOWED_GROWTH[gauge]
        assert min(values) == values[-1]
    soak = Soak(samples=samples, warmup_s=60, sent=1, answered_once=1, recorded=1)
    assert soak.unbounded() == []
    assert soak.healthy()
