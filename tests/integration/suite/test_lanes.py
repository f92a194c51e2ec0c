"""The lanes the whole suite runs in (tests/lanes.py): every integration test has one, the
CPU-only tiers none, and a test's own id is read back from a report's (skips are matched
on it)."""

from __future__ import annotations

from pathlib import Path

from tests import lanes, skip_guard

ROOT = Path(__file__).resolve().parents[3]


def test_every_integration_file_runs_in_a_lane_and_the_other_tiers_in_none() -> None:
    files = [p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")]
    by_lane: dict[str | None, list[str]] = {}
    for path in files:
        by_lane.setdefault(lanes.lane_of(f"{path}::test_x"), []).append(path)
    assert set(by_lane) == {None, "faults", "invoker", "platform"}
    assert all(not p.startswith("tests/integration/") for p in by_lane[None])
    assert "tests/integration/invoker/test_chaos.py" in by_lane["faults"]
    assert "tests/integration/invoker/test_soak.py" in by_lane["invoker"]
    assert "tests/integration/front/test_kaas.py" in by_lane["platform"]


def test_a_lane_suffix_is_not_part_of_a_tests_id() -> None:
    strip = skip_guard.LANE_SUFFIX.sub
    assert strip("", "tests/a.py::test_x[docker]@platform") == "tests/a.py::test_x[docker]"
    assert strip("", "tests/a.py::test_x@faults") == "tests/a.py::test_x"
    assert strip("", "tests/a.py::test_x[a@b]") == "tests/a.py::test_x[a@b]"
