"""What the shared JSON codec writes and what the namespace limits decide, exactly: the
fuzzers (test_fuzz_protocol.py) check that nothing unexpected is raised, these check the
answers (the mutation run, tests/mutation/run.py, uses them)."""

from __future__ import annotations

import json

import pytest

from whisk.protocol.actions import Action, ActionLimits
from whisk.protocol.json import MAX_DEPTH, JSONDecodeError, _dumps_flat, dumps, dumps_str, loads
from whisk.protocol.limits import (
    SYSTEM_PAYLOAD_MAX,
    check_user_limits,
    parse_byte_size,
    payload_limit,
)


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


@pytest.mark.parametrize(
    ("value", "size"),
    [
        (0, 0),
        (1024, 1024),
        ("1 MB", 1024**2),
        ("2147483648 B", 2**31),
        ("512KB", 512 * 1024),
        ("3k", 3 * 1024),
        ("2 g", 2 * 1024**3),
        ("1GB", 1024**3),
        ("7 m", 7 * 1024**2),
        (" 5 B ", 5),
        (" " + "9" * 30 + " GB ", int("9" * 30) * 1024**3),  # 35 characters, the longest
    ],
)
def test_byte_sizes_as_openwhisk_writes_them(value, size):
    assert parse_byte_size(value) == size


NOT_SIZES = [-1, True, None, 1.5, "", "MB", "1 TB", "1  MB", "-1 MB", "1" * 31 + " B"]


@pytest.mark.parametrize("value", [*NOT_SIZES, "1 MB" * 11, " " + "9" * 30 + " GB  "])
def test_what_is_not_a_byte_size_is_none(value):
    assert parse_byte_size(value) is None


def test_the_payload_limit_is_the_users_capped_by_the_systems():
    assert SYSTEM_PAYLOAD_MAX == 1024 * 1024
    assert payload_limit({}) == SYSTEM_PAYLOAD_MAX
    assert payload_limit({"maxPayloadSize": "512 KB"}) == 512 * 1024
    assert payload_limit({"maxPayloadSize": "2 MB"}) == SYSTEM_PAYLOAD_MAX
    assert payload_limit({"maxPayloadSize": 0}) == SYSTEM_PAYLOAD_MAX  # unset
    assert payload_limit({"maxPayloadSize": "junk"}) == SYSTEM_PAYLOAD_MAX


def _action(**limits: int) -> Action:
    return Action("guest/a", "1-x", "guest", "a", "0.0.1", "python:3.11", ActionLimits(**limits))


def test_limits_within_the_namespace_and_the_node_pass():
    action = _action(memory_mb=256, timeout_ms=60_000, logs_mb=10, concurrency=1)
    within = {
        "minActionMemory": 256,
        "maxActionMemory": 256,
        "minActionTimeout": 60_000,
        "maxActionTimeout": 60_000,
        "minActionLogs": 10,
        "maxActionLogs": 10,
        "minActionConcurrency": 1,
        "maxActionConcurrency": 1,
    }
    assert check_user_limits(action, within, node_memory_mb=256) is None
    assert check_user_limits(action, {"maxActionMemory": "256"}, 256) is None  # not a number


@pytest.mark.parametrize(
    ("limits", "user", "reason"),
    [
        (
            {"memory_mb": 128},
            {"minActionMemory": 256},
            "The memory limit of 128MB is below the namespace minimum of 256MB.",
        ),
        (
            {"memory_mb": 512},
            {"maxActionMemory": 256},
            "The memory limit of 512MB exceeds the namespace maximum of 256MB.",
        ),
        (
            {"timeout_ms": 100},
            {"minActionTimeout": 200},
            "The timeout limit of 100ms is below the namespace minimum of 200ms.",
        ),
        (
            {"timeout_ms": 300_000},
            {"maxActionTimeout": 60_000},
            "The timeout limit of 300000ms exceeds the namespace maximum of 60000ms.",
        ),
        (
            {"logs_mb": 0},
            {"minActionLogs": 1},
            "The logs limit of 0MB is below the namespace minimum of 1MB.",
        ),
        (
            {"logs_mb": 20},
            {"maxActionLogs": 10},
            "The logs limit of 20MB exceeds the namespace maximum of 10MB.",
        ),
        (
            {"concurrency": 1},
            {"minActionConcurrency": 2},
            "The concurrency limit of 1 is below the namespace minimum of 2.",
        ),
        (
            {"concurrency": 50},
            {"maxActionConcurrency": 10.5},
            "The concurrency limit of 50 exceeds the namespace maximum of 10.5.",
        ),
    ],
)
def test_a_limit_outside_the_namespace_bounds_is_refused_with_its_reason(limits, user, reason):
    assert check_user_limits(_action(**limits), user, node_memory_mb=4096) == reason


def test_an_action_larger_than_the_node_is_refused_after_the_namespace_checks():
    action = _action(memory_mb=512)
    assert check_user_limits(action, {}, node_memory_mb=512) is None
    assert check_user_limits(action, {}, node_memory_mb=511) == (
        "The memory limit of 512MB exceeds the invoker's 511MB for actions."
    )
    assert check_user_limits(action, {"maxActionMemory": 256}, 511) == (
        "The memory limit of 512MB exceeds the namespace maximum of 256MB."
    )
