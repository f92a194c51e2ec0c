"""kTasks end to end on CPU torch devices: the paper's examples against numpy, the constant
cache on the device, the data layer, and the errors a request can cause at run time."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install .[gpu])")

from gpu.kaas import examples  # noqa: E402
from gpu.kaas.calls import WorkerError, abandon, finish, prepare  # noqa: E402
from gpu.kaas.catalogue import BUILTINS  # noqa: E402
from gpu.kaas.constants import ConstantCache  # noqa: E402
from gpu.kaas.driver import KaasDriver  # noqa: E402
from gpu.kaas.executor import KaasExecutor, KaasWorker  # noqa: E402
from gpu.kaas.format import KTask, parse  # noqa: E402
from gpu.kaas.kernels import IMPLEMENTATIONS  # noqa: E402
from gpu.kaas.ktask_queue import KDevice, KTaskQueue, Start  # noqa: E402
from gpu.kaas.placement import DeviceState, place, requirements  # noqa: E402
from gpu.kaas.spec import KTaskError, TensorSpec  # noqa: E402
from gpu.kaas.store import DataStore  # noqa: E402
from gpu.kaas.tensors import from_bytes, spec_of, to_bytes  # noqa: E402
from whisk.clock import SystemClock, VirtualClock  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(60)]
MB = 1 << 20


class Node:
    """A data layer, a constant cache and one CPU executor per device, as a pool would hold."""

    def __init__(self, tmp: Path, devices: int = 1, constant_mb: float = 64) -> None:
        self.store = DataStore(tmp, 256 * MB)
        self.cache = ConstantCache([int(constant_mb * MB)] * devices, clock=VirtualClock())
        self.ex = [KaasExecutor(i, "cpu", self.store, self.cache) for i in range(devices)]

    def put(self, key: str, a: np.ndarray) -> int:
        t = torch.from_numpy(np.ascontiguousarray(a))
        return self.store.put(key, to_bytes(t), spec_of(t)).version

    def get(self, key: str) -> np.ndarray:
        o, data = self.store.read(key)
        return from_bytes(data, o.spec).numpy()

    def run(self, doc: dict[str, Any] | KTask, device: int = 0, **keys: str):
        task = doc if isinstance(doc, KTask) else parse(doc, keys=keys)
        return self.ex[device].run(task)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def random_graph(n: int, degree: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = (rng.random((n, n)) < degree / n).astype(np.float32)
    a = np.maximum(a, a.T)
    np.fill_diagonal(a, 0)
    return a


def bfs_within(a: np.ndarray, start: np.ndarray, hops: int) -> np.ndarray:
    """The reference: vertices at most ``hops`` edges from the start set."""
    visited = start > 0
    frontier = visited.copy()
    for _ in range(hops):
        reached = (a @ frontier.astype(np.float64)) > 0
        frontier = reached & ~visited
        visited |= frontier
    return visited


def to_csr(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols = np.nonzero(a)
    indptr = np.zeros(a.shape[0] + 1, np.int64)
    np.add.at(indptr, rows + 1, 1)
    return np.cumsum(indptr), cols.astype(np.int64), a[rows, cols].astype(np.float32)


# -- the paper's examples -------------------------------------------------------------------


def test_every_builtin_has_an_implementation() -> None:
    assert set(IMPLEMENTATIONS) == set(BUILTINS)


def test_knn_on_a_path_graph(node: Node) -> None:
    n = 8
    a = np.zeros((n, n), np.float32)
    for i in range(n - 1):
        a[i, i + 1] = a[i + 1, i] = 1
    start = np.zeros(n, np.float32)
    start[3] = 1
    node.put("graph/A", a)
    node.put("knn/start", start)
    r = node.run(examples.knn(n, 2))
    assert r.reply() == {"visited": {"key": "knn/visited", "version": 1}}
    assert node.get("knn/visited").tolist() == [0, 1, 1, 1, 1, 1, 0, 0]


@pytest.mark.parametrize("hops", [1, 3])
def test_knn_dense_and_sparse_match_bfs(node: Node, hops: int) -> None:
    n = 300
    a = random_graph(n, 2.5, seed=hops)
    start = np.zeros(n, np.float32)
    start[[0, 17]] = 1
    expected = bfs_within(a, start, hops)
    assert 2 < expected.sum() < n  # neither trivial nor the whole graph
    node.put("graph/A", a)
    indptr, indices, values = to_csr(a)
    node.put("csr/indptr", indptr)
    node.put("csr/indices", indices)
    node.put("csr/values", values)
    node.put("knn/start", start)

    node.run(examples.knn(n, hops))
    dense = node.get("knn/visited")
    node.run(examples.knn(n, hops, graph="csr", sparse_nnz=len(values), visited="knn/sparse"))
    sparse = node.get("knn/sparse")
    assert set(np.unique(dense)) <= {0.0, 1.0}
    assert np.array_equal(dense > 0, expected)
    assert np.array_equal(sparse, dense)


def test_complex_gemm_planar_and_complex64(node: Node) -> None:
    rng = np.random.default_rng(7)
    m, k, n = 16, 48, 24
    x = (rng.standard_normal((m, k)) + 1j * rng.standard_normal((m, k))).astype(np.complex64)
    w = (rng.standard_normal((k, n)) + 1j * rng.standard_normal((k, n))).astype(np.complex64)
    expected = x.astype(np.complex128) @ w.astype(np.complex128)
    node.put("cgemm/X/re", x.real.copy())
    node.put("cgemm/X/im", x.imag.copy())
    node.put("cgemm/W/re", w.real.copy())
    node.put("cgemm/W/im", w.imag.copy())
    node.run(examples.cgemm(m, k, n))
    y = node.get("cgemm/Y/re") + 1j * node.get("cgemm/Y/im")
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)

    node.put("c64/X", x)
    node.put("c64/W", w)
    node.run(examples.cgemm_complex64(m, k, n, x="c64/X", weights="c64/W", y="c64/Y"))
    y64 = node.get("c64/Y")
    assert y64.dtype == np.complex64
    np.testing.assert_allclose(y64, expected, rtol=1e-4, atol=1e-4)


def test_elementwise_and_reductions_match_numpy(node: Node) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 7)).astype(np.float64)
    b = rng.uniform(1, 2, (5, 7)).astype(np.float64)
    node.put("a", a)
    node.put("b", b)
    mat = {"dtype": "float64", "shape": [5, 7]}

    def out(key: str, shape: list[int]) -> dict[str, Any]:
        return {"kind": "output", "key": key, "dtype": "float64", "shape": shape}

    doc = {
        "buffers": {
            "a": {"kind": "input", "key": "a", **mat},
            "b": {"kind": "input", "key": "b", **mat},
            "t": {"kind": "temporary", **mat},
            "q": out("q", [5, 7]),
            "s": out("s", []),
            "m": out("m", [7]),
            "lo": out("lo", [5]),
            "avg": out("avg", []),
        },
        "kernels": [
            {"name": "d", "kernel": "sub", "arguments": ["a", "b"], "outputs": ["t"]},
            {"name": "x3", "kernel": "mul", "arguments": ["t", 3], "outputs": ["t"],
             "after": ["d"]},
            {"name": "q", "kernel": "div", "arguments": ["t", "b"], "outputs": ["q"],
             "after": ["x3"]},
            {"name": "s", "kernel": "sum", "arguments": ["q"], "outputs": ["s"], "after": ["q"]},
            {"name": "m", "kernel": "max", "arguments": ["q", 0], "outputs": ["m"], "after": ["q"]},
            {"name": "lo", "kernel": "min", "arguments": ["a", -1], "outputs": ["lo"]},
            {"name": "avg", "kernel": "mean", "arguments": ["b"], "outputs": ["avg"]},
        ],
    }  # fmt: skip
    node.run(doc)
    q = (a - b) * 3 / b
    np.testing.assert_allclose(node.get("q"), q)
    np.testing.assert_allclose(node.get("s"), q.sum())
    np.testing.assert_allclose(node.get("m"), q.max(axis=0))
    np.testing.assert_allclose(node.get("lo"), a.min(axis=1))
    np.testing.assert_allclose(node.get("avg"), b.mean())


def test_iterations_repeat_the_graph_on_persistent_buffers(node: Node) -> None:
    node.put("one", np.ones(3, np.float32))
    doc = {
        "iterations": 5,
        "buffers": {
            "one": {"kind": "input", "key": "one", "dtype": "float32", "shape": [3]},
            "acc": {"kind": "output", "key": "acc", "dtype": "float32", "shape": [3]},
        },
        "kernels": [
            {"name": "inc", "kernel": "add", "arguments": ["acc", "one"], "outputs": ["acc"]},
        ],
    }  # fmt: skip
    node.run(doc)
    assert node.get("acc").tolist() == [5, 5, 5]


# -- the constant cache on the device -------------------------------------------------------


def cgemm_client(node: Node, c: int, k: int = 64, n: int = 64) -> tuple[dict[str, Any], dict]:
    """Client ``c``'s own weights (its own keys) and input; returns its request and reference."""
    rng = np.random.default_rng(c)
    w = rng.standard_normal((2, k, n)).astype(np.float32)
    x = rng.standard_normal((2, 4, k)).astype(np.float32)
    node.put(f"c{c}/W/re", w[0])
    node.put(f"c{c}/W/im", w[1])
    node.put(f"c{c}/X/re", x[0])
    node.put(f"c{c}/X/im", x[1])
    doc = examples.cgemm(4, k, n, weights=f"c{c}/W", x=f"c{c}/X", y=f"c{c}/Y")
    return doc, {"y": (x[0] + 1j * x[1]) @ (w[0] + 1j * w[1])}


def test_constants_stay_resident_until_a_new_version(node: Node) -> None:
    doc, _ = cgemm_client(node, 1)
    first = node.run(doc)
    second = node.run(doc)
    assert (first.constant_misses, first.constant_hits) == (2, 0)
    assert (second.constant_misses, second.constant_hits) == (0, 2)
    assert node.cache.holders("c1/W/re", 1) == {0}
    w = np.ones((64, 64), np.float32)
    assert node.put("c1/W/re", w) == 2  # a client updates its weights
    third = node.run(doc)
    assert (third.constant_misses, third.constant_hits) == (1, 1)
    assert third.evicted == ["c1/W/re"]  # the stale version left the device
    assert node.cache.holders("c1/W/re", 1) == set() and node.cache.holders("c1/W/re", 2) == {0}
    assert node.ex[0].resident_keys() == {"c1/W/re@2", "c1/W/im@1"}


def test_working_set_beyond_device_memory_evicts_lru_and_stays_correct(tmp_path: Path) -> None:
    # each client's weights: 2 x 64 x 64 float32 = 32 KiB; the device holds two clients' worth
    node = Node(tmp_path, constant_mb=64 * 1024 / MB)
    clients = [cgemm_client(node, c) for c in range(3)]
    misses = hits = 0
    for _ in range(2):
        for c, (doc, ref) in enumerate(clients):
            r = node.run(doc)
            misses += r.constant_misses
            hits += r.constant_hits
            y = node.get(f"c{c}/Y/re") + 1j * node.get(f"c{c}/Y/im")
            np.testing.assert_allclose(y, ref["y"], rtol=1e-4, atol=1e-3)
    assert (misses, hits) == (12, 0)  # round robin over 3 with room for 2: LRU always misses
    assert node.cache.evictions == 8
    assert node.cache.view.devices[0].used <= 64 * 1024
    assert node.ex[0].resident_keys() == set(node.cache.resident(0))
    doc, _ = clients[2]
    assert node.run(doc).constant_hits == 2  # the most recent client is still resident


def test_placement_follows_constants_across_executors(tmp_path: Path) -> None:
    node = Node(tmp_path, devices=2)
    backlog = [0.0, 0.0]

    def submit(doc: dict[str, Any]) -> int:
        task = parse(doc)
        needs, missing = requirements(
            task, lambda k: v.version if (v := node.store.get(k)) else None
        )
        states = [DeviceState(i, backlog[i], 64 * MB) for i in range(2)]
        p = place(needs, missing, states, node.cache.holders, copy_bytes_per_s=1e9)
        assert p.device is not None
        node.ex[p.device].run(task)
        return p.device

    doc1, _ = cgemm_client(node, 1)
    doc2, _ = cgemm_client(node, 2)
    assert submit(doc1) == 0
    backlog[0] = 1e-5  # device 0 is now slightly busy: client 2 goes to the idle device 1
    assert submit(doc2) == 1
    backlog[1] = 1e-5
    assert [submit(doc1), submit(doc2)] == [0, 1]  # each follows its weights
    backlog[0] = 10.0  # unless the queue there costs more than copying the weights
    assert submit(doc1) == 1


def test_the_queue_drives_one_executor_per_device_for_every_client(tmp_path: Path) -> None:
    """Clients' kTasks wait for their inputs, go through the queue to two executors (each a
    FIFO), and come out right; each client's weights end up on the device that ran it."""
    node = Node(tmp_path, devices=2)
    clock = VirtualClock()
    q = KTaskQueue(
        [KDevice(i, 64 * MB) for i in range(2)],
        clock,
        holders=node.cache.holders,
        versions=lambda k: v.version if (v := node.store.get(k)) else None,
        copy_bytes_per_s=1e9,
    )
    ids: dict[int, int] = {}
    for c in (0, 1, 2, 0, 1, 2):
        doc = examples.cgemm(4, 64, 64, weights=f"c{c}/W", x=f"c{c}/X", y=f"c{c}/Y")
        ids[q.submit(parse(doc), f"c{c}")] = c
    assert q.schedule() == []  # nothing is in the data layer yet
    refs = {c: cgemm_client(node, c)[1] for c in (0, 1, 2)}
    fifo: dict[int, list[Start]] = {0: [], 1: []}
    for d in q.schedule():
        assert isinstance(d, Start)
        fifo[d.device].append(d)
    assert sorted(len(f) for f in fifo.values()) == [3, 3]
    for device, starts in fifo.items():
        for st in starts:
            c = ids[st.id]
            assert st.client == f"c{c}"
            r = node.ex[device].run(st.task)
            q.complete(st.id, r.seconds)
            y = node.get(f"c{c}/Y/re") + 1j * node.get(f"c{c}/Y/im")
            np.testing.assert_allclose(y, refs[c]["y"], rtol=1e-4, atol=1e-3)
            assert node.cache.holders(f"c{c}/W/re", 1) >= {device}
    assert q.backlog(0) == q.backlog(1) == 0.0


def driver_on_one_worker(node: Node, budget: int) -> tuple[KaasDriver, KaasWorker]:
    """The live pool's driver on one device whose worker (a separate ``KaasWorker``, JSON
    both ways) runs off the loop, so that the calls queued for it are truly in flight."""
    worker = KaasWorker("cpu")

    async def send(device: int, header: dict[str, Any]) -> dict[str, Any]:
        assert device == 0
        return over_the_wire(await asyncio.to_thread(worker.handle, over_the_wire(header)))

    driver = KaasDriver(
        [KDevice(0, budget)], node.store, node.cache, send, SystemClock(), copy_bytes_per_s=1e9
    )
    return driver, worker


async def test_driver_clients_in_flight_beyond_the_budget_evict_not_refused(
    tmp_path: Path,
) -> None:
    """Three closed-loop clients in flight on one device with room for two clients' weights:
    a call's constants are admitted when the device takes it, not when it is placed, so the
    calls queued behind it hold no room; every request completes, by LRU eviction."""
    budget = 64 * 1024  # each client's weights: 2 x 64 x 64 float32 = 32 KiB
    node = Node(tmp_path, constant_mb=budget / MB)
    driver, worker = driver_on_one_worker(node, budget)
    clients = [cgemm_client(node, c) for c in range(3)]

    async def client(c: int) -> list[tuple[int, int]]:
        doc, ref = clients[c]
        seen = []
        for _ in range(3):
            done = await driver.run(parse(doc), f"c{c}")
            seen.append((done.result.constant_misses, done.result.constant_hits))
            y = node.get(f"c{c}/Y/re") + 1j * node.get(f"c{c}/Y/im")  # only c writes c/Y
            np.testing.assert_allclose(y, ref["y"], rtol=1e-4, atol=1e-3)
        return seen

    try:
        seen = await asyncio.wait_for(asyncio.gather(*(client(c) for c in range(3))), 30)
    finally:
        await driver.close()
    # the device takes them round robin (c0 c1 c2 c0 ...): with room for two, LRU always misses
    assert seen == [[(2, 0)] * 3] * 3
    assert (node.cache.misses, node.cache.hits) == (18, 0)
    assert node.cache.evictions == 14  # two W's per admission after the first two clients
    assert (driver.runs, driver.failures) == (9, 0)
    assert node.cache.view.devices[0].used <= budget
    assert pins(node) == {k: 0 for k in node.cache.resident(0)} and not node.store._pins
    assert set(worker.resident) == set(node.cache.resident(0))


async def test_driver_refuses_constants_that_cannot_fit_at_their_turn(tmp_path: Path) -> None:
    """What the call running there leaves plus everything evictable is too little: the
    request's KTaskError, its pins released, and the next call runs."""
    budget = 64 * 1024
    node = Node(tmp_path, constant_mb=budget / MB)
    driver, _ = driver_on_one_worker(node, budget)
    doc, ref = cgemm_client(node, 1)
    node.cache.admit(0, "running/W", 1, 48 * 1024)  # pinned, as by a call running there
    try:
        with pytest.raises(KTaskError, match="does not fit on device 0: the constants in use"):
            await driver.run(parse(doc), "c1")
        assert pins(node) == {"running/W@1": 1} and not node.store._pins
        node.cache.release(0, "running/W", 1)  # that call ended
        done = await driver.run(parse(doc), "c1")
    finally:
        await driver.close()
    assert (done.result.constant_misses, done.result.evicted) == (2, ["running/W"])
    y = node.get("c1/Y/re") + 1j * node.get("c1/Y/im")
    np.testing.assert_allclose(y, ref["y"], rtol=1e-4, atol=1e-3)
    assert driver.queue.backlog(0) == 0.0


# -- errors at run time ---------------------------------------------------------------------


def pins(node: Node, device: int = 0) -> dict[str, int]:
    """Each resident constant's pin count: a failed request must leave none pinned."""
    cache = node.cache.view.devices[device]
    return {k: r.pins for k in cache.lru() if (r := cache.get(k)) is not None}


def test_inputs_missing_mismatched_or_stale(node: Node) -> None:
    doc = examples.knn(4, 1)
    with pytest.raises(KTaskError, match="input 'x0' reads key 'knn/start', which is not in the"):
        node.run(doc)
    node.put("knn/start", np.zeros(4, np.float64))
    node.put("graph/A", np.zeros((4, 4), np.float32))
    with pytest.raises(
        KTaskError, match=re.escape("declared float32[4] but key 'knn/start' holds")
    ):
        node.run(doc)
    node.put("knn/start", np.zeros(4, np.float32))
    doc["buffers"]["x0"]["version"] = 1
    with pytest.raises(KTaskError, match="expects version 1 of key 'knn/start', the data layer"):
        node.run(doc)
    doc["buffers"]["x0"]["version"] = 2
    assert node.run(doc).outputs["visited"].version == 1


def test_a_failing_kernel_is_a_request_error_and_the_executor_carries_on(node: Node) -> None:
    n = 4
    node.put("knn/start", np.eye(n, dtype=np.float32)[0])
    node.put("bad/indptr", np.array([0, 1, 2, 3, 4], np.int64))
    node.put("bad/indices", np.array([1, 2, 3, 9], np.int64))  # 9: no such vertex
    node.put("bad/values", np.ones(4, np.float32))
    doc = examples.knn(n, 2, graph="bad", sparse_nnz=4)
    with pytest.raises(
        KTaskError, match=r"kernel 'hop' \(csr_matvec\) failed: .*col_indices < ncols"
    ):
        node.run(doc)
    assert "knn/visited" not in node.store  # nothing half-written
    assert pins(node) == {"bad/indptr@1": 0, "bad/indices@1": 0, "bad/values@1": 0}
    node.put("bad/indices", np.array([1, 0, 1, 2], np.int64))  # row i lists edges j -> i
    node.run(doc)
    assert node.get("knn/visited").tolist() == [1, 1, 1, 0]


def test_constants_beyond_the_device_budget(tmp_path: Path) -> None:
    node = Node(tmp_path, constant_mb=16 * 1024 / MB)
    doc, _ = cgemm_client(node, 1)  # 2 x 16 KiB of weights, the device has 16 KiB
    with pytest.raises(KTaskError, match="does not fit on device 0: the constants in use there"):
        node.run(doc)
    assert pins(node) == {}  # Wr was admitted, never loaded: the failed call took it back


CUDA_SCALE = """
extern "C" __global__ void scale(const float* x, double a, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (float)(a * x[i]);
}
"""


def scale_doc() -> dict[str, Any]:
    return {
        "buffers": {
            "x": {"kind": "input", "key": "x", "dtype": "float32", "shape": [1000]},
            "y": {"kind": "output", "key": "y", "dtype": "float32", "shape": [1000]},
        },
        "kernels": [
            {"name": "s", "library": "cuda", "kernel": "scale", "source": CUDA_SCALE,
             "grid": 4, "block": 256, "arguments": ["x", 2.5, 1000], "outputs": ["y"]},
        ],
    }  # fmt: skip


def test_cuda_source_is_refused_on_a_cpu_device(node: Node) -> None:
    node.put("x", np.arange(1000, dtype=np.float32))
    with pytest.raises(KTaskError, match="is CUDA source, which runs only on a CUDA device; "):
        node.run(scale_doc())
    assert node.ex[0].kernels.compiles == 0 and "y" not in node.store


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_source_runs_on_a_cuda_device(tmp_path: Path) -> None:
    store = DataStore(tmp_path, 64 * MB)
    ex = KaasExecutor(0, "cuda:0", store, ConstantCache([64 * MB]))
    x = torch.arange(1000, dtype=torch.float32)
    store.put("x", to_bytes(x), spec_of(x))
    ex.run(parse(scale_doc()))
    ex.run(parse(scale_doc()))
    o, data = store.read("y")
    assert torch.equal(from_bytes(data, o.spec), x * 2.5) and ex.kernels.compiles == 1


# -- the data layer ---------------------------------------------------------------------------


def test_store_versions_lru_and_refusals(tmp_path: Path) -> None:
    s = DataStore(tmp_path, 100)
    spec = TensorSpec((10,), "float32")  # 40 bytes
    assert s.put("a", bytes(40), spec).version == 1
    assert s.put("a", bytes(40), spec).version == 2
    assert len(list(tmp_path.iterdir())) == 1  # the old version's file is gone
    s.put("b", bytes(40), spec)
    s.get("a")  # a is now more recent than b
    s.put("c", bytes(40), spec)
    assert "b" not in s and "a" in s and s.evictions == 1 and s.used == 80
    s.delete("a")
    assert s.put("a", bytes(40), spec).version == 3  # never reused: no stale device copy
    with pytest.raises(KTaskError, match="39 bytes do not make float32"):
        s.put("d", bytes(39), spec)
    with pytest.raises(KTaskError, match="more than the data layer holds"):
        s.put("d", bytes(400), TensorSpec((100,), "float32"))
    with pytest.raises(KTaskError, match="key 'zz' is not in the data layer"):
        s.read("zz")
    s.close()
    assert list(tmp_path.iterdir()) == []


# -- the pool/worker split: JSON calls, as across a process boundary ---------------------------


def over_the_wire(header: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(header))


def test_a_call_crosses_a_json_boundary_to_a_separate_worker(node: Node) -> None:
    doc, ref = cgemm_client(node, 1)
    worker = KaasWorker("cpu")  # as in a device's worker process: shares only files with the pool
    for expected_loads in (2, 2):
        call = prepare(parse(doc), 0, node.store, node.cache)
        reply = over_the_wire(worker.handle(over_the_wire(call.header)))
        result = finish(call, reply, node.store, node.cache)
        assert worker.loads == expected_loads  # the second call finds both constants resident
    assert (result.constant_hits, result.constant_misses) == (2, 0)
    y = node.get("c1/Y/re") + 1j * node.get("c1/Y/im")
    np.testing.assert_allclose(y, ref["y"], rtol=1e-4, atol=1e-3)
    assert sorted(reply["resident"]) == ["c1/W/im@1", "c1/W/re@1"]
    assert not [p for p in node.store.dir.iterdir() if ".staged" in p.name]


def test_a_worker_that_lost_its_constants_reloads_them(node: Node) -> None:
    doc, ref = cgemm_client(node, 1)
    node.run(doc)
    node.ex[0].worker = KaasWorker("cpu")  # a restarted worker: the pool's cache still says hit
    r = node.run(doc)
    assert r.constant_hits == 2 and node.ex[0].worker.loads == 2
    y = node.get("c1/Y/re") + 1j * node.get("c1/Y/im")
    np.testing.assert_allclose(y, ref["y"], rtol=1e-4, atol=1e-3)


def test_the_worker_drops_what_an_abandoned_call_evicted(tmp_path: Path) -> None:
    node = Node(tmp_path, constant_mb=64 * 1024 / MB)  # room for two clients' weights
    docs = [cgemm_client(node, c)[0] for c in range(3)]
    node.run(docs[0])
    node.run(docs[1])
    abandoned = prepare(parse(docs[2]), 0, node.store, node.cache)  # evicts client 0's weights
    abandon(abandoned, node.store, node.cache)  # never sent to the worker
    assert node.cache.resident(0) == ["c1/W/re@1", "c1/W/im@1"]
    assert "c0/W/re@1" in node.ex[0].resident_keys()
    node.run(docs[1])
    assert node.ex[0].resident_keys() == set(node.cache.resident(0))
    assert "c0/W/re@1" not in node.ex[0].resident_keys()


def test_a_failed_constant_load_is_forgotten_by_the_cache(node: Node) -> None:
    doc, _ = cgemm_client(node, 1)
    call = prepare(parse(doc), 0, node.store, node.cache)
    Path(call.header["inputs"]["Wr"]["file"]).unlink()  # the file vanished under the worker
    reply = node.ex[0].worker.handle(call.header)
    with pytest.raises(KTaskError, match="the data layer's file for an input is gone"):
        finish(call, reply, node.store, node.cache)
    assert node.cache.holders("c1/W/re", 1) == set()  # not resident: the next call loads it
    assert pins(node) == {}  # Wi was never loaded either (Wr failed first)


def test_a_worker_bug_is_not_a_request_error(node: Node) -> None:
    doc, _ = cgemm_client(node, 1)
    call = prepare(parse(doc), 0, node.store, node.cache)
    broken = {k: v for k, v in call.header.items() if k != "outputs"}
    reply = node.ex[0].worker.handle(broken)
    assert reply["error"] == "KeyError"
    with pytest.raises(WorkerError, match="KeyError"):
        finish(call, reply, node.store, node.cache)
    assert pins(node) == {"c1/W/re@1": 0, "c1/W/im@1": 0} and not node.store._pins


def test_pinned_keys_survive_eviction_and_replacement(tmp_path: Path) -> None:
    s = DataStore(tmp_path, 100)
    spec = TensorSpec((10,), "float32")  # 40 bytes
    a1 = s.put("a", bytes(40), spec)
    s.pin("a")  # a device is reading it
    s.put("b", bytes(40), spec)
    s.put("c", bytes(40), spec)  # over the bound: b goes, not the pinned a
    assert "a" in s and "b" not in s
    a2 = s.put("a", b"\1" * 40, spec)
    assert a1.path.exists() and a2.version == 2  # the reader's version stays until unpinned
    s.unpin("a")
    assert not a1.path.exists() and a2.path.read_bytes() == b"\1" * 40
