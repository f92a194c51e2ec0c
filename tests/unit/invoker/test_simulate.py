"""The simulator runs the production invoker on a virtual clock: hand-computed schedules
for each policy on one core, and the paper's ordering on the SeBS-like mix."""

import heapq
from pathlib import Path

import pytest

from containers.pool import ContainerPool
from invoker.simulate import SimulationSettings, SimulationStalled, simulate
from invoker.workloads import (
    SEBS_CPU_SHARE,
    TraceCall,
    io_cpu_workload,
    read_trace,
    uniform_workload,
    write_trace,
)
from policies import builtin
from policies.base import Policy
from policies.preemption import Preemption

# Warm-up runs L, M, S once each (E[p] = 3, 2, 1; arrivals at t=0) and ends at t=6.
# Then: a=L@0.0, b=M@0.1, c..f=S@0.2..0.5 (times relative to the end of the warm-up).
TRACE = [
    TraceCall(0.0, "L", 3.0),
    TraceCall(0.1, "M", 2.0),
    TraceCall(0.2, "S", 1.0),
    TraceCall(0.3, "S", 1.0),
    TraceCall(0.4, "S", 1.0),
    TraceCall(0.5, "S", 1.0),
]


def finish_order_responses(order: list[int]) -> list[float]:
    """Response times when a runs 0-3 and then the others run back to back in ``order``."""
    responses = [3.0] + [0.0] * 5
    t = 3.0
    for i in order:
        t += TRACE[i].duration_s
        responses[i] = t - TRACE[i].arrival_s
    return responses


EXPECTED = {
    # FIFO: arrival order.
    "fifo": finish_order_responses([1, 2, 3, 4, 5]),
    # SEPT: E[p] S=1 < M=2; ties by arrival.
    "sept": finish_order_responses([2, 3, 4, 5, 1]),
    # EECT: r'+E: b=2.1, c..f=1.2..1.5 -> c,d,e,f,b.
    "eect": finish_order_responses([2, 3, 4, 5, 1]),
    # RECT: r̄+E with r̄ the previous call's arrival: b=0+2 (warm-up at 0), c=0+1,
    # d=c's arrival+1=7.2, e=7.3, f=7.4 -> c, b, d, e, f.
    "rect": finish_order_responses([2, 1, 3, 4, 5]),
    # FC: #calls in the last 60 s (warm-up included) x E: b=2*2=4; c,d,e,f = 2,3,4,5 ->
    # c, d, then b (4, arrived before e), e, f.
    "fc": finish_order_responses([2, 3, 1, 4, 5]),
}


@pytest.mark.parametrize("policy", sorted(EXPECTED))
def test_hand_computed_schedule_on_one_core(policy):
    result = simulate(TRACE, policy, SimulationSettings(cores=1))
    expected = EXPECTED[policy]
    assert result["calls"] == 6
    # every call wrote its record (the trace's 6 and a warm-up call per function and core)
    assert result["records_written"] == 6 + len({c.function for c in TRACE})
    assert result["mean_response_s"] == pytest.approx(sum(expected) / 6, abs=1e-6)
    assert result["max_response_s"] == pytest.approx(max(expected), abs=1e-6)
    per_fn = result["per_function"]
    s_mean = sum(expected[2:]) / 4
    assert per_fn["S"]["mean_response_s"] == pytest.approx(s_mean, abs=1e-6)
    assert per_fn["M"]["mean_response_s"] == pytest.approx(expected[1], abs=1e-6)


def test_baseline_shares_one_core_by_processor_sharing():
    # Hand-computed processor sharing of a(3)@0, b(2)@0.1, S(1)@0.2 and S(1)@0.3 on one
    # core: c and d finish at 4.1667, b at 6.1, a at 7.0.
    trace = TRACE[:4]
    result = simulate(trace, "openwhisk", SimulationSettings(cores=1))
    expected = [7.0, 6.0, 4.1666667 - 0.2, 4.2666667 - 0.3]
    assert result["mean_response_s"] == pytest.approx(sum(expected) / 4, abs=1e-5)
    assert result["per_function"]["L"]["mean_response_s"] == pytest.approx(7.0, abs=1e-5)
    assert result["cold_starts"] == 1  # the second S needs a container of its own


@pytest.mark.parametrize(("ahead", "responses"), [(0, [2.0, 3.99, 5.98]), (2, [2.0, 2.99, 3.98])])
def test_containers_created_ahead_spare_the_core_their_cold_start(ahead, responses):
    """One core, 1 s cold starts, three 1 s calls of three actions: without creating ahead,
    each call holds the core through its container's creation; with it, the two that
    wait get theirs made while the first runs, and only the first cold start is waited."""
    trace = [TraceCall(0.0, "a", 1.0), TraceCall(0.01, "b", 1.0), TraceCall(0.02, "c", 1.0)]
    settings = SimulationSettings(cores=1, cold_start_s=1.0, warmup=False, create_ahead=ahead)
    result = simulate(trace, "fifo", settings)
    assert result["mean_response_s"] == pytest.approx(sum(responses) / 3, abs=1e-6)
    assert result["cold_starts"] == 3


def test_paper_ordering_on_the_sebs_mix():
    trace = uniform_workload(intensity=120, cores=4, seed=1)
    r = {
        p: simulate(trace, p, SimulationSettings(cores=4, cold_start_s=0.5))
        for p in ("fifo", "sept", "eect", "rect", "fc", "openwhisk")
    }
    mean = {p: v["mean_response_s"] for p, v in r.items()}
    stretch = {p: v["mean_stretch"] for p, v in r.items()}
    assert mean["sept"] < 0.4 * mean["fifo"] and mean["fc"] < 0.4 * mean["fifo"]
    for p in ("eect", "rect"):
        assert mean["sept"] < mean[p] < mean["fifo"]
    assert stretch["fc"] < stretch["fifo"] / 10 and stretch["sept"] < stretch["fifo"] / 10
    assert mean["fc"] < mean["openwhisk"] and stretch["fc"] < stretch["openwhisk"]
    for p, v in r.items():
        assert v["calls"] == len(trace), p  # every call completes: nothing starved or lost
    assert r["openwhisk"]["cold_starts"] > r["fc"]["cold_starts"] == 0


def test_trace_csv_round_trip_and_validation(tmp_path):
    trace = uniform_workload(30, 2, seed=7, window_s=10)
    assert len(trace) == 10
    path = tmp_path / "t.csv"
    write_trace(trace, path)
    back = read_trace(path)
    assert [c.function for c in back] == [c.function for c in trace]
    assert uniform_workload(30, 2, seed=7, window_s=10) == trace  # seeded
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,function\n1,f\n")
    with pytest.raises(ValueError, match="missing columns duration_s"):
        read_trace(bad)


def test_cpu_parts_share_a_core_by_processor_sharing():
    """Hand-computed: calls of 1 s on one shared core (the baseline): a sleeping one beside
    a CPU-bound one loses nothing; three half-CPU calls (demand 1.5) stretch their CPU
    parts by a = 2 (3 x 0.5 / (0.5 + 0.5 a) = 1), so each takes 0.5 + 1.0 = 1.5 s."""
    pair = [TraceCall(0.0, "sleep", 1.0, 0.0), TraceCall(0.0, "spin", 1.0, 1.0)]
    r = simulate(pair, "openwhisk", SimulationSettings(cores=1, warmup=False))
    assert r["max_response_s"] == pytest.approx(1.0, abs=1e-6)
    half = [TraceCall(0.0, "half", 1.0, 0.5)] * 3
    r = simulate(half, "openwhisk", SimulationSettings(cores=1, warmup=False))
    assert r["mean_response_s"] == pytest.approx(1.5, abs=1e-6)


def test_io_cpu_mix_waiting_calls_never_wait_for_the_core():
    """Issue 14's mix on one core: under FC the sleeping calls run beside the CPU-bound
    ones (in 1 s, as under the greedy baseline) and the CPU-bound ones one at a time;
    before CPU-share admission the sleeping calls queued for the core."""
    trace = io_cpu_workload(2.0, 40.0, seed=1)
    r = {p: simulate(trace, p, SimulationSettings(cores=1)) for p in ("fc", "openwhisk")}
    fc, ow = r["fc"]["per_function"], r["openwhisk"]["per_function"]
    # (One sleeping call waits 43 ms: eight calls are on the core, the bound per core.)
    assert fc["sleep"]["mean_response_s"] == pytest.approx(1.0, abs=1e-3)
    assert fc["spin"]["mean_response_s"] < ow["spin"]["mean_response_s"]
    assert r["fc"]["mean_response_s"] < r["openwhisk"]["mean_response_s"]


def test_trace_cpu_column(tmp_path):
    path = tmp_path / "t.csv"
    trace = [TraceCall(0.0, "a", 1.0, 0.25), TraceCall(1.0, "b", 2.0)]
    write_trace(trace, path)
    assert read_trace(path) == trace
    path.write_text("arrival_s,function,duration_s,cpu_s\n0,f,1,2\n")
    with pytest.raises(ValueError, match="cpu_s must be between 0 and duration_s"):
        read_trace(path)
    shares = uniform_workload(60, 1, seed=1, window_s=10, cpu_share={"010.sleep": 0.0})
    assert {c.cpu_s for c in shares if c.function == "010.sleep"} == {0.0}
    assert all(c.cpu_s == c.duration_s for c in shares if c.function != "010.sleep")


DATA = Path(__file__).resolve().parents[2] / "data"


def fifo_reference(trace: list[TraceCall], cores: int) -> list[float]:
    """Response times of non-preemptive FIFO on ``cores`` cores with exact durations,
    computed independently of the simulator (list scheduling)."""
    free = [0.0] * cores
    responses = []
    for c in trace:
        start = max(c.arrival_s, heapq.heappop(free))
        heapq.heappush(free, start + c.duration_s)
        responses.append(start + c.duration_s - c.arrival_s)
    return responses


@pytest.mark.parametrize("cores", [1, 4])
def test_the_azure_hang_reproducer_finishes_and_matches_fifo_exactly(cores):
    # Issue 27: 124 calls of one Azure 2019 function; virtual time stopped at 523.74 s
    # and the loop spun (now it would fail with VirtualTimeStalled in seconds).
    trace = read_trace(DATA / "azure2019-one-function-124.csv")
    assert len(trace) == 124
    r = simulate(trace, "fifo", SimulationSettings(cores=cores))
    expected = fifo_reference(trace, cores)
    assert r["calls"] == 124
    assert r["mean_response_s"] == pytest.approx(sum(expected) / 124, abs=1e-6)
    assert r["max_response_s"] == pytest.approx(max(expected), abs=1e-6)


@pytest.mark.parametrize("policy", ["fc", "openwhisk"])
def test_a_long_generator_window_finishes(policy):
    # 50 virtual minutes of the SeBS mix on one core (the CPU stalled after about 310 s).
    trace = uniform_workload(6, 1, seed=1, window_s=3000, cpu_share=SEBS_CPU_SHARE)
    r = simulate(trace, policy, SimulationSettings(cores=1))
    assert r["calls"] == len(trace) == 300
    assert r["makespan_s"] > 2900


@pytest.mark.parametrize("policy", ["fc", "openwhisk"])
def test_an_action_needing_the_memory_of_the_prewarms_runs(policy):
    # Found on a 2 GB slice of the Azure sample: a 2048 MB action on a node of 2048 MB,
    # whose two 256 MB prewarmed containers were never evicted, waited for ever (and the
    # whole queue behind it) while virtual time moved on.
    trace = [TraceCall(float(i), "big", 1.0, memory_mb=2048) for i in range(3)]
    trace.append(TraceCall(0.5, "small", 1.0, memory_mb=256))
    r = simulate(trace, policy, SimulationSettings(cores=2, user_memory_mb=2048))
    assert r["calls"] == 4 and r["max_response_s"] < 10


def test_calls_that_nothing_will_start_fail_the_simulation_naming_them(monkeypatch):
    # A node that never finds room: without the watchdog the simulation would run for ever
    # on its periodic loops.
    monkeypatch.setattr(ContainerPool, "reserve", lambda self, *a, **kw: None)
    trace = [TraceCall(0.0, "stuck", 1.0, memory_mb=512)]
    with pytest.raises(SimulationStalled, match=r"1 calls outstanding.*stuck, needs 512 MB"):
        simulate(trace, "fc", SimulationSettings(cores=1, warmup=False))


def test_sept_share_moves_a_long_call_beside_another_for_a_short_one():
    # Two 10 s calls hold both cores when a 0.1 s call arrives at 1 s. Under sept-share one
    # long call joins the other's core (both run at half speed for 0.1 s), the short one
    # runs at once on the core it left, and the long call spreads back when it is done.
    trace = [TraceCall(0.0, "L", 10.0), TraceCall(0.0, "L", 10.0), TraceCall(1.0, "S", 0.1)]
    shared = simulate(trace, "sept-share", SimulationSettings(cores=2))
    assert shared["per_function"]["S"]["mean_response_s"] == pytest.approx(0.1, abs=1e-6)
    assert shared["per_function"]["L"]["mean_response_s"] == pytest.approx(10.05, abs=1e-6)
    assert (shared["moved"], shared["preemptions"]) == (2, 0)
    plain = simulate(trace, "sept", SimulationSettings(cores=2))
    assert plain["per_function"]["S"]["mean_response_s"] == pytest.approx(9.1, abs=1e-6)
    assert plain["moved"] == 0


def test_an_overdue_call_starts_on_a_shared_core_when_its_time_comes(monkeypatch):
    # H (30 s) and M (20 s) are learnt first; then two H calls hold both cores from 40 s
    # and M arrives at 42 s, not much shorter than their 28 s left (no move, no pause).
    # Overdue after 0.25 * 20 s, at 47 s, it joins core 0 while H there still needs 23 s,
    # though nothing starts or ends then: the dispatch loop is woken for its deadline. It
    # runs at half speed until H on core 1 ends at 70 s (11.5 s done), then alone: ends
    # at 78.5 s, against 90 s waiting for a core.
    rule = Preemption(share_cores=2, overdue=0.25)
    monkeypatch.setitem(
        builtin.BUILTIN, "sept-overdue", Policy("sept-overdue", builtin._sept, preemption=rule)
    )
    trace = [
        TraceCall(0.0, "H", 30.0),
        TraceCall(0.0, "M", 20.0),
        TraceCall(40.0, "H", 30.0),
        TraceCall(40.0, "H", 30.0),
        TraceCall(42.0, "M", 20.0),
    ]
    shared = simulate(trace, "sept-overdue", SimulationSettings(cores=2))
    m = shared["per_function"]["M"]["mean_response_s"]
    assert m == pytest.approx((20.0 + 36.5) / 2, abs=1e-3) and shared["overdue_starts"] == 1
    plain = simulate(trace, "sept", SimulationSettings(cores=2))
    assert plain["per_function"]["M"]["mean_response_s"] == pytest.approx(
        (20.0 + 48.0) / 2, abs=1e-3
    )
