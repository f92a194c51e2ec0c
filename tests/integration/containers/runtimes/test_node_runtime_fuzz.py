"""The Node.js runtime's /init and /run parsers against hostile bodies (hypothesis), through a
long-lived node process: refused or accepted, never thrown."""

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import targets
from tests.unit.containers.runtimes.test_python_runtime_fuzz import (
    ENV_NAMES,
    INIT_FIELDS,
    RUN_FIELDS,
)
from tests.unit.whisk.protocol.test_messages_fuzz import (
    FUZZ,
    POISON,
    SENTINEL,
    dumps,
    json_values,
    nested_text,
)

# -- The Node.js runtime's /init and /run parsers, through a long-lived node process --


class _NodeParsers:
    def __init__(self) -> None:
        import subprocess
        from pathlib import Path

        script = Path(targets.__file__).parent / "node_bodies.js"
        self.proc = subprocess.Popen(
            ["node", str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def __call__(self, which: str, body: bytes) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{which} {base64.b64encode(body).decode()}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def node_parsers():
    parsers = _NodeParsers()
    yield parsers
    parsers.close()


def _node_accepts_or_refuses(node_parsers, which: str, body: bytes) -> None:
    answer = node_parsers(which, body)
    assert "crash" not in answer, (answer, body[:200])


@FUZZ
@given(field=st.sampled_from(INIT_FIELDS), text=POISON)
def test_node_runtime_init_poison_in_every_field(node_parsers, field, text):
    value = {"name": "a", "main": "main", "binary": False, "code": "x=1", "env": {"A": "b"}}
    value[field] = SENTINEL
    body = dumps({"value": value}).replace(f'"{SENTINEL}"'.encode(), text)
    _node_accepts_or_refuses(node_parsers, "init", body)


@FUZZ
@given(env=st.dictionaries(ENV_NAMES, json_values | st.just("a\x00b"), max_size=4))
def test_node_runtime_init_env(node_parsers, env):
    body = json.dumps({"value": {"code": "x=1", "env": env}}).encode()
    _node_accepts_or_refuses(node_parsers, "init", body)


@FUZZ
@given(field=st.sampled_from(RUN_FIELDS), text=POISON)
def test_node_runtime_run_poison_in_every_field(node_parsers, field, text):
    body = {k: "x" for k in RUN_FIELDS}
    body[field] = SENTINEL
    raw = dumps(body).replace(f'"{SENTINEL}"'.encode(), text)
    _node_accepts_or_refuses(node_parsers, "run", raw)


@FUZZ
@given(raw=st.binary(max_size=300))
def test_node_runtime_random_bodies(node_parsers, raw):
    _node_accepts_or_refuses(node_parsers, "init", raw)
    _node_accepts_or_refuses(node_parsers, "run", raw)


def test_node_runtime_deep_env_is_refused_not_thrown(node_parsers):
    deep = nested_text(5000, "list")
    body = b'{"value":{"code":"x","env":{"A":' + deep + b"}}}"
    assert node_parsers("init", body) == {"refused": 400}
