"""The kTask request format: what parses, the execution order, and each developer error (pure)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu.kaas import examples
from gpu.kaas.format import MAX_KERNELS, Kind, Literal, parse, to_doc
from gpu.kaas.spec import KTaskError, TensorSpec

ROOT = Path(__file__).resolve().parents[4]


def knn(n: int = 8, hops: int = 2, **kw: Any) -> dict[str, Any]:
    return examples.knn(n, hops, **kw)


def refused(doc: Any, pattern: str, **kw: Any) -> str:
    with pytest.raises(KTaskError) as e:
        parse(doc, **kw)
    assert re.search(pattern, str(e.value)), str(e.value)
    return str(e.value)


def test_knn_parses_with_its_buffers_kinds_and_order() -> None:
    t = parse(knn(8, 3))
    assert t.name == "knn" and t.iterations == 3
    assert [k.name for k in t.kernels] == ["hop", "reach", "fresh", "next", "accumulate"]
    assert [b.name for b in t.constants] == ["A"]
    assert t.buffers["A"].spec == TensorSpec((8, 8), "float32")
    assert t.buffers["visited"].kind is Kind.OUTPUT and t.buffers["visited"].init == "x0"
    assert t.buffers["frontier"].key is None
    assert t.kernels[1].arguments == ("reached", Literal(0), Literal(1))
    assert t.nbytes == 8 * 8 * 4 + 4 * 8 * 4
    assert not t.needs_cuda


def test_order_follows_dependencies_not_the_list() -> None:
    doc = examples.cgemm(2, 3, 4)
    doc["buffers"]["Zr"] = {"kind": "output", "key": "z", "dtype": "float32", "shape": [2, 4]}
    first = {"name": "scale", "kernel": "mul", "arguments": ["Yr", 2.0], "outputs": ["Zr"]}
    doc["kernels"].insert(0, {**first, "after": ["gemm"]})
    assert [k.name for k in parse(doc).kernels] == ["gemm", "scale"]


@pytest.mark.parametrize(
    "doc",
    [knn(), knn(sparse_nnz=12), examples.cgemm(2, 3, 4), examples.cgemm_complex64(2, 3, 4)],
    ids=["knn", "csr", "cgemm", "complex64"],
)
def test_to_doc_round_trips(doc: dict[str, Any]) -> None:
    t = parse(doc, keys={"Xr": "elsewhere"} if "Xr" in doc["buffers"] else None)
    again = parse(json.loads(json.dumps(to_doc(t))))
    assert again == t and [k.name for k in again.kernels] == [k.name for k in t.kernels]


def test_invocation_keys_override_and_are_checked() -> None:
    t = parse(knn(), keys={"x0": "clients/7/start", "visited": "clients/7/out"})
    assert t.buffers["x0"].key == "clients/7/start"
    assert t.buffers["visited"].key == "clients/7/out"
    refused(knn(), r"'nope', which is not a buffer", keys={"nope": "k"})
    refused(knn(), r"temporary 'frontier', which has none", keys={"frontier": "k"})


def test_cycle_is_named() -> None:
    doc = knn()
    doc["kernels"][0]["after"] = ["accumulate"]
    msg = refused(doc, r"cycle")
    assert "hop -> reach -> fresh -> next -> accumulate -> hop" in msg


def test_self_and_unknown_dependencies() -> None:
    doc = knn()
    doc["kernels"][0]["after"] = ["hop"]
    refused(doc, r"'hop' runs after itself")
    doc["kernels"][0]["after"] = ["acumulate"]
    refused(doc, r"runs after 'acumulate', which is no kernel \(did you mean 'accumulate'\?\)")


def test_unknown_kernel_suggests_and_lists_builtins() -> None:
    doc = knn()
    doc["kernels"][0]["kernel"] = "matmull"
    msg = refused(doc, r"unknown built-in kernel 'matmull' \(did you mean 'matmul'\?\)")
    assert "csr_matvec" in msg and "cgemm" in msg


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        # shape mismatch between a kernel's result and its output buffer
        (lambda d: d["buffers"]["reached"].update(shape=[9]), r"shape mismatch"),
        # dtype mismatch between a kernel's result and its output buffer
        (
            lambda d: d["buffers"]["reached"].update(dtype="float64"),
            r"produces float32\[8\] but output buffer 'reached' is float64\[8\] \(dtype mismatch",
        ),
        # operands of an element-wise kernel that differ
        (lambda d: d["kernels"][2].update(arguments=["reached", "A"]), r"operands must match"),
        (lambda d: d["buffers"]["visited"].update(dtype="float64"), r"cannot start as input"),
        # size in bytes that contradicts shape and dtype
        (lambda d: d["buffers"]["A"].update(size=100), r"size 100 bytes does not match.*256"),
        # the matrix's inner dimension against the vector
        (lambda d: d["buffers"]["A"].update(shape=[8, 7]), r"inner dimensions differ"),
        # missing data-layer key on an input
        (lambda d: d["buffers"]["x0"].pop("key"), r"'x0': an input needs a data-layer 'key'"),
        # missing required field
        (lambda d: d["buffers"]["x0"].pop("dtype"), r"lacks the required field 'dtype'"),
        (lambda d: d.pop("kernels"), r"lacks the required field 'kernels'"),
        # typo in a field name
        (lambda d: d["buffers"]["A"].update(cosnt=True), r"unknown field 'cosnt'.*'const'"),
        (lambda d: d["buffers"]["A"].update(dtype="float23"), r"unknown dtype 'float23'"),
        (lambda d: d["buffers"]["A"].update(kind="constant"), r"kind 'constant' is not one"),
        (lambda d: d["buffers"]["A"].update(shape=[8, -1]), r"non-negative integers"),
        (lambda d: d["kernels"][0]["arguments"].append("B"), r"buffer 'B', which the kTask"),
        (lambda d: d["kernels"][0].update(outputs=["x0"]), r"writes input buffer 'x0'"),
        (lambda d: d["kernels"][0].update(grid=[1]), r"'grid' applies to CUDA kernels only"),
        (lambda d: d["kernels"][1].update(arguments=["reached", 1, 0]), r"lower bound 1"),
        (lambda d: d["kernels"][1].update(arguments=["reached", "x0", 1]), r"must be a literal"),
        (lambda d: d["kernels"][1].update(arguments=["reached", [0], 1]), r"neither a buffer"),
        (lambda d: d["kernels"][2].update(arguments=["reached"]), r"takes 2 arguments, got 1"),
        (lambda d: d["kernels"][3].update(outputs=[]), r"writes 1 output\(s\), the kernel lists 0"),
        (lambda d: d["kernels"][4].update(name="hop"), r"two kernels are named 'hop'"),
        (lambda d: d["kernels"][4].update(library="cublas"), r"library 'cublas' is not"),
        (lambda d: d["buffers"]["frontier"].update(key="k"), r"a temporary has no 'key'"),
        (lambda d: d["buffers"]["visited"].update(const=True), r"apply to inputs only"),
        (lambda d: d["buffers"]["visited"].update(init="reached"), r"not an input buffer"),
        (lambda d: d["buffers"]["x0"].update(init="A"), r"'init' applies to temporaries"),
        (lambda d: d.update(iterations=0), r"'iterations' must be an integer"),
        (lambda d: d.update(version=2), r"format version 2 is not supported"),
        (lambda d: d.update(kernels=[]), r"non-empty list"),
    ],
)
def test_bad_requests_get_a_developer_error(change: Any, pattern: str) -> None:
    doc = knn()
    change(doc)
    refused(doc, pattern)


def test_output_never_written_and_shared_output_keys() -> None:
    doc = knn()
    doc["buffers"]["spare"] = {"kind": "output", "key": "s", "dtype": "float32", "shape": [1]}
    refused(doc, r"output 'spare' is never written")
    doc = knn()
    doc["buffers"]["visited"]["key"] = "same"
    doc["buffers"]["again"] = {"kind": "output", "key": "same", "dtype": "float32", "shape": [8]}
    doc["kernels"].append({"name": "c", "kernel": "copy", "arguments": ["visited"],
                           "outputs": ["again"], "after": ["accumulate"]})  # fmt: skip
    refused(doc, r"both write key 'same'")


def test_constant_overwritten_by_an_output_is_refused() -> None:
    doc = knn()
    doc["buffers"]["visited"]["key"] = "graph/A"
    refused(doc, r"constant input 'A' reads key 'graph/A', which output 'visited' overwrites")


def test_unordered_writers_of_one_buffer_are_a_race() -> None:
    doc = knn()
    doc["kernels"][4]["after"] = []  # accumulate reads frontier, which 'next' writes
    msg = refused(doc, r"kernels 'next' and 'accumulate' both use buffer 'frontier' and one")
    assert "add 'next' to the 'after' of 'accumulate' (or the reverse)" in msg
    doc["kernels"][4]["after"] = ["next"]
    doc["kernels"][3]["after"] = ["reach"]  # next reads reached, which fresh writes
    refused(doc, r"kernels 'fresh' and 'next' both use buffer 'reached'")
    doc["kernels"][3]["after"] = ["fresh"]
    doc["kernels"][1]["after"] = []  # reach writes reached, which hop writes too
    refused(doc, r"kernels 'hop' and 'reach' both use buffer 'reached'")


def test_race_check_and_order_scale_to_the_kernel_limit() -> None:
    """A hostile request at the limit is checked in well under a second (linear checks)."""
    one = {"kind": "output", "key": "o", "dtype": "float32", "shape": [1]}
    chain = [{"name": f"k{i}", "kernel": "add", "arguments": ["o", 1], "outputs": ["o"],
              "after": [f"k{i - 1}"] if i else []} for i in range(MAX_KERNELS)]  # fmt: skip
    t = parse({"buffers": {"o": one}, "kernels": chain[::-1]})
    assert [k.name for k in t.kernels] == [f"k{i}" for i in range(MAX_KERNELS)]
    free = [{**k, "after": []} for k in chain]
    refused({"buffers": {"o": one}, "kernels": free}, r"kernels 'k0' and 'k1' both use")


def test_buffers_beyond_device_memory() -> None:
    t = parse(knn(64, 1))
    assert parse(knn(64, 1), device_memory=t.nbytes).nbytes == t.nbytes
    refused(knn(64, 1), r"need 0.0 MiB together but a device has", device_memory=t.nbytes - 1)
    refused(examples.cgemm(4096, 4096, 4096), r"need 384.0 MiB .* has 256.0 MiB",
            device_memory=256 << 20)  # fmt: skip


def test_not_json_objects() -> None:
    refused([], r"the kTask must be a JSON object, got list")
    refused({"buffers": [], "kernels": []}, r"'buffers' must be an object")
    refused({**knn(), "kernels": ["hop"]}, r"kernel 1 must be a JSON object, got str")


def test_typed_literals_and_reductions() -> None:
    doc: dict[str, Any] = {
        "buffers": {
            "m": {"kind": "input", "key": "m", "dtype": "float64", "shape": [3, 5]},
            "cols": {"kind": "output", "key": "c", "dtype": "float64", "shape": [3]},
            "all": {"kind": "output", "key": "a", "dtype": "float64", "shape": []},
        },
        "kernels": [
            {"name": "rows", "kernel": "max", "arguments": ["m", 1], "outputs": ["cols"]},
            {"name": "total", "kernel": "sum", "arguments": ["m"], "outputs": ["all"]},
        ],
    }
    t = parse(doc)
    assert t.buffers["all"].spec.nbytes == 8
    doc["kernels"][0]["arguments"] = ["m", 2]
    refused(copy.deepcopy(doc), r"dimension 2 is out of range")
    doc["kernels"][0]["arguments"] = ["m", {"literal": 1.5, "dtype": "float32"}]
    refused(doc, r"must be int")
    refused(knn(), r"keys must map buffer names", keys=["x0"])
    ints = {"kind": "input", "key": "i", "dtype": "int64", "shape": [3]}
    div = {"name": "d", "kernel": "div", "arguments": ["i", 2], "outputs": ["o"]}
    doc = {"buffers": {"i": ints, "o": {**ints, "kind": "output"}}, "kernels": [div]}
    refused(doc, r"div\(a, b \| literal\) -> out: argument 1 is int64\[3\], needs a float or")


CUDA_DOC: dict[str, Any] = {
    "buffers": {
        "x": {"kind": "input", "key": "x", "dtype": "float32", "shape": [256]},
        "y": {"kind": "output", "key": "y", "dtype": "float32", "shape": [256], "init": "x"},
    },
    "kernels": [
        {"name": "s", "library": "cuda", "kernel": "scale",
         "source": 'extern "C" __global__ void scale(float* x, double a, int n) { }',
         "grid": 1, "block": [256], "arguments": [2.0, 256], "outputs": ["y"]},
    ],
}  # fmt: skip


def test_cuda_kernels_need_source_and_launch_dims() -> None:
    doc = copy.deepcopy(CUDA_DOC)
    t = parse(doc)
    assert t.needs_cuda and t.kernels[0].grid == (1, 1, 1) and t.kernels[0].block == (256, 1, 1)
    bad = copy.deepcopy(doc)
    bad["kernels"][0]["kernel"] = "shift"
    refused(bad, r"the source defines no function 'shift'")
    bad = copy.deepcopy(doc)
    del bad["kernels"][0]["block"]
    refused(bad, r"needs its launch 'block'")
    bad = copy.deepcopy(doc)
    bad["kernels"][0]["grid"] = [1, 0]
    refused(bad, r"'grid' dimensions must be positive")
    bad = copy.deepcopy(doc)
    bad["kernels"][0]["arguments"] = [{"literal": 2.0, "dtype": "float32"}, 256]
    refused(bad, r"C int \(JSON integers\) or double")


def test_the_documented_example_parses() -> None:
    """docs/gpu.md's complete kTask example is valid: the docs cannot drift from the parser."""
    text = (ROOT / "docs" / "gpu.md").read_text()
    block = re.search(r"<!-- ktask-example -->\s*```json\n(.*?)```", text, re.S)
    assert block is not None, "docs/gpu.md lost its marked kTask example"
    t = parse(json.loads(block.group(1)))
    assert t.name == "knn" and [b.name for b in t.constants] == ["A"]


def test_typed_literal_values_must_fit_their_dtype() -> None:
    doc = knn()
    doc["kernels"][1]["arguments"] = ["reached", {"literal": 0.5, "dtype": "int32"}, 1]
    refused(doc, r"literal 0.5 is not a int32 value")
    doc["kernels"][1]["arguments"] = ["reached", {"literal": True, "dtype": "float32"}, 1]
    refused(doc, r"literal True is not a float32 value")
    doc["kernels"][1]["arguments"] = ["reached", {"literal": 0, "dtype": "float32"}, 1]
    assert parse(doc).kernels[1].arguments[1] == Literal(0, "float32")


# -- hostile documents: a KTask or a KTaskError, never another exception ----------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(["A", "x0", "frontier", "visited", "hop", "matmul", "cuda", "input"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = sorted(
    {"name", "buffers", "kernels", "iterations", "version", "kind", "dtype", "shape", "size"}
    | {"key", "const", "init", "library", "kernel", "arguments", "outputs", "after", "source"}
    | {"grid", "block", "shared_mem", "literal"}
)


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document where a value sits."""
    found = [prefix]
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for k, v in items:
        found += paths(v, (*prefix, k))
    return found


def mutate(doc: Any, data: st.DataObject) -> Any:
    places = paths(doc)[1:]
    if not places:  # everything deleted already
        return doc
    where = data.draw(st.sampled_from(places))
    parent = doc
    for k in where[:-1]:
        parent = parent[k]
    how = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if how == "replace":
        parent[where[-1]] = data.draw(json_values)
    elif how == "delete":
        del parent[where[-1]]
    elif isinstance(parent, dict):
        parent[data.draw(st.sampled_from(FIELDS))] = data.draw(json_values)
    else:
        parent.append(data.draw(json_values))
    return doc


@settings(max_examples=400, deadline=None)
@given(data=st.data(), which=st.sampled_from(["knn", "csr", "cgemm", "cuda"]))
def test_mutated_documents_are_parsed_or_refused(data: st.DataObject, which: str) -> None:
    doc = {
        "knn": lambda: knn(),
        "csr": lambda: knn(sparse_nnz=12),
        "cgemm": lambda: examples.cgemm(2, 3, 4),
        "cuda": lambda: json.loads(json.dumps(CUDA_DOC)),
    }[which]()
    for _ in range(data.draw(st.integers(1, 3))):
        doc = mutate(doc, data)
    try:
        task = parse(doc, device_memory=data.draw(st.sampled_from([None, 1 << 10, 1 << 30])))
    except KTaskError as e:
        assert str(e)
    else:
        assert task.kernels and task.buffers
        assert parse(json.loads(json.dumps(to_doc(task)))) == task  # what a worker receives
