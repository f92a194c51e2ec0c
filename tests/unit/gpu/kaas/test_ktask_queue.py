"""The node's kTask queue: input readiness, timeouts, locality of bursts, learned run times
(pure: a virtual clock, a dict for the data layer's versions, a ConstantCache for residency)."""

from __future__ import annotations

import pytest

from gpu.kaas import examples
from gpu.kaas.constants import ConstantCache
from gpu.kaas.format import KTask, parse
from gpu.kaas.ktask_queue import KDevice, KTaskQueue, Refuse, Start
from whisk.clock import VirtualClock

MB = 1 << 20
BW = 1000.0 * MB  # copy bandwidth: 1 MiB per ms


def cgemm(client: int, n: int = 512) -> KTask:
    """Client ``client``'s request: weights 2 x n x n float32 (2 MiB at n = 512)."""
    return parse(examples.cgemm(8, n, n, weights=f"c{client}/W", x=f"c{client}/X"))


def ready(versions: dict[str, int], client: int) -> None:
    for part in ("W/re", "W/im", "X/re", "X/im"):
        versions[f"c{client}/{part}"] = 1


def make(devices: int = 2, **kw):
    clock = VirtualClock()
    versions: dict[str, int] = {}
    cache = ConstantCache([64 * MB] * devices, clock=clock)
    q = KTaskQueue(
        [KDevice(i, 64 * MB) for i in range(devices)],
        clock,
        holders=cache.holders,
        versions=versions.get,
        copy_bytes_per_s=BW,
        **kw,
    )
    return q, clock, versions, cache


def test_waits_for_its_inputs_without_blocking_those_behind() -> None:
    q, clock, versions, _ = make()
    first = q.submit(cgemm(1), "c1")
    second = q.submit(cgemm(2), "c2")
    ready(versions, 2)
    [d] = q.schedule()
    assert isinstance(d, Start) and d.id == second and len(q) == 1
    clock.advance_to(2.5)
    ready(versions, 1)
    [d] = q.schedule()
    assert isinstance(d, Start) and d.id == first and d.waited_s == 2.5 and len(q) == 0


def test_inputs_that_never_arrive_are_refused_after_the_timeout() -> None:
    q, clock, _, _ = make(input_timeout_s=5)
    q.submit(cgemm(1), "c1")
    clock.advance_to(4.9)
    assert q.schedule() == []
    clock.advance_to(5.0)
    [d] = q.schedule()
    assert isinstance(d, Refuse) and "'c1/X/re', 'c1/X/im', 'c1/W/re', 'c1/W/im'" in d.error
    assert "not in the data layer (at the versions it names) after 5 s" in d.error
    assert len(q) == 0


def test_locality_against_load() -> None:
    """Finish time decides: backlog + copy (2 MiB = 2 ms here), kTasks 10 ms each."""
    q, _, versions, _ = make()
    ready(versions, 1)
    ready(versions, 2)
    c2 = q.submit(cgemm(2), "c2")
    c1 = [q.submit(cgemm(1), "c1") for _ in range(3)]
    again = q.submit(cgemm(2), "c2")
    starts = [(s.id, s.device, s.placement.missing_bytes) for s in q.schedule()]
    assert starts == [
        (c2, 0, 2 * MB),  # both idle: the lower index
        (c1[0], 1, 2 * MB),  # device 0 is 12 ms busy: copy to the idle device 1
        (c1[1], 1, 0),  # 12 ms there with c1's weights arriving, 14 ms on device 0 with a copy
        (c1[2], 0, 2 * MB),  # 22 ms on device 1 against 12 + 2 ms on device 0: copy again
        (again, 0, 0),  # 24 ms either way: the device that will hold c2's weights
    ]
    assert q.backlog(0) == pytest.approx(0.034) and q.backlog(1) == pytest.approx(0.022)


def test_complete_frees_the_backlog_and_learns_the_run_time() -> None:
    q, _, versions, cache = make(smoothing=0.5)
    ready(versions, 1)
    a = q.submit(cgemm(1), "c1")
    [s] = q.schedule()
    assert q.estimate("c1", "cgemm") == 0.01
    for part in ("re", "im"):  # what its executor did: load the weights
        cache.admit(s.device, f"c1/W/{part}", 1, MB)
        cache.release(s.device, f"c1/W/{part}", 1)
    q.complete(a, seconds=0.002 + 0.05)  # its 2 ms copy, then 50 ms of kernels
    assert q.backlog(s.device) == 0.0
    assert q.estimate("c1", "cgemm") == pytest.approx(0.05)
    b = q.submit(cgemm(1), "c1")
    [hit] = q.schedule()
    assert hit.device == s.device and hit.placement.missing_bytes == 0
    q.complete(b, seconds=0.03)  # no copy: all of it is run time
    assert q.estimate("c1", "cgemm") == pytest.approx(0.04)
    assert q.estimate("c2", "cgemm") == 0.01  # per client: another client has its own


def test_impossible_tasks_are_refused_not_raised() -> None:
    q, _, versions, _ = make()
    ready(versions, 1)
    q.submit(cgemm(1, n=4096), "c1")  # 128 MiB of weights, 64 MiB per device
    doc = examples.cgemm(8, 64, 64)
    doc["kernels"][0] = {
        "name": "k", "library": "cuda", "kernel": "f", "source": "__global__ void f() {}",
        "grid": 1, "block": 1, "arguments": ["Xr", "Xi", "Wr", "Wi"], "outputs": ["Yr", "Yi"],
    }  # fmt: skip
    for part in ("W/re", "W/im", "X/re", "X/im"):
        versions[f"cgemm/{part}"] = 1
    q.submit(parse(doc), "c9")
    errors = [d.error for d in q.schedule() if isinstance(d, Refuse)]
    assert "constants need 128.0 MiB together; the largest constant budget" in errors[0]
    assert "CUDA source kernels and the pool has no CUDA device" in errors[1]
