"""The Gatling simulation really runs (``mvn gatling:test``) and replays open-loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from ow_stub import StubOpenWhisk

from gatling import runner
from gatling.scenario import Call, write_scenario

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not runner.mvn_available(), reason="mvn and java are needed for Gatling"),
]


async def test_gatling_replays_scenario(tmp_path: Path) -> None:
    stub = StubOpenWhisk(cores=4, delays={"slow": 1.0, "fast": 0.01})
    url = await stub.start()
    stub.actions.update({"slow": {}, "fast": {}})
    calls = [Call(i, i * 0.1, "slow" if i % 2 else "fast", {"echo": i}) for i in range(12)]
    write_scenario(tmp_path / "s.jsonl", calls)
    try:
        timings = await asyncio.to_thread(
            runner.run,
            tmp_path / "s.jsonl",
            tmp_path / "timings.csv",
            url,
            "u:k",
            timeout_s=600,
            log=tmp_path / "gatling.log",
        )
    finally:
        await stub.stop()
    assert sorted(t.seq for t in timings) == list(range(12))
    for t in timings:
        assert t.status == 200 and t.activation_id in stub.records
        assert t.lateness_s < 0.5  # a 1 s reply never held back the next send
    slow = [t for t in timings if t.action == "slow"]
    assert all(t.response_s >= 1.0 for t in slow)
    assert max(t.sent_s for t in timings) < 1.1 + 0.1
