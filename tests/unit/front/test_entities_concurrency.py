"""The embedded API accepts ``limits.concurrency`` up to ``--max-concurrency`` (stock: 1)."""

from __future__ import annotations

import argparse

import pytest

from front.entities import BadRequest, Limits, new_action_document
from front.server import add_front_arguments, front_options

BODY = {"exec": {"kind": "nodejs:20", "code": "function main(p) { return p; }"}}


def _create(limits: Limits, concurrency: int) -> dict:
    body = {**BODY, "limits": {"concurrency": concurrency}}
    doc, _ = new_action_document(
        "guest",
        "a",
        body,
        kinds={"nodejs:20"},
        kind_defaults={"nodejs": "nodejs:20"},
        limits=limits,
        now_ms=0,
    )
    return doc


def test_max_concurrency_flag_reaches_the_api_limits():
    parser = argparse.ArgumentParser()
    add_front_arguments(parser)
    assert front_options(parser.parse_args([]))["limits"].max_concurrency == 1
    options = front_options(parser.parse_args(["--max-concurrency", "200"]))
    assert options["limits"].max_concurrency == 200


def test_concurrency_above_the_maximum_is_refused_and_within_it_stored():
    with pytest.raises(BadRequest, match=r"concurrency limit 3 is not in the allowed range"):
        _create(Limits(), 3)
    assert _create(Limits(max_concurrency=200), 3)["limits"]["concurrency"] == 3
