"""``standalone`` builds the invoker's and the front's configurations from one command line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpu.config import GpuConfig
from ow_invoker import standalone
from ow_invoker.cli import build_parser


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


# -- standalone: both from one command line -------------------------------------------------


def test_standalone_builds_both_configurations():
    front, cfg = standalone.load(
        _args("standalone", "--port", "0", "--policy", "fifo", "--gpu-devices", "virtual:1"),
        {"KAFKA_HOSTS": "k:1", "OW_INVOKER_DB_PREFIX": "s_"},
    )
    assert front.port == 0 and cfg.policy == "fifo" and cfg.gpu == GpuConfig(devices="virtual:1")
    assert front.kafka == cfg.kafka == "k:1"  # one bus and one store: the invoker's settings
    assert front.whisks_db == cfg.whisks_db == "s_whisks"
    assert cfg.state_dir == ".state/standalone"


def test_standalone_default_state_dir_yields_to_env_and_flags():
    _, cfg = standalone.load(_args("standalone"), {"OW_INVOKER_STATE_DIR": "/tmp/s"})
    assert cfg.state_dir == "/tmp/s"
    _, cfg = standalone.load(_args("standalone", "--state-dir", "/tmp/f"), {})
    assert cfg.state_dir == "/tmp/f"


def test_standalone_reads_a_flat_file_of_both(tmp_path):
    path = _toml(tmp_path, 'policy = "fifo"\nport = 0\nmax_concurrency = 5\n')
    front, cfg = standalone.load(_args("standalone", "--config", path), {})
    assert (front.port, front.max_concurrency, cfg.policy) == (0, 5, "fifo")
    bad = _toml(tmp_path, "no_such_key = 1\n")
    with pytest.raises(ValueError, match="no_such_key"):
        standalone.load(_args("standalone", "--config", bad), {})
