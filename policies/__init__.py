"""Node-level call-scheduling policies (see ``docs/policies.md``)."""

from policies.base import CallInfo, Policy
from policies.builtin import BUILTIN, EECT, FC, FIFO, OPENWHISK, RECT, SEPT
from policies.stats import FunctionStats

POLICY_NAMES = tuple(BUILTIN)


def get_policy(name: str) -> Policy:
    try:
        return BUILTIN[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}"
        ) from None


__all__ = [
    "BUILTIN",
    "EECT",
    "FC",
    "FIFO",
    "OPENWHISK",
    "POLICY_NAMES",
    "RECT",
    "SEPT",
    "CallInfo",
    "FunctionStats",
    "Policy",
    "get_policy",
]
