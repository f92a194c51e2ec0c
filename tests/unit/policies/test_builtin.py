"""The policies' keys and their names."""

import pytest

from policies import EECT, FC, FIFO, OPENWHISK, RECT, SEPT, CallInfo, get_policy


@pytest.mark.parametrize(
    "policy,expected",
    [(FIFO, 10.0), (SEPT, 2.0), (EECT, 12.0), (RECT, 9.0), (FC, 6.0), (OPENWHISK, 10.0)],
)
def test_policy_keys(policy, expected):
    info = CallInfo(received=10.0, expected=2.0, previous_received=7.0, recent_calls=3)
    assert policy.priority(info) == expected


def test_get_policy_names_and_errors():
    assert get_policy("FC") is FC
    with pytest.raises(ValueError, match="choose one of fifo, sept, eect, rect, fc, openwhisk"):
        get_policy("lifo")
