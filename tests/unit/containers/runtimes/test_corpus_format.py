"""The corpus itself: the vectors' format, their differences listed in the docs, and checks
that do catch a wrong answer (pure logic, no runtime)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from containers.backend import HttpResult, LogLine
from tests.compat.corpus import check_answer, check_logs, expand, init_body, load, run_body

DOCS = Path(__file__).resolve().parents[4] / "docs" / "runtimes.md"


@pytest.mark.parametrize("family", ["python", "nodejs"])
def test_vectors_load_and_build_their_bodies(family: str) -> None:
    vectors = load(family)
    assert len(vectors) >= 25
    for v in vectors:
        if not v.data.get("no_init") and "init_body_json" not in v.data:  # raw ones may be bad
            assert json.loads(init_body(v))["value"]["code"]
        for run in v.data.get("runs", []):
            assert json.loads(run_body(run))["namespace"]


@pytest.mark.parametrize("family", ["python", "nodejs"])
def test_every_difference_is_documented(family: str) -> None:
    docs = DOCS.read_text()
    section = docs[docs.index("## Compatibility with the official runtimes") :]
    missing = [v.name for v in load(family) if "differs" in v.data and f"`{v.name}`" not in section]
    assert not missing, f"vectors with `differs` not listed in docs/runtimes.md: {missing}"


def test_repeat_expands_anywhere() -> None:
    assert expand({"a": [{"$repeat": ["xy", 3]}], "b": {"$repeat": ["z", 2, "\n"]}}) == {
        "a": ["xyxyxy"],
        "b": "zz\n",
    }


def answer(status: int, body: object) -> HttpResult:
    return HttpResult(status, json.dumps(body).encode(), 0.0)


def test_answer_checks_catch_each_kind_of_mismatch() -> None:
    ok = answer(200, {"error": "ZeroDivisionError: division by zero"})
    assert check_answer("run", {"result_has": ["division by zero"]}, ok) == []
    assert check_answer("run", {"status": 502}, ok)
    assert check_answer("run", {"result": {"error": "x"}}, ok)
    assert check_answer("run", {"result_keys": ["error", "stack"]}, ok)
    assert check_answer("run", {"result_has": ["modulo"]}, ok)
    assert check_answer("run", {"result_has_ci": ["DIVISION"]}, ok) == []
    assert check_answer("run", {}, HttpResult(200, b"not json", 0.0))
    assert check_answer("run", {"result": ["a"]}, answer(200, ["a"])) == []


def line(stream: str, text: str) -> LogLine:
    return LogLine("2026-01-01T00:00:00.000000000Z", stream, text, len(text) + 60)


def test_log_checks_catch_each_kind_of_mismatch() -> None:
    lines = [line("stdout", "hello stdout\n"), line("stderr", "hello stderr\n")]
    assert check_logs("run", {"stdout": ["hello stdout"], "stderr": ["hello stderr"]}, lines) == []
    assert check_logs("run", {"stdout": []}, lines)
    assert check_logs("run", {"stderr": ["hello stderr", "more"]}, lines)
    assert check_logs("run", {"stderr_has": ["Traceback"]}, lines)
    assert check_logs("run", {"any_has": ["hello stderr"]}, lines) == []
    assert check_logs("run", {"any_has_ci": ["HELLO STDOUT"]}, lines) == []
    split = [line("stdout", "z" * 5), line("stdout", "z" * 3 + "\n")]
    assert check_logs("run", {"stdout_text": {"$repeat": ["z", 8, "\n"]}}, split) == []
    assert check_logs("run", {"stdout_text": {"$repeat": ["z", 9, "\n"]}}, split)
