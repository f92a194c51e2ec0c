"""The lanes the whole suite runs in (tests/lanes.py): every integration test has one, the
CPU-only tiers none, and the scheduler keeps a lane's tests together."""

from __future__ import annotations

from pathlib import Path

from tests import lanes

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


def test_a_lane_is_one_scope_and_every_other_test_one_of_its_own() -> None:
    chaos = "tests/integration/invoker/test_chaos.py::test_a[kafka-cut-10s]"
    assert lanes.scope_of(chaos) == lanes.scope_of("tests/integration/invoker/test_faults.py::t")
    assert lanes.scope_of(chaos) == "faults"
    figure = "tests/figures/test_doc_figures.py::test_x"
    assert lanes.scope_of(figure) == figure
    # The tests that share simulations run in one worker; each name must still be a test.
    shared = {lanes.scope_of(nodeid) for nodeid in lanes.SHARED_SIMULATIONS}
    assert shared == {"heavy-tail simulations"}
    source = (ROOT / "tests/figures/test_benchmark_figures.py").read_text()
    for nodeid in lanes.SHARED_SIMULATIONS:
        assert f"def {nodeid.split('::')[1]}(" in source, nodeid
    assert lanes.LaneScheduling._split_scope is not lanes.LoadScopeScheduling._split_scope


def test_each_test_counts_in_its_tier_or_lane() -> None:
    assert lanes.part_of("tests/unit/invoker/test_offsets.py::t") == "unit"
    assert lanes.part_of("tests/figures/test_doc_figures.py::t") == "figures"
    assert lanes.part_of("tests/integration/invoker/test_soak.py::t") == "integration/invoker"
    assert lanes.part_of("test_inner.py::t") == "other"
