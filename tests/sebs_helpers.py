"""Skip markers shared by the SeBS tests of both tiers (tests/unit/sebs_wrappers,
tests/integration/sebs_wrappers)."""

from __future__ import annotations

import importlib.util

import pytest

from sebs_wrappers import catalog

needs_sebs = pytest.mark.skipif(
    not catalog.sebs_available(), reason=f"SeBS benchmark code missing: {catalog.INSTALL_HINT}"
)


def needs_modules(*names: str) -> pytest.MarkDecorator:
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return pytest.mark.skipif(
        bool(missing), reason=f"missing {', '.join(missing)} (install the 'sebs' extra)"
    )
