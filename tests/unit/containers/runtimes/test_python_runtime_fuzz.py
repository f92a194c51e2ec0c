"""Hostile input never crashes the python runtime: its /init and /run bodies, every field
(hypothesis), refused with a clear answer; archives that would land outside the action dir."""

from __future__ import annotations

import io
import json
import os
import string
import tempfile
import warnings
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from containers.runtimes.python_runtime import UnsafeArchive, safe_extract
from tests.fuzz import targets
from tests.unit.whisk.protocol.test_messages_fuzz import (
    FUZZ,
    POISON,
    SENTINEL,
    dumps,
    json_values,
    nested_text,
)

# -- The runtime's /init and /run bodies, every field --

INIT_FIELDS = ["name", "main", "binary", "code", "env"]

ENV_NAMES = st.sampled_from(["A", "", "A=B", "A\x00", "\ud800", "é", "__OW_X", "a" * 300])


@FUZZ
@given(st.sampled_from(INIT_FIELDS), POISON)
def test_runtime_init_body_poison_in_every_field(field, text):
    value = {"name": "a", "main": "main", "binary": False, "code": "x=1", "env": {"A": "b"}}
    value[field] = SENTINEL
    targets.runtime_init(dumps({"value": value}).replace(f'"{SENTINEL}"'.encode(), text))


@FUZZ
@given(st.dictionaries(ENV_NAMES, json_values | st.just("a\x00b"), max_size=4))
def test_runtime_init_env_refuses_what_the_os_cannot_hold(env):
    body = json.dumps({"value": {"code": "x=1", "env": env}}).encode()
    targets.runtime_init(body)


@pytest.mark.parametrize(
    "env", [{"A=B": "x"}, {"=": "x"}, {"A\x00": "x"}, {"A": "a\x00b"}, {"": "x"}]
)
def test_runtime_init_env_names_the_os_cannot_hold_are_refused(env):
    """Refused with a 400 naming the variable: not dropped, not truncated, and not accepted
    to crash later where the action's environment is set."""
    from containers.runtimes.python_runtime import BadBody, parse_init

    with pytest.raises(BadBody, match="invalid variable name or value") as refused:
        parse_init(json.dumps({"value": {"code": "x=1", "env": env}}).encode())
    assert refused.value.status == 400


@FUZZ
@given(st.dictionaries(ENV_NAMES, json_values | st.just("a\x00b"), max_size=4))
def test_runtime_init_env_that_is_accepted_is_whole_and_settable(env):
    from containers.runtimes.python_runtime import BadBody, parse_init

    try:
        _, _, _, accepted = parse_init(json.dumps({"value": {"code": "x=1", "env": env}}).encode())
    except BadBody:
        return
    assert accepted.keys() == env.keys()  # nothing dropped
    with pytest.MonkeyPatch.context() as mp:
        for name, value in accepted.items():
            mp.setenv(name, value)  # os.putenv: raises on "=" or NUL


@pytest.mark.parametrize("key", ["a=b", "a\x00"])
def test_runtime_run_context_names_the_os_cannot_hold_are_refused(key):
    from containers.runtimes.python_runtime import BadBody, parse_run

    with pytest.raises(BadBody, match="invalid variable name or value"):
        parse_run(json.dumps({"value": {}, key: "x"}).encode())


RUN_FIELDS = ["value", "namespace", "action_name", "activation_id", "deadline", "api_key"]


@FUZZ
@given(st.sampled_from(RUN_FIELDS), POISON)
def test_runtime_run_body_poison_in_every_field(field, text):
    body = {k: "x" for k in RUN_FIELDS}
    body[field] = SENTINEL
    targets.runtime_run(dumps(body).replace(f'"{SENTINEL}"'.encode(), text))


@FUZZ
@given(st.dictionaries(ENV_NAMES, json_values, max_size=4))
def test_runtime_run_context_names(context):
    targets.runtime_run(json.dumps({"value": {}, **context}).encode())


def test_runtime_bodies_nested_too_deeply_get_a_clear_answer():
    from containers.runtimes.python_runtime import BadBody, parse_init, parse_run

    deep = nested_text(5000, "list")
    with pytest.raises(BadBody, match="nested too deeply"):
        parse_run(b'{"value":' + deep + b"}")
    with pytest.raises(BadBody, match="nested too deeply"):
        parse_init(b'{"value":{"code":"x","env":{"A":' + deep + b"}}}")


ARCHIVE_FUZZ = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

segments = st.sampled_from(["..", ".", "", "a", "b", "/", "\\", "C:", "~", "\x00", "é", "x" * 50])

names = st.lists(segments, min_size=1, max_size=6).map("/".join) | st.text(
    alphabet=string.printable, min_size=1, max_size=40
)


def archive(entries: list[tuple[str, int]]) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as zf:
        warnings.simplefilter("ignore")  # duplicate names are part of the fuzz
        for name, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, b"data")
    return buf.getvalue()


def _outside(root: Path, sandbox: Path) -> list[str]:
    return [p for p in os.listdir(sandbox) if p != root.name]


@ARCHIVE_FUZZ
@given(
    st.lists(
        st.tuples(names, st.sampled_from([0, 0o100644, 0o120777, 0o40755])), min_size=1, max_size=5
    )
)
def test_entries_never_escape(entries):
    with tempfile.TemporaryDirectory() as sandbox:
        root = Path(sandbox) / "action"
        root.mkdir()
        try:
            data = archive(entries)
        except (ValueError, OSError):
            return  # zipfile itself refuses the name
        try:
            written = safe_extract(data, str(root))
        except (UnsafeArchive, zipfile.BadZipFile, OSError, ValueError):
            written = []
        assert not _outside(root, Path(sandbox))
        for rel in written:
            real = os.path.realpath(root / rel)
            assert real.startswith(str(root.resolve()) + os.sep)


@ARCHIVE_FUZZ
@given(st.binary(max_size=3000))
def test_random_bytes_are_refused_cleanly(data):
    with tempfile.TemporaryDirectory() as d:
        try:
            safe_extract(data, d)
        except (UnsafeArchive, zipfile.BadZipFile, ValueError, OSError, EOFError):
            pass


def test_zip_bomb_is_refused():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big.bin", b"\0" * (64 * 1024 * 1024))
    with tempfile.TemporaryDirectory() as d:
        try:
            safe_extract(buf.getvalue(), d, max_bytes=16 * 1024 * 1024)
        except UnsafeArchive as e:
            assert "expands beyond" in str(e)
        else:
            raise AssertionError("a 64 MB expansion passed a 16 MB limit")
