"""Deploy, verify and the experiment runner's mechanics against a stub OpenWhisk API.

The stub runs no code (see ow_stub.py); this checks the REST calls, the protocol's phases,
the joins and the outputs, not the platform.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import zipfile
from pathlib import Path

import pytest
from ow_stub import StubOpenWhisk
from sebs_helpers import needs_sebs

from sebs_wrappers import catalog, deploy
from sebs_wrappers.experiment import ExperimentConfig, run
from whisk.client import OpenWhisk, OpenWhiskError

pytestmark = needs_sebs

FUNCS = ["010.sleep", "110.dynamic-html"]


async def test_deploy_and_verify_over_rest(tmp_path: Path) -> None:
    stub = StubOpenWhisk()
    url = await stub.start()
    try:
        async with OpenWhisk(url) as ow:
            dep = await deploy.deploy(
                catalog.resolve(FUNCS), ow, None, tmp_path, log=lambda m: None
            )
            checks = await deploy.verify(dep, ow)
    finally:
        await stub.stop()
    assert [c.ok for c in checks] == [True, True], checks
    action = stub.actions["sebs-110-dynamic-html"]
    assert action["exec"]["kind"] == "python:3.11" and action["exec"]["binary"] is True
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(action["exec"]["code"]))) as zf:
        assert "__main__.py" in zf.namelist()
    assert action["limits"] == {"memory": 128, "timeout": 10_000, "logs": 10, "concurrency": 1}
    keys = {p["key"] for p in action["parameters"]}
    assert keys == {
        "MINIO_STORAGE_CONNECTION_URL",
        "MINIO_STORAGE_ACCESS_KEY",
        "MINIO_STORAGE_SECRET_KEY",
    }
    saved = deploy.Deployment.load(tmp_path / "deployment.json")
    assert saved.actions["sebs-010-sleep"].params == {"sleep": 1}


async def test_experiment_protocol_on_stub(tmp_path: Path) -> None:
    stub = StubOpenWhisk(cores=2, delays={"sebs-010-sleep": 0.15, "sebs-110-dynamic-html": 0.01})
    url = await stub.start()
    cfg = ExperimentConfig(
        functions=FUNCS,
        policies=["external"],
        intensities=[600.0],
        repetitions=2,
        window_s=2.0,
        cores=2,
        idle_samples=3,
        warm_rounds=1,
        cooldown_s=0.0,
        out_dir=tmp_path / "out",
        apihost=url,
        auth="u:k",
    )
    try:
        report = await run(cfg)
    finally:
        await stub.stop()
    out = cfg.out_dir
    with (out / "calls.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 40  # N = 600 calls/core/min * 2 cores * 2 s / 60 s, per repetition
    assert all(r["ok"] == "True" and r["activation_id"] for r in rows)
    assert all(
        r["duration_ms"] not in ("", "None") and r["wait_ms"] not in ("", "None") for r in rows
    )
    assert all(float(r["stretch"]) > 0 for r in rows)
    # warm-up happened before measuring: no measured call was the first of its action
    assert not any(r["is_cold"] == "True" for r in rows)
    idle = list(csv.DictReader((out / "idle.csv").open()))
    assert len(idle) == 2 * 3
    # both repetitions replay different sequences; the scenario files are kept
    s0 = (out / "scenarios" / "i600-r0.jsonl").read_text()
    s1 = (out / "scenarios" / "i600-r1.jsonl").read_text()
    assert s0 != s1 and len(s0.splitlines()) == 40
    assert (out / "runs" / "external" / "i600-r0" / "timings.csv").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["summary"][0]["calls"] == 80
    text = report.read_text()
    assert "## Response time and stretch per policy and intensity" in text
    assert "plots/response.png" in text and (out / "plots" / "response.png").exists()
    # the stub saw arrivals spread over the window, not bunched up
    measured = [t for t, _ in stub.arrivals[-40:]]
    assert max(measured) - min(measured) > 1.0


def test_report_only_regenerates(tmp_path: Path) -> None:
    # --report-only reuses calls.csv/idle.csv; write a minimal set by hand
    from sebs_wrappers import results
    from sebs_wrappers.analysis import CallRow

    rows = [CallRow("fc", 60.0, 0, i, "a", 0.0, 0.0, 0.5 + i, 200, True) for i in range(5)]
    results.save_raw(tmp_path, rows, {"fc": {"a": [0.5]}}, {})
    from sebs_wrappers import experiment

    class Args:
        report_only = tmp_path

    assert experiment.main(Args()) == 0  # type: ignore[arg-type]
    assert (tmp_path / "report.md").exists()


async def test_resume_keeps_measured_policies(tmp_path: Path) -> None:
    stub = StubOpenWhisk(cores=2, default_delay=0.005)
    url = await stub.start()
    base = dict(
        functions=["110.dynamic-html"],
        intensities=[600.0],
        repetitions=1,
        window_s=1.0,
        cores=2,
        idle_samples=1,
        warm_rounds=1,
        cooldown_s=0.0,
        out_dir=tmp_path,
        apihost=url,
        auth="u:k",
    )
    try:
        await run(ExperimentConfig(policies=["first"], **base))
        first = (tmp_path / "runs" / "first" / "i600-r0" / "timings.csv").read_text()
        await run(ExperimentConfig(policies=["first", "second"], resume=True, **base))
    finally:
        await stub.stop()
    assert (tmp_path / "runs" / "first" / "i600-r0" / "timings.csv").read_text() == first
    with (tmp_path / "calls.csv").open() as f:
        policies = [r["policy"] for r in csv.DictReader(f)]
    assert policies.count("first") == policies.count("second") == 20


async def test_the_default_kind_is_one_a_stock_controller_accepts() -> None:
    # The stub refuses kinds outside the stock manifest with 400, as a stock controller does.
    stub = StubOpenWhisk()
    url = await stub.start()
    try:
        async with OpenWhisk(url) as ow:
            with pytest.raises(OpenWhiskError) as e:
                await ow.put_action("old", b"zip", kind="python:3")
            assert e.value.status == 400 and "python:3'" in str(e.value)
            await ow.put_action("new", b"zip")
        assert stub.actions["new"]["exec"]["kind"] == "python:3.11"
    finally:
        await stub.stop()
