"""kTasks on the virtual clock (``gpu.kaas.simulated``): the production queue and constant
cache with timed devices, exact to the event."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gpu.kaas import examples
from gpu.kaas.format import parse
from gpu.kaas.simulated import SimKaas, SimRun
from gpu.model_table import ModelCost
from gpu.simulator import (
    KTaskSimConfig,
    SimConfig,
    run_virtual,
    simulate_closed,
    simulate_ktasks_closed,
)
from whisk.clock import Clock

W = 2 * 2 * 5 * 4  # bytes of a client's constants: W/re and W/im, float32[2, 5] each

KERNEL = 0.01

BW = 1000.0  # bytes/s: a client's W copies in 0.08 s


def two_clients_two_rounds(devices: int, budget: int) -> tuple[list[SimRun], SimKaas]:
    """Clients A and B each send a cGEMM at 0, then again when both first ones are done."""

    async def run(clock: Clock) -> tuple[list[SimRun], SimKaas]:
        sim = SimKaas(devices, budget, clock, kernel_s=KERNEL, copy_bytes_per_s=BW)
        tasks = []
        for c in "AB":
            tasks.append(parse(examples.cgemm(1, 2, 5, weights=f"{c}/W", x=f"{c}/X", y=f"{c}/Y")))
            for key in ("W/re", "W/im", "X/re", "X/im"):
                sim.put(f"{c}/{key}")
        out: list[SimRun] = []
        for _ in range(2):
            out += await asyncio.gather(*(sim.run(t, c) for t, c in zip(tasks, "AB", strict=True)))
        return out, sim

    return run_virtual(run)


def timeline(runs: list[SimRun]) -> list[tuple[int, float, float, float, int, int]]:
    return [
        (r.device, round(r.submitted, 9), round(r.started, 9), round(r.finished, 9), r.hits,
         r.misses)
        for r in runs
    ]  # fmt: skip


def test_constants_that_fit_copy_once_then_hit():
    runs, sim = two_clients_two_rounds(devices=1, budget=2 * W)
    assert timeline(runs) == [
        (0, 0.0, 0.0, 0.09, 0, 2),  # A: copy 0.08 + kernel 0.01
        (0, 0.0, 0.09, 0.18, 0, 2),  # B behind A on the one device
        (0, 0.18, 0.18, 0.19, 2, 0),  # both resident: the kernel alone
        (0, 0.18, 0.19, 0.2, 2, 0),
    ]
    assert [round(r.copy_s, 9) for r in runs] == [0.08, 0.08, 0.0, 0.0]
    c = sim.constants
    assert (c.hits, c.misses, c.evictions, sim.failures) == (4, 4, 0, 0)
    assert sorted(c.resident(0)) == ["A/W/im@1", "A/W/re@1", "B/W/im@1", "B/W/re@1"]


def test_constants_that_do_not_fit_are_evicted_and_copied_again():
    runs, sim = two_clients_two_rounds(devices=1, budget=W)  # one client's W at a time
    assert timeline(runs) == [
        (0, 0.0, 0.0, 0.09, 0, 2),
        (0, 0.0, 0.09, 0.18, 0, 2),  # evicts A's two
        (0, 0.18, 0.18, 0.27, 0, 2),  # evicts B's two
        (0, 0.18, 0.27, 0.36, 0, 2),
    ]
    c = sim.constants
    assert (c.hits, c.misses, c.evictions, sim.failures) == (0, 8, 6, 0)
    assert c.resident(0) == ["B/W/re@1", "B/W/im@1"]


def test_placement_spreads_two_clients_then_follows_their_constants():
    runs, sim = two_clients_two_rounds(devices=2, budget=W)
    assert timeline(runs) == [
        (0, 0.0, 0.0, 0.09, 0, 2),
        (1, 0.0, 0.0, 0.09, 0, 2),  # device 0's backlog is A's copy: B goes to device 1
        (0, 0.09, 0.09, 0.1, 2, 0),  # each back where its W is
        (1, 0.09, 0.09, 0.1, 2, 0),
    ]
    assert (sim.constants.evictions, sim.failures) == (0, 0)


def test_closed_loop_ktasks_beyond_the_budget_miss_on_every_request():
    """Two clients on one device holding one W: every request copies its W (0.08 s) before
    its kernel (0.01 s); warm, the first request of each is not counted."""
    cfg = KTaskSimConfig(
        devices=1, constant_budget=32, size=2, rows=1, kernel_s=KERNEL, copy_bytes_per_s=BW,
        duration_s=0.9,
    )  # fmt: skip
    assert cfg.weight_bytes == 32  # the budget holds one client's W
    r = simulate_ktasks_closed(cfg, 2, warm=True)
    per = 32 / BW + KERNEL  # 0.042 s, one after the other from 0.084 (after the warm pair)
    assert r["requests"] == 23  # 2, then one more per completion before 0.984: 21
    assert r["throughput_rps"] == pytest.approx(1 / per)
    assert r["p50_latency_s"] == pytest.approx(2 * per)  # behind the other client's
    assert (r["constant_hits"], r["constant_misses"], r["constant_evictions"]) == (0, 46, 46)
    assert r["copy_s"] == pytest.approx(23 * 0.032)
    fits = simulate_ktasks_closed(KTaskSimConfig(**{**cfg.__dict__, "constant_budget": 64}), 2)
    assert (fits["constant_misses"], fits["constant_evictions"], fits["failures"]) == (4, 0, 0)


def test_warm_closed_loop_leaves_exclusive_cold_starts_out_until_clients_outnumber_gpus():
    m = ModelCost("m", 10**6, 0.01, 0.5)
    run = {"gpus": 2, "gpu_memory_gb": 0.0015, "duration_s": 5.0, "batch": 1, "table": (m,)}
    kw: dict[str, Any] = {"miss_cost": "host-tier", "cold_process_s": 2.0, **run}
    exclusive = simulate_closed(SimConfig(policy="exclusive", **kw), 2, warm=True)
    lalb = simulate_closed(SimConfig(policy="lalb", **kw), 2, warm=True)
    assert exclusive["throughput_rps"] == pytest.approx(200.0)
    assert lalb["throughput_rps"] == pytest.approx(200.0)
    assert exclusive["p90_latency_s"] == pytest.approx(0.01)
    cold = simulate_closed(SimConfig(policy="exclusive", **kw), 2)
    assert cold["throughput_rps"] < 0.6 * exclusive["throughput_rps"]  # 2.5 s of cold start
