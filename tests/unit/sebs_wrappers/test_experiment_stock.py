"""The experiment runner against a stock deployment: stock kinds by default, and a clear
note (not a traceback) when the experiments extra (matplotlib) is missing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from sebs_wrappers import experiment, results
from sebs_wrappers.analysis import CallRow
from sebs_wrappers.deploy import DeployOptions
from whisk.manifest import Manifest


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    experiment.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_default_kind_is_one_the_stock_manifest_has() -> None:
    stock_python = {"python:3.10", "python:3.11"}  # apache/openwhisk ansible/files/runtimes.json
    cfg = experiment.config_from_args(_args("--apihost", "http://127.0.0.1:1"))
    assert cfg.kind in stock_python
    assert DeployOptions().kind in stock_python
    assert experiment.config_from_args(_args("--kind", "python:3.10")).kind == "python:3.10"
    assert Manifest().defaults["python"] == "python:3.10"  # the stock default


def test_missing_matplotlib_writes_everything_but_the_plots(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    rows = [
        CallRow(p, 60.0, 0, 0, "f", 10.0, 10.01, 10.5 + i / 10, 200, True, idle_median_s=0.5)
        for p in ("openwhisk", "fc")
        for i in range(5)
    ]
    results.save_raw(tmp_path, rows, {"fc": {"f": [0.5]}}, {})
    (tmp_path / "config.json").write_text('{"policies": ["openwhisk", "fc"]}')
    path = results.write_outputs(tmp_path)
    assert not (tmp_path / "plots").exists()
    for name in ("calls.csv", "summary.csv", "per_function.csv", "summary.json"):
        assert (tmp_path / name).stat().st_size > 0
    text = path.read_text()
    assert "pip install -e '.[experiments]'" in text
    assert "matplotlib is not installed" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["python:3.10", "python:3.11", "nodejs:18", "nodejs:20"])
def test_our_manifest_has_every_stock_kind(kind: str) -> None:
    assert Manifest().runtime(kind) is not None
