"""What the shared JSON codec (whisk/protocol/json.py) reads and writes, exactly (the mutation
run, tests/mutation/run.py, uses it)."""

from __future__ import annotations

import json

import pytest

from whisk.protocol.json import MAX_DEPTH, JSONDecodeError, _dumps_flat, dumps, dumps_str, loads


def test_loads_is_strict_json():
    assert loads(b'{"a": [1, 2.5, "\xc3\xa9", null, true]}') == {"a": [1, 2.5, "é", None, True]}
    assert loads('"x"') == "x"
    for bad in (b"NaN", b"[1,]", b"{'a': 1}", b"1e400", b"[" * (MAX_DEPTH + 1)):
        with pytest.raises(JSONDecodeError):
            loads(bad)


def test_dumps_is_compact_and_keeps_non_ascii():
    assert dumps({"a": [1, "é"], "b": None}) == '{"a":[1,"é"],"b":null}'.encode()
    assert dumps_str([True, 1.5]) == "[true,1.5]"


def test_values_orjson_refuses_are_written_by_the_flat_encoder():
    big = 2**70  # beyond 64 bits
    assert dumps({"n": big, "t": (1, 2)}) == b'{"n":1180591620717411303424,"t":[1,2]}'
    deep: object = "x"
    for _ in range(600):  # deeper than orjson writes, within what it parses
        deep = [deep]
    assert dumps(deep) == b"[" * 600 + b'"x"' + b"]" * 600
    assert loads(dumps(deep)) == deep


def test_the_flat_encoder_writes_what_the_stdlib_writes():
    value = {"a": [1, {"b": []}, {}], "c": ("d", None, False, 2.5), "é": "ü"}
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert _dumps_flat(value) == expected
    assert _dumps_flat([]) == b"[]" and _dumps_flat({}) == b"{}" and _dumps_flat(3) == b"3"


def test_the_flat_encoder_writes_non_string_keys_as_the_stdlib_does():
    value = {3: "i", 2.5: "f", True: "t", None: "n"}
    expected = json.dumps(value, separators=(",", ":")).encode()
    assert _dumps_flat(value) == expected == b'{"3":"i","2.5":"f","true":"t","null":"n"}'


def test_what_no_encoder_can_write_is_a_type_error():
    with pytest.raises(TypeError) as e:
        _dumps_flat({"a": {1, 2}})
    assert str(e.value) == "set is not JSON serializable"
    with pytest.raises(TypeError) as e:
        _dumps_flat({(1, 2): "tuple key"})
    assert str(e.value) == "keys must be str, int, float, bool or None, not tuple"
    with pytest.raises(TypeError):
        dumps(object())
