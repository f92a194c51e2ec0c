"""The paper's two kTasks with their data and numpy answers, shared by the tests that run
them through the live pool, the embedded front and Kafka."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from gpu.kaas import examples

N = 32  # graph vertices
HOPS = 3
M, K, P = 8, 16, 4  # cGEMM: X is M x K, W is K x P


def knn_action(n: int = N) -> str:
    """The kNN graph as a ``kaas`` action's code, its hop count an open literal (``hops``)."""
    doc = examples.knn(n, HOPS)
    doc["iterations"] = {"param": "hops", "default": HOPS}
    return json.dumps(doc)


def graph(n: int = N, seed: int = 1) -> np.ndarray:
    """A random directed graph, ``A[i, j] = 1`` for an edge j -> i."""
    rng = np.random.default_rng(seed)
    a = (rng.random((n, n)) < 2.0 / n).astype(np.float32)
    np.fill_diagonal(a, 0)
    return a


def start(n: int = N, vertices: tuple[int, ...] = (0,)) -> np.ndarray:
    x = np.zeros(n, dtype=np.float32)
    x[list(vertices)] = 1
    return x


def knn_expected(a: np.ndarray, x0: np.ndarray, hops: int) -> np.ndarray:
    """Vertices within ``hops`` of the start set, by breadth-first search in numpy."""
    visited = x0.astype(bool)
    frontier = visited.copy()
    for _ in range(hops):
        frontier = (a @ frontier.astype(np.float32) > 0) & ~visited
        visited |= frontier
    return visited.astype(np.float32)


def cgemm_action() -> str:
    return json.dumps(examples.cgemm(M, K, P))


def cgemm_data(seed: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        part: rng.standard_normal(shape).astype(np.float32)
        for part, shape in (("Xr", (M, K)), ("Xi", (M, K)), ("Wr", (K, P)), ("Wi", (K, P)))
    }


def cgemm_expected(d: dict[str, np.ndarray]) -> np.ndarray:
    x = d["Xr"].astype(np.float64) + 1j * d["Xi"]
    w = d["Wr"].astype(np.float64) + 1j * d["Wi"]
    return x @ w


CGEMM_KEYS = {"Xr": "cgemm/X/re", "Xi": "cgemm/X/im", "Wr": "cgemm/W/re", "Wi": "cgemm/W/im"}


def as_array(meta: dict[str, Any], data: bytes) -> np.ndarray:
    """A ``get`` reply as numpy."""
    return np.frombuffer(data, dtype=meta["dtype"]).reshape(meta["shape"])
