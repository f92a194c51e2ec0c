"""Byte sizes and what the namespace limits decide (whisk/protocol/limits.py), exactly."""

from __future__ import annotations

import pytest

from whisk.protocol.actions import Action, ActionLimits
from whisk.protocol.limits import (
    SYSTEM_PAYLOAD_MAX,
    check_user_limits,
    parse_byte_size,
    payload_limit,
)


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
