"""The ``kaas`` action's binding of an invocation to its graph, and inline values (pure)."""

from __future__ import annotations

import json
import struct

import pytest

from gpu.kaas import examples
from gpu.kaas.action import invocation, placeholders, validate
from gpu.kaas.spec import KTaskError, TensorSpec
from gpu.kaas.values import MAX_INLINE_BYTES, from_json, to_json


def knn_code(**iterations) -> str:
    """The kNN graph with its hop count open (``hops``)."""
    doc = examples.knn(4, 2)
    doc["iterations"] = {"param": "hops", **iterations}
    return json.dumps(doc)


def private(key: str) -> str:
    return f"{key}~1"


def test_open_literals_take_the_parameter_or_the_default():
    code = knn_code(default=2)
    assert validate(code).iterations == 2
    assert invocation(code, {}, namespace="t", private=private).task.iterations == 2
    assert invocation(code, {"hops": 5}, namespace="t", private=private).task.iterations == 5
    doc = examples.knn(4, 2)
    doc["kernels"][1]["arguments"] = ["reached", {"param": "low", "dtype": "float32"}, 1]
    inv = invocation(json.dumps(doc), {"low": 0.5}, namespace="t", private=private)
    clamp = next(k for k in inv.task.kernels if k.name == "reach")
    assert clamp.arguments[1].value == 0.5 and clamp.arguments[1].dtype == "float32"
    assert set(placeholders(doc)) == {"low"}


def test_an_open_literal_without_default_is_required_at_invoke_only():
    code = knn_code()
    assert validate(code).iterations == 1  # a stand-in at create
    with pytest.raises(KTaskError, match="needs the invocation parameter 'hops'"):
        invocation(code, {}, namespace="t", private=private)
    with pytest.raises(KTaskError, match="'iterations': an integer from 1 to"):
        invocation(code, {"hops": True}, namespace="t", private=private)


def test_keys_inline_inputs_and_fetch():
    inv = invocation(
        knn_code(default=2),
        {"keys": {"A": "g/mine"}, "inputs": {"x0": [1, 0, 0, 0]}, "fetch": True, "wait_s": 3},
        namespace="t",
        private=private,
    )
    assert inv.task.buffers["A"].key == "t/g/mine"  # stored under the caller's namespace
    assert inv.task.buffers["x0"].key == "t/knn/start~1"
    assert inv.inline == (
        ("t/knn/start~1", TensorSpec((4,), "float32"), struct.pack("=4f", 1, 0, 0, 0)),
    )
    assert inv.fetch == ("visited",) and inv.wait_s == 3.0
    assert invocation(knn_code(default=2), {}, namespace="t", private=private).fetch == ()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"key": {}}, "unknown parameter 'key' (did you mean 'keys'?)"),
        ({"keys": []}, "keys must be an object keyed by buffer name"),
        ({"keys": {"A": 3}}, "the key of buffer 'A' must be a string"),
        ({"keys": {"nope": "k"}}, "nope"),
        ({"inputs": {"A": [[0] * 4] * 3}}, "inputs.A: expected a list of 4 items, got 3 items"),
        ({"inputs": {"visited": [0] * 4}}, "'visited' is not an input buffer"),
        ({"fetch": ["x0"]}, "fetch: 'x0' is not an output of the kTask"),
        ({"fetch": "visited"}, "fetch must be true or a list"),
        ({"wait_s": 61}, "wait_s must be a number of seconds from 0 to 60"),
    ],
)
def test_bad_parameters_are_the_developers_errors(params, message):
    with pytest.raises(KTaskError) as e:
        invocation(knn_code(default=2), params, namespace="t", private=private)
    assert message in str(e.value)


def test_every_key_is_stored_under_the_callers_namespace():
    """Inputs, constants, outputs and inline keys, the graph's and the invocation's: a tenant
    can name no key outside its part of the data layer (issue 30)."""
    code = knn_code(default=2)
    for ns, root in (("alice", "alice/"), ("bob/pkg", "bob/")):
        inv = invocation(code, {"inputs": {"x0": [1, 0, 0, 0]}}, namespace=ns, private=private)
        keys = {b.name: b.key for b in inv.task.buffers.values() if b.key is not None}
        assert keys == {"A": f"{root}graph/A", "x0": f"{root}knn/start~1",
                        "visited": f"{root}knn/visited"}  # fmt: skip
        assert [k for k, _, _ in inv.inline] == [f"{root}knn/start~1"]
        assert inv.shown(keys["A"]) == "graph/A"
        reply = {"outputs": {"visited": {"key": keys["visited"], "version": 3}}, "device": 0}
        assert inv.reply(reply)["outputs"] == {"visited": {"key": "knn/visited", "version": 3}}
        text = f"input 'A' reads key {keys['A']!r}, which is not in the data layer"
        assert inv.message(text) == "input 'A' reads key 'graph/A', which is not in the data layer"
    with pytest.raises(ValueError, match="runs for a namespace"):
        invocation(code, {}, namespace="", private=private)


@pytest.mark.parametrize("key", ["/alice/graph/A", "../alice/graph/A", "g/../../alice/x", ".."])
def test_a_key_that_tries_to_leave_the_namespace_is_refused(key):
    with pytest.raises(KTaskError, match=r"starts with '/' or holds a '\.\.' segment"):
        invocation(knn_code(default=2), {"keys": {"A": key}}, namespace="bob", private=private)
    doc = examples.knn(4, 2)
    doc["buffers"]["visited"]["key"] = key  # the graph's own key: the same rule
    with pytest.raises(KTaskError, match=r"buffer 'visited': key .* '\.\.' segment"):
        invocation(json.dumps(doc), {}, namespace="bob", private=private)


def test_the_code_must_be_a_ktask_document():
    with pytest.raises(KTaskError, match="must be a kTask JSON document"):
        validate("def main(): pass")
    with pytest.raises(KTaskError, match="must be a JSON object, got list"):
        validate("[1, 2]")
    with pytest.raises(KTaskError, match="'param' must name an invocation parameter other than"):
        validate(json.dumps({**examples.knn(4, 2), "iterations": {"param": "keys"}}))


@pytest.mark.parametrize(
    ("value", "spec", "packed"),
    [
        ([[1, 2], [3, 4]], TensorSpec((2, 2), "int32"), struct.pack("=4i", 1, 2, 3, 4)),
        ([True, False], TensorSpec((2,), "bool"), b"\x01\x00"),
        (1.5, TensorSpec((), "float64"), struct.pack("=d", 1.5)),
        ([[1, -2]], TensorSpec((1,), "complex64"), struct.pack("=2f", 1, -2)),
        ([3], TensorSpec((1,), "complex128"), struct.pack("=2d", 3, 0)),
        ([1.0, -2.0], TensorSpec((2,), "bfloat16"), b"\x80\x3f\x00\xc0"),
        ([0.5], TensorSpec((1,), "float16"), struct.pack("=e", 0.5)),
    ],
)
def test_inline_values_round_trip(value, spec, packed):
    assert from_json(value, spec) == packed
    back = to_json(packed, spec)
    assert back == (value if spec.dtype != "complex128" else [[3.0, 0.0]])


@pytest.mark.parametrize(
    ("value", "spec", "message"),
    [
        ([256], TensorSpec((1,), "uint8"), "256 does not fit uint8"),
        ([1.5], TensorSpec((1,), "int32"), "is not an integer"),
        ([True], TensorSpec((1,), "float32"), "is a boolean"),
        ([float("nan")], TensorSpec((1,), "float32"), "not a finite number"),
        ([1], TensorSpec((1,), "bool"), "is not a boolean"),
        ([1e6], TensorSpec((1,), "float16"), "does not fit float16"),
        ([0] * 3, TensorSpec((2,), "float32"), "expected a list of 2 items, got 3 items"),
    ],
)
def test_inline_values_are_checked(value, spec, message):
    with pytest.raises(KTaskError) as e:
        from_json(value, spec)
    assert message in str(e.value)


def test_large_values_belong_in_the_data_layer():
    with pytest.raises(KTaskError, match=r"inline values are at most 1\.0 MiB"):
        from_json(0, TensorSpec((MAX_INLINE_BYTES // 4 + 1,), "float32"))
