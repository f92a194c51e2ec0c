"""The settings machinery (whisk/settings.py): flags, environment, groups and converters."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from whisk.settings import Settings, parse_memory_mb, setting

# -- the machinery --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Inner:
    size_mb: int = setting(8, convert=parse_memory_mb, help="a size")
    name: str = setting("x", help="a name")


@dataclass(frozen=True)
class _Outer:
    port: int = setting(1, env=("STOCK_PORT",), aliases=("-p",), help="a port")
    tags: tuple[str, ...] = setting(factory=tuple, help="tags")
    on: bool = setting(False, help="a switch")
    inner: _Inner = setting(factory=_Inner, help="inner settings")  # noqa: RUF009 (a field())


def test_settings_flags_env_groups_and_converters():
    s = Settings(_Outer, env_prefix="T_", section="t")
    parser = argparse.ArgumentParser()
    s.add_arguments(parser)
    args = parser.parse_args(["-p", "5", "--inner-size-mb", "1g", "--tags", "a, b"])
    cfg = s.load(args, {"STOCK_PORT": "3", "T_ON": "true", "T_INNER_NAME": "y"})
    assert cfg == _Outer(port=5, tags=("a", "b"), on=True, inner=_Inner(size_mb=1024, name="y"))
    # Ours win over the stock name; the flag over both.
    assert s.load(None, {"STOCK_PORT": "3", "T_PORT": "4"}).port == 4
    assert s.load(None, {}) == _Outer()
    with pytest.raises(TypeError, match="unknown settings: nope"):
        s.load(None, {}, nope=1)


@dataclass(frozen=True)
class _Flat:
    inner: _Inner = setting(factory=_Inner, prefix="", help="grouped, names kept")  # noqa: RUF009
    other: _Inner = setting(factory=_Inner, prefix="o_", help="another prefix")  # noqa: RUF009


@dataclass(frozen=True)
class _Twice:
    name: str = setting("a", help="a name")
    inner: _Inner = setting(factory=_Inner, prefix="", help="its name too")  # noqa: RUF009


def test_a_groups_prefix_names_its_flags_env_and_keys(tmp_path):
    s = Settings(_Flat, env_prefix="T_", section="t")
    parser = argparse.ArgumentParser()
    s.add_arguments(parser)
    args = parser.parse_args(["--size-mb", "1g", "--o-name", "z"])
    cfg = s.load(args, {"T_NAME": "y", "T_O_SIZE_MB": "2"})
    assert cfg == _Flat(inner=_Inner(size_mb=1024, name="y"), other=_Inner(size_mb=2, name="z"))
    path = tmp_path / "t.toml"
    path.write_text('[t]\nsize_mb = 3\n[t.other]\nname = "w"\n')
    cfg = s.load(argparse.Namespace(config=str(path)), {})
    assert cfg == _Flat(inner=_Inner(size_mb=3), other=_Inner(name="w"))
    with pytest.raises(TypeError, match="settings named twice: name"):
        Settings(_Twice, env_prefix="T_", section="t").keys  # noqa: B018 (the check is lazy)


def test_parse_memory_mb():
    assert parse_memory_mb("2g") == 2048 and parse_memory_mb("512 MB") == 512
    assert parse_memory_mb(64) == 64
    with pytest.raises(ValueError):
        parse_memory_mb("lots")
