"""The Gatling simulation really runs (``mvn gatling:test``) and replays open-loop."""

from __future__ import annotations

import asyncio
import getpass
from pathlib import Path

import pytest
from ow_stub import StubOpenWhisk

from gatling import runner
from gatling.scenario import Call, write_scenario

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not runner.mvn_available(), reason="mvn and java are needed for Gatling"),
]


# A slow reply takes 3 s; a send held back by one would be that late, while a loaded machine
# (the suite's other lanes beside it) delays an open-loop send by well under half of it.
SLOW_S = 3.0
LATE_S = SLOW_S / 2


async def test_gatling_replays_scenario(tmp_path: Path) -> None:
    # Its JVMs keep no perf data: a /tmp/hsperfdata_<user> would be left on the host.
    perf_data = Path("/tmp") / f"hsperfdata_{getpass.getuser()}"
    perf_data_before = perf_data.exists()
    stub = StubOpenWhisk(cores=4, delays={"slow": SLOW_S, "fast": 0.01})
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
        assert t.lateness_s < LATE_S  # a slow reply never held back the next send
    slow = [t for t in timings if t.action == "slow"]
    assert all(t.response_s >= SLOW_S for t in slow)
    assert max(t.sent_s for t in timings) < 1.1 + LATE_S
    assert perf_data_before or not perf_data.exists(), f"{perf_data} left behind"
