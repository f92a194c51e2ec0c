"""End to end on ``ow-invoker standalone``: deploy, verify, and a tiny experiment."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from sebs_helpers import needs_modules, needs_sebs

from sebs_wrappers import catalog, deploy
from sebs_wrappers.experiment import ExperimentConfig, run
from sebs_wrappers.platform import Platform
from whisk.client import GUEST_AUTH, OpenWhisk, annotation

pytestmark = [
    pytest.mark.services,
    needs_sebs,
    needs_modules("jinja2", "PIL", "minio", "moto"),
]


async def test_deploy_and_verify_on_standalone(tmp_path: Path, services) -> None:
    platform = Platform(
        "fifo",
        cores=2,
        user_memory_mb=2048,
        state_dir=tmp_path / "platform",
        log=tmp_path / "p.log",
        host_ports=services.host_ports(),
    )
    await platform.start(GUEST_AUTH)
    try:
        async with OpenWhisk(platform.apihost) as ow:
            benches = catalog.resolve(["010", "110", "120", "210"])
            opts = deploy.DeployOptions(sizes={"010": "test"})
            dep = await deploy.deploy(benches, ow, services, services.root, opts, log=print)
            checks = await deploy.verify(dep, ow, None, services)
            assert all(c.ok for c in checks), [(c.action, c.detail) for c in checks]
            reply = await ow.invoke(
                "sebs-110-dynamic-html", dep.actions["sebs-110-dynamic-html"].params
            )
            assert reply.status == 200 and reply.record is not None
            assert annotation(reply.record, "waitTime") is not None
            assert reply.record["response"]["result"]["is_cold"] is False
    finally:
        platform.stop()


async def test_tiny_experiment_on_standalone(tmp_path: Path) -> None:
    cfg = ExperimentConfig(
        functions=["110.dynamic-html", "210.thumbnailer"],
        policies=["fifo", "openwhisk"],
        intensities=[120.0],
        repetitions=1,
        window_s=5.0,
        cores=2,
        user_memory_mb=2048,
        idle_samples=2,
        warm_rounds=1,
        cooldown_s=0.5,
        out_dir=tmp_path / "out",
        auth=GUEST_AUTH,
    )
    report = await run(cfg)
    rows = list(csv.DictReader((cfg.out_dir / "calls.csv").open()))
    assert len(rows) == 2 * 20
    assert all(r["ok"] == "True" for r in rows), [r["error"] for r in rows if r["ok"] != "True"]
    assert "openwhisk" in report.read_text()
