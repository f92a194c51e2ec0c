"""The whole platform as separate processes, driven by real OpenWhisk clients.

``platform`` is parametrized over the two deployments users run (see ``platforms.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.processes import ROOT, Platform, running_platform

AIO_NODE_MODULES = ROOT / ".cache" / "aio" / "node_modules"
SERVERLESS_NODE_MODULES = ROOT / ".cache" / "serverless" / "node_modules"


@pytest.fixture(scope="module", params=["embedded", "kafka"])
def platform(request, tmp_path_factory) -> Iterator[Platform]:
    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == "embedded":
        with running_platform("embedded", tmp) as p:
            yield p
    else:
        kafka = request.getfixturevalue("kafka")
        couchdb = request.getfixturevalue("couchdb")
        with running_platform("kafka", tmp, kafka, couchdb) as p:
            yield p


@pytest.fixture(scope="session")
def aio_cli() -> list[str]:
    """The Adobe I/O Runtime CLI (an OpenWhisk CLI written by others), see install.sh aio."""
    if not (AIO_NODE_MODULES / "@adobe" / "aio-cli-plugin-runtime").is_dir():
        pytest.fail("the aio runtime CLI is missing: run `scripts/install.sh aio`")
    return ["node", str(ROOT / "scripts" / "aio-runtime.js")]


@pytest.fixture(scope="session")
def serverless_modules() -> Path:
    """node_modules holding the Serverless Framework v3 and the serverless-openwhisk plugin
    (see install.sh serverless); a service links it as its own node_modules."""
    if (
        not (SERVERLESS_NODE_MODULES / "serverless-openwhisk" / "package.json").is_file()
        or not (SERVERLESS_NODE_MODULES / "serverless" / "bin" / "serverless.js").is_file()
    ):
        pytest.fail("the Serverless Framework is missing: run `scripts/install.sh serverless`")
    return SERVERLESS_NODE_MODULES
