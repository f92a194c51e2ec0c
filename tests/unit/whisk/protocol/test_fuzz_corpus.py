"""The committed seed corpus of the fuzz targets (tests/fuzz) stays green: every crash atheris
ever found is in there."""

import pytest

from tests.fuzz import targets

# -- The committed seed corpus stays green (every crash atheris ever found is in there) --


@pytest.mark.parametrize("target", sorted(targets.TARGETS))
def test_seed_corpus(target):
    from pathlib import Path

    folder = Path(targets.__file__).parent / "corpus" / target
    seeds = sorted(folder.iterdir())
    assert seeds, f"no seeds for {target}"
    for seed in seeds:
        targets.TARGETS[target](seed.read_bytes())
