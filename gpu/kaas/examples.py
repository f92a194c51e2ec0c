"""The paper's worked kTasks as request documents: N nearest neighbours and complex GEMM.

Builders, not fixtures: the tests run them end to end, and the experiment of issue 30 (not
built yet) will send them as clients' requests. Each returns the decoded JSON of a kTask.
"""

from __future__ import annotations

from typing import Any


def knn(
    n: int,
    hops: int,
    *,
    graph: str = "graph/A",
    start: str = "knn/start",
    visited: str = "knn/visited",
    sparse_nnz: int | None = None,
) -> dict[str, Any]:
    """Vertices within ``hops`` of the start set: V accumulates each hop's new frontier.

    Per iteration (the paper's Algorithm 1, with 0/1 vectors): R = A·X, clamped to 0/1; the
    new vertices are R - V clamped to 0/1, which become the frontier X and are added to V.
    ``A`` is dense ``float32[n, n]`` with ``A[i, j] = 1`` for an edge j → i, or, with
    ``sparse_nnz``, CSR (``graph/indptr``, ``graph/indices``, ``graph/values`` under ``graph``):
    either way a constant the executor keeps on the device across requests.
    """
    vec = {"dtype": "float32", "shape": [n]}
    buffers: dict[str, Any] = {
        "x0": {"kind": "input", "key": start, **vec},
        "frontier": {"kind": "temporary", "init": "x0", **vec},
        "reached": {"kind": "temporary", **vec},
        "visited": {"kind": "output", "key": visited, "init": "x0", **vec},
    }
    if sparse_nnz is None:
        buffers["A"] = {
            "kind": "input", "key": graph, "const": True, "dtype": "float32", "shape": [n, n],
        }  # fmt: skip
        hop = {"name": "hop", "kernel": "matmul", "arguments": ["A", "frontier"]}
    else:
        for name, dtype, size in (
            ("indptr", "int64", n + 1),
            ("indices", "int64", sparse_nnz),
            ("values", "float32", sparse_nnz),
        ):
            buffers[name] = {
                "kind": "input", "key": f"{graph}/{name}", "const": True, "dtype": dtype,
                "shape": [size],
            }  # fmt: skip
        hop = {
            "name": "hop",
            "kernel": "csr_matvec",
            "arguments": ["indptr", "indices", "values", "frontier"],
        }
    return {
        "name": "knn",
        "iterations": hops,
        "buffers": buffers,
        "kernels": [
            {**hop, "library": "builtin", "outputs": ["reached"]},
            {"name": "reach", "kernel": "clamp", "arguments": ["reached", 0, 1],
             "outputs": ["reached"], "after": ["hop"]},
            {"name": "fresh", "kernel": "sub", "arguments": ["reached", "visited"],
             "outputs": ["reached"], "after": ["reach"]},
            {"name": "next", "kernel": "clamp", "arguments": ["reached", 0, 1],
             "outputs": ["frontier"], "after": ["fresh"]},
            {"name": "accumulate", "kernel": "add", "arguments": ["visited", "frontier"],
             "outputs": ["visited"], "after": ["next"]},
        ],
    }  # fmt: skip


def cgemm(
    m: int, k: int, n: int, *, weights: str = "cgemm/W", x: str = "cgemm/X", y: str = "cgemm/Y"
) -> dict[str, Any]:
    """Y = X · W in complex arithmetic on real/imaginary pairs; W (k x n) is the constant.

    The paper's cGEMM replicas each have their own W: the working set that outgrows device
    memory as clients are added.
    """

    def mat(rows: int, cols: int, **kw: Any) -> dict[str, Any]:
        return {"dtype": "float32", "shape": [rows, cols], **kw}

    return {
        "name": "cgemm",
        "buffers": {
            "Xr": mat(m, k, kind="input", key=f"{x}/re"),
            "Xi": mat(m, k, kind="input", key=f"{x}/im"),
            "Wr": mat(k, n, kind="input", key=f"{weights}/re", const=True),
            "Wi": mat(k, n, kind="input", key=f"{weights}/im", const=True),
            "Yr": mat(m, n, kind="output", key=f"{y}/re"),
            "Yi": mat(m, n, kind="output", key=f"{y}/im"),
        },
        "kernels": [
            {
                "name": "gemm",
                "kernel": "cgemm",
                "arguments": ["Xr", "Xi", "Wr", "Wi"],
                "outputs": ["Yr", "Yi"],
            }
        ],
    }


def cgemm_complex64(
    m: int, k: int, n: int, *, weights: str = "cgemm/W", x: str = "cgemm/X", y: str = "cgemm/Y"
) -> dict[str, Any]:
    """The same product on ``complex64`` buffers with the ``matmul`` built-in."""

    def mat(rows: int, cols: int, **kw: Any) -> dict[str, Any]:
        return {"dtype": "complex64", "shape": [rows, cols], **kw}

    return {
        "name": "cgemm-complex64",
        "buffers": {
            "X": mat(m, k, kind="input", key=x),
            "W": mat(k, n, kind="input", key=weights, const=True),
            "Y": mat(m, n, kind="output", key=y),
        },
        "kernels": [
            {"name": "gemm", "kernel": "matmul", "arguments": ["X", "W"], "outputs": ["Y"]}
        ],
    }
