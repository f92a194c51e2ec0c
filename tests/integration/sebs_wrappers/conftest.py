"""Fixtures for the SeBS, object store and experiment-runner tests."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """A running moto S3 store and loopback file server for the whole module."""
    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("minio") is None:
        pytest.skip("moto (s3 + server) and minio are needed (the 'sebs' extra)")
    from sebs_wrappers.objstore import LocalServices

    root = tmp_path_factory.mktemp("sebs-state")
    svc = LocalServices(root / "data" / "files", root / "logs")
    running = svc.start()
    running.root = root  # type: ignore[attr-defined]
    yield running
    svc.stop()


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sebs-data")
