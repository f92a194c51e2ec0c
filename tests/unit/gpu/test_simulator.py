"""The simulator runs the production scheduler on virtual time; the CLI and config parse."""

from __future__ import annotations

import json

import pytest

from gpu.config import GpuConfig, parse_device_spec
from gpu.devices import Nvml, discover
from gpu.model_table import H200_PINNED_BW, H200_TABLE
from gpu.simulator import SimBackend, SimConfig, simulate_closed, simulate_open, working_set
from ow_invoker.cli import main as cli_main


def test_lalb_beats_lb_when_misses_start_processes() -> None:
    base = {"gpus": 4, "gpu_memory_gb": 0.6, "working_set": 10, "duration_s": 300, "seed": 3}
    rate = {"rate_per_min": 150.0}
    lb = simulate_open(SimConfig(policy="lb", **base, **rate))
    lalb = simulate_open(SimConfig(policy="lalb", **base, **rate))
    assert lb["requests"] == lalb["requests"] > 0
    assert lalb["miss_ratio"] < lb["miss_ratio"]
    assert lalb["mean_latency_s"] < 0.5 * lb["mean_latency_s"]
    again = simulate_open(SimConfig(policy="lalb", **base, **rate))
    assert again == lalb  # deterministic for a seed


def test_exclusive_collapses_past_one_client_per_gpu() -> None:
    cfg = {"gpus": 2, "gpu_memory_gb": 2.0, "duration_s": 60.0, "miss_cost": "host-tier"}
    shared = simulate_closed(SimConfig(policy="cfs-affinity", **cfg), 4)
    excl = simulate_closed(SimConfig(policy="exclusive", **cfg), 4)
    assert excl["cold_starts"] > 10
    assert excl["throughput_rps"] < 0.2 * shared["throughput_rps"]


def test_simulate_gpu_cli_prints_one_json_object_per_policy(capsys) -> None:
    rc = cli_main(
        ["simulate-gpu", "--policy", "lb", "lalbo3", "--gpus", "2", "--working-set", "4",
         "--rate", "30", "--duration", "60", "--json"]
    )  # fmt: skip
    assert rc == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["policy"] for r in rows] == ["lb", "lalbo3"]
    for key in ("requests", "mean_latency_s", "p99_latency_s", "miss_ratio", "false_miss_ratio",
                "avg_duplicates", "utilization"):  # fmt: skip
        assert key in rows[0]


def test_h200_profile_runs_on_its_measured_costs() -> None:
    run = {"policy": "lalb", "gpus": 2, "working_set": 4, "duration_s": 120, "seed": 2}
    h200 = SimConfig.for_profile("h200", miss_cost="host-tier", **run)
    assert h200.table == H200_TABLE and h200.pcie_bw == H200_PINNED_BW
    backend = SimBackend(working_set(h200), "host-tier", h200.pcie_bw)
    vgg = backend.costs["vgg19"]
    assert backend.copy_s(vgg) == vgg.upload_s > 0  # the measured copy, not size / bandwidth
    cpu = simulate_open(SimConfig.for_profile("cpu", miss_cost="host-tier", **run))
    fast = simulate_open(h200)
    assert fast["requests"] == cpu["requests"] > 0
    assert fast["mean_latency_s"] < 0.2 * cpu["mean_latency_s"]  # GPU inference, Gen5 copies


def test_device_spec_and_config_validation() -> None:
    assert parse_device_spec("virtual:3") == ("virtual", 3)
    assert parse_device_spec("auto") == ("auto", None)
    with pytest.raises(ValueError):
        parse_device_spec("gpu:2")
    with pytest.raises(ValueError):
        GpuConfig(policy="fifo")
    devs, note = discover(GpuConfig(devices="virtual:2", memory_mb=100))
    assert [d.memory_bytes for d in devs] == [100 << 20] * 2 and "virtual" in note


def test_auto_falls_back_to_virtual_devices_without_nvml() -> None:
    nvml = Nvml()
    if nvml.available and nvml.count() > 0:
        pytest.skip("a real GPU is present")
    devs, note = discover(GpuConfig(devices="auto", virtual_count=3, memory_mb=64), nvml)
    assert len(devs) == 3 and "no GPU" in note
    with pytest.raises(RuntimeError, match="no GPU found"):
        discover(GpuConfig(devices="nvml"), nvml)
