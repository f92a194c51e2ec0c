"""Configuration as one frozen dataclass per command, filled from layered sources.

Each field is declared once, with :func:`setting`, and gets from that declaration its
``--flag``, its environment names (``<PREFIX><FIELD>`` and any stock names such as
``KAFKA_HOSTS``), its TOML key and its converter. Precedence, lowest first: the dataclass
defaults, a command's own ``defaults``, the TOML file (``--config``, optionally under
``[<section>]``), the ``stock`` reader's values (names that map onto several settings or
need more than a converter), the environment (stock names, then ours), flags, then
``overrides``.

A field whose type is itself a settings dataclass (``gpu: GpuConfig | None``) is a *group*:
its fields read as ``--gpu-<field>``, ``<PREFIX>GPU_<FIELD>`` and ``gpu_<field>`` (or a
``[gpu]`` table), and its flags are listed together under the group's help. A group's
``prefix`` changes that ``gpu_``: ``prefix=""`` keeps its fields' own names (settings that
were top-level ones before they were grouped keep their flags, variables and keys). An
optional group with a ``switch`` is on only when that one setting is given (non-empty); its
other settings are still checked, so a typo fails even then.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import tomllib
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, Field, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger("settings")

__all__ = ["Settings", "parse_memory_mb", "setting"]


def parse_memory_mb(text: str | int) -> int:
    """``2048``, ``2048m``, ``2048 MB``, ``2g``, ``2147483648 B`` -> megabytes."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+)\s*([kmgKMG]?[bB]?)\s*", str(text))
    if not m:
        raise ValueError(f"bad memory size {text!r}")
    value, unit = int(m.group(1)), m.group(2).lower()
    factor = {
        "": 1,
        "m": 1,
        "mb": 1,
        "g": 1024,
        "gb": 1024,
        "k": 1 / 1024,
        "kb": 1 / 1024,
        "b": 1 / 1024 / 1024,
    }[unit]
    return int(value * factor)


def setting(
    default: Any = MISSING,
    *,
    help: str = "",
    env: tuple[str, ...] = (),
    factory: Callable[[], Any] | None = None,
    convert: Callable[[Any], Any] | None = None,
    aliases: tuple[str, ...] = (),
    repeat: bool = False,
    switch: str | None = None,
    prefix: str | None = None,
    choices: tuple[str, ...] | None = None,
    secret: bool = False,
) -> Any:
    """A dataclass field that the loader can fill.

    ``env``: stock variable names, read before ``<PREFIX><FIELD>`` (ours win);
    ``convert``: turns a text value (flag, environment) into the field's type when the
    type alone does not say how; ``aliases``: more flag spellings (``--id``); ``repeat``:
    the flag may be given several times (a tuple field); ``switch``: for an optional group,
    the one setting that turns it on; ``prefix``: for a group, what its settings' keys start
    with (default: the group's name and ``_``); ``choices``: the flag's allowed values (argparse
    refuses others with its usage error; the class still checks values from elsewhere);
    ``secret``: a key or password, which a flag would show to every local user in
    ``/proc/<pid>/cmdline``: given as a flag it still works, with a warning naming the
    environment variable and the file that keep it private.
    """
    meta = {
        "help": help,
        "env": env,
        "convert": convert,
        "aliases": aliases,
        "repeat": repeat,
        "switch": switch,
        "prefix": prefix,
        "choices": choices,
        "secret": secret,
    }
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (tp, False)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _is_group(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _split(value: Any) -> list[Any]:
    """A list (TOML, a repeated flag) or comma-separated text -> items."""
    if isinstance(value, list | tuple):
        out: list[Any] = []
        for v in value:
            out.extend(_split(v) if isinstance(v, str) else [v])
        return out
    return [s for s in (p.strip() for p in str(value).split(",")) if s]


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{value!r} is not a boolean (true/false)")


def _converter(tp: Any) -> Callable[[Any], Any]:
    """The text-to-value converter for a field type (after ``| None`` is stripped)."""
    if tp is bool:
        return _bool
    if tp in (int, float, str):
        return lambda v: v if type(v) is tp else tp(v)
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis and args[0] in (int, float, str):
            item = args[0]
            return lambda v: tuple(item(x) for x in _split(v))
    raise TypeError(f"no converter for settings of type {tp!r}: give setting(convert=...)")


@dataclass(frozen=True)
class _Leaf:
    """One settable value: a field of the settings class, or of one of its groups."""

    key: str  # flat name: "kafka", "gpu_devices" (TOML key, argparse dest)
    group: str | None  # the group field's name, or None for a top-level field
    name: str  # the field's own name inside its class
    field: Field[Any]
    convert: Callable[[Any], Any]


@dataclass(frozen=True)
class _Group:
    name: str
    cls: type
    optional: bool
    switch: str | None
    field: Field[Any]

    @property
    def prefix(self) -> str:
        """What the keys of the group's settings start with: ``gpu_``, or the field's own."""
        prefix = self.field.metadata.get("prefix")
        return f"{self.name}_" if prefix is None else prefix


@dataclass(frozen=True)
class Settings(Generic[T]):
    """How one settings dataclass is read: its environment prefix and TOML section."""

    cls: type[T]
    env_prefix: str  # "OW_INVOKER_": OW_INVOKER_KAFKA, OW_INVOKER_GPU_DEVICES
    section: str  # TOML table read when present ("invoker"); else the whole file
    # environment -> flat keys and values (raises ValueError for a value it refuses)
    stock: Callable[[Mapping[str, str]], Mapping[str, Any]] | None = None

    # -- the fields, flattened ----------------------------------------------------------

    @cached_property
    def _groups(self) -> dict[str, _Group]:
        hints = typing.get_type_hints(self.cls)
        out = {}
        for f in dataclasses.fields(self.cls):  # type: ignore[arg-type]
            tp, optional = _strip_optional(hints[f.name])
            if _is_group(tp):
                out[f.name] = _Group(f.name, tp, optional, f.metadata.get("switch"), f)
        return out

    @cached_property
    def _leaves(self) -> list[_Leaf]:
        groups = self._groups
        out: list[_Leaf] = []

        def add(cls: type, group: str | None) -> None:
            hints = typing.get_type_hints(cls)
            for f in dataclasses.fields(cls):
                if group is None and f.name in groups:
                    add(groups[f.name].cls, f.name)
                    continue
                convert = f.metadata.get("convert") or _converter(_strip_optional(hints[f.name])[0])
                key = f"{groups[group].prefix}{f.name}" if group else f.name
                out.append(_Leaf(key, group, f.name, f, convert))

        add(self.cls, None)
        keys = [leaf.key for leaf in out]
        if twice := sorted({k for k in keys if keys.count(k) > 1} | (set(keys) & set(groups))):
            raise TypeError(f"{self.cls.__name__}: settings named twice: {', '.join(twice)}")
        return out

    @cached_property
    def keys(self) -> frozenset[str]:
        """Every flat key (and group name): what a TOML file or ``overrides`` may name."""
        return frozenset([leaf.key for leaf in self._leaves] + list(self._groups))

    def leaf(self, key: str) -> _Leaf:
        """One setting by its flat key."""
        return next(leaf for leaf in self._leaves if leaf.key == key)

    def env_names(self, leaf: _Leaf) -> tuple[str, ...]:
        """Environment names of one setting, in reading order (the last one set wins)."""
        return (*leaf.field.metadata.get("env", ()), f"{self.env_prefix}{leaf.key.upper()}")

    # -- flags --------------------------------------------------------------------------

    def add_arguments(
        self,
        parser: argparse.ArgumentParser,
        skip: Collection[str] = (),
        config_file: bool = True,
    ) -> None:
        """One ``--flag`` per setting; ``skip`` names fields, groups or flat keys to leave
        out (another configuration on the same command line owns them). Flags default to
        None: defaults are resolved by :meth:`load`, where the other sources are known."""
        if config_file:
            parser.add_argument(
                "--config",
                help=f"TOML configuration file (keys as the flags, with _; optionally under "
                f"[{self.section}])",
            )
        groups = self._groups
        targets: dict[str | None, Any] = {None: parser}
        for leaf in self._leaves:
            if leaf.key in skip or leaf.group in skip:
                continue
            if leaf.group not in targets:
                g = groups[leaf.group]  # type: ignore[index]
                targets[leaf.group] = parser.add_argument_group(g.field.metadata.get("help"))
            meta = leaf.field.metadata
            text = meta.get("help", "")
            group = groups.get(leaf.group) if leaf.group else None
            if group and group.optional and group.switch == leaf.name:
                text += " (unset: off)"
            elif leaf.field.default not in (MISSING, None, ""):
                text += f" (default: {leaf.field.default})"
            text += f" [env: {', '.join(self.env_names(leaf))}]"
            flags = ("--" + leaf.key.replace("_", "-"), *meta.get("aliases", ()))
            if leaf.convert is _bool:  # a switch: the flag alone turns it on
                targets[leaf.group].add_argument(
                    *flags, dest=leaf.key, default=None, action="store_const", const=True,
                    help=text.replace("%", "%%"),
                )  # fmt: skip
                continue
            targets[leaf.group].add_argument(
                *flags,
                dest=leaf.key,
                default=None,
                action="append" if meta.get("repeat") else "store",
                choices=meta.get("choices"),
                help=text.replace("%", "%%"),
            )

    # -- loading ------------------------------------------------------------------------

    def _warn_secret_flag(self, leaf: _Leaf) -> None:
        """Logged before logging is set up: Python's last-resort handler prints it."""
        log.warning(
            "--%s puts a secret on the command line, where every user and action on this "
            "machine can read it (/proc/<pid>/cmdline): give it in the environment (%s) or "
            "in a --config file readable only by you",
            leaf.key.replace("_", "-"),
            self.env_names(leaf)[-1],
        )

    def read_file(self, path: str | Path, tolerate: Collection[str] = ()) -> dict[str, Any]:
        """Flat key -> value from a TOML file: its ``[section]`` when it has one, else its
        top-level keys; group tables (``[gpu]``) are flattened. Other top-level tables are
        other commands' sections and left alone; an unknown key is an error, except those
        in ``tolerate`` (another configuration's, in a file shared by both)."""
        data = tomllib.loads(Path(path).read_text())
        sectioned = isinstance(data.get(self.section), dict)
        if sectioned:
            data = data[self.section]
        groups = self._groups
        flat: dict[str, Any] = {}
        for k, v in data.items():
            if isinstance(v, dict) and k in groups:
                flat.update({f"{groups[k].prefix}{sub}": value for sub, value in v.items()})
            elif not isinstance(v, dict) or sectioned:  # a flat file's tables: other sections
                flat[k] = v
        unknown = set(flat) - self.keys - set(tolerate)
        if unknown:
            raise ValueError(f"unknown keys in {path}: {', '.join(sorted(unknown))}")
        return {k: v for k, v in flat.items() if k in self.keys}

    def load(
        self,
        args: argparse.Namespace | None = None,
        environ: Mapping[str, str] | None = None,
        *,
        defaults: Mapping[str, Any] | None = None,
        tolerate: Collection[str] = (),
        **overrides: Any,
    ) -> T:
        """The configuration from every source (see the module docstring for the order).
        ``defaults``: the command's own defaults, below the file; ``overrides``: flat keys
        (converted as flags are) or whole groups (``gpu=GpuConfig(...)`` or None)."""
        environ = os.environ if environ is None else environ
        leaves = self._leaves
        values: dict[str, Any] = dict(defaults or {})
        config_file = getattr(args, "config", None) if args is not None else None
        if config_file:
            values.update(self.read_file(config_file, tolerate))
        if self.stock is not None:
            values.update(self.stock(environ))
        for leaf in leaves:
            for name in self.env_names(leaf):
                if name in environ:
                    values[leaf.key] = environ[name]
            flag = getattr(args, leaf.key, None) if args is not None else None
            if flag is not None:
                values[leaf.key] = flag
                if leaf.field.metadata.get("secret"):
                    self._warn_secret_flag(leaf)
        groups = self._groups
        whole = {k: overrides.pop(k) for k in list(overrides) if k in groups}
        unknown = set(overrides) - self.keys
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        values.update(overrides)

        top: dict[str, Any] = {}
        parts: dict[str, dict[str, Any]] = {g: {} for g in groups}
        for leaf in leaves:
            if leaf.key in values:
                raw = values[leaf.key]
                try:
                    value = None if raw is None else leaf.convert(raw)  # None: an override's
                except (TypeError, ValueError) as e:
                    raise ValueError(f"{leaf.key}: {e}") from None
                (parts[leaf.group] if leaf.group else top)[leaf.name] = value
        for name, g in groups.items():
            if name in whole:
                top[name] = whole[name]
                continue
            given = parts[name]
            if g.optional and g.switch is not None and given.get(g.switch) in (None, ""):
                if given:  # off, but still checked: a typo fails here, not when turned on
                    g.cls(**{k: v for k, v in given.items() if k != g.switch})
                top[name] = None
            elif g.optional and g.switch is None and not given:
                top[name] = None
            else:
                top[name] = g.cls(**given)
        return self.cls(**top)
