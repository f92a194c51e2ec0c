"""Sequences through the REST API with real action runtimes: each component its own
activation through the invoker's queue, results passed along, the first error ends it, the
sequence's own record, nesting, and the maximum length (stock semantics)."""

from __future__ import annotations

import asyncio

import pytest

from front.entities import annotation
from tests.integration.front.conftest import NS, activation, invoke, put_action

ADD = (
    "def main(a):\n"
    "    return {'n': a.get('n', 0) + a.get('step', 1), 'trail': a.get('trail', '') + 'a'}\n"
)
DOUBLE = "function main(p) { return {n: p.n * 2, trail: (p.trail || '') + 'd'}; }\n"
FAIL = "def main(a):\n    return {'error': 'no thanks', 'n': a.get('n')}\n"


async def sequence(p, name: str, components: list[str], **more) -> tuple[int, dict]:
    body = {"exec": {"kind": "sequence", "components": components}, **more}
    return await p.call("PUT", f"{NS}/actions/{name}?overwrite=true", json=body)


async def test_a_sequence_runs_its_components_in_order_and_records_them(live):
    await put_action(live, "add", ADD, parameters=[{"key": "step", "value": 3}])
    await put_action(live, "double", DOUBLE, kind="nodejs:default")
    status, seq = await sequence(live, "s", ["/_/add", "double", "/guest/add"])
    assert status == 200, seq
    assert seq["exec"] == {
        "kind": "sequence",
        "components": ["/guest/add", "/guest/double", "/guest/add"],
    }
    assert annotation(seq, "exec") == "sequence"

    status, rec = await invoke(live, "s", {"n": 1})
    assert status == 200, rec
    # (1 + 3) * 2 + 3: each component gets the previous result merged over its parameters
    assert rec["response"]["result"] == {"n": 11, "trail": "ada"}
    assert rec["response"]["success"] is True
    assert len(rec["logs"]) == 3
    assert annotation(rec, "topmost") is True and annotation(rec, "kind") == "sequence"
    assert annotation(rec, "path") == "guest/s" and annotation(rec, "causedBy") is None
    assert "cause" not in rec
    components = [await activation(live, aid) for aid in rec["logs"]]
    assert [c["name"] for c in components] == ["add", "double", "add"]
    for c in components:
        assert c["cause"] == rec["activationId"]
        assert annotation(c, "causedBy") == "sequence"
    assert rec["duration"] == sum(c["duration"] for c in components)
    stored = await activation(live, rec["activationId"])
    assert stored["logs"] == rec["logs"]
    status, got = await live.call("GET", f"{NS}/actions/s")
    assert status == 200 and got["exec"]["components"] == seq["exec"]["components"]


async def test_the_first_error_ends_the_sequence(live):
    await put_action(live, "add", ADD)
    await put_action(live, "fail", FAIL)
    await sequence(live, "broken", ["add", "fail", "add"])
    status, rec = await invoke(live, "broken", {"n": 1})
    assert status == 502
    assert rec["response"]["result"] == {"error": "no thanks"}
    assert rec["response"]["status"] == "application error"
    assert len(rec["logs"]) == 2  # the third component never ran
    status, listed = await live.call("GET", f"{NS}/activations?name=add&limit=50")
    assert len(listed) == 1


async def test_a_non_blocking_sequence_answers_at_once_and_is_recorded(live):
    await put_action(live, "add", ADD)
    await sequence(live, "s", ["add", "add"])
    status, body = await live.call("POST", f"{NS}/actions/s", json={"n": 5})
    assert status == 202
    rec = await activation(live, body["activationId"])
    assert rec["response"]["result"]["n"] == 7 and len(rec["logs"]) == 2


async def test_sequences_of_sequences(live):
    await put_action(live, "add", ADD)
    await put_action(live, "double", DOUBLE, kind="nodejs:default")
    await sequence(live, "inner", ["add", "double"])
    await sequence(live, "outer", ["inner", "add"])
    status, rec = await invoke(live, "outer", {"n": 0})
    assert status == 200, rec
    assert rec["response"]["result"] == {"n": 3, "trail": "ada"}
    inner = await activation(live, rec["logs"][0])
    assert inner["name"] == "inner" and inner["cause"] == rec["activationId"]
    assert annotation(inner, "topmost") is False
    assert annotation(inner, "causedBy") == "sequence"
    assert len(inner["logs"]) == 2
    for aid in inner["logs"]:
        assert (await activation(live, aid))["cause"] == inner["activationId"]


@pytest.mark.front_options(sequence_max_length=3)
async def test_the_maximum_length_counts_nested_sequences(live):
    await put_action(live, "add", ADD)
    status, body = await sequence(live, "long", ["add"] * 4)
    assert status == 400 and body["error"] == "Too many actions in the sequence."
    assert (await sequence(live, "two", ["add", "add"]))[0] == 200
    status, body = await sequence(live, "nested", ["two", "two"])
    assert status == 400 and body["error"] == "Too many actions in the sequence."
    # A component that grows after the sequence was made is caught while it runs.
    assert (await sequence(live, "three", ["two", "add"]))[0] == 200
    assert (await sequence(live, "two", ["add", "add", "add"]))[0] == 200
    status, rec = await invoke(live, "three", {"n": 0})
    assert status == 502
    assert rec["response"]["result"] == {"error": "Too many actions in the sequence."}


async def test_sequences_are_checked_when_made(live):
    await put_action(live, "add", ADD)
    status, body = await sequence(live, "s", [])
    assert status == 400 and body["error"] == "No component specified for the sequence."
    status, body = await sequence(live, "s", ["nope"])
    assert status == 400 and body["error"] == "Sequence component does not exist."
    await sequence(live, "s", ["add"])
    await sequence(live, "t", ["s", "add"])
    status, body = await sequence(live, "s", ["t"])
    assert status == 400 and body["error"] == "Sequence may not refer to itself."
    status, body = await sequence(live, "s", ["s"])
    assert status == 400 and body["error"] == "Sequence may not refer to itself."


async def test_a_component_deleted_later_fails_the_sequence(live):
    await put_action(live, "add", ADD)
    await put_action(live, "gone", ADD)
    await sequence(live, "s", ["add", "gone"])
    await live.call("DELETE", f"{NS}/actions/gone")
    await asyncio.sleep(2.1)  # the invoke path's document cache
    status, rec = await invoke(live, "s", {"n": 0})
    assert status == 502
    assert rec["response"]["result"] == {"error": "Sequence component does not exist."}
    assert len(rec["logs"]) == 1
