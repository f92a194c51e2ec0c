"""The Node.js runtime's /init and /run parsers against hostile bodies (hypothesis), through a
long-lived node process: refused or accepted, never thrown."""

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import targets
from tests.unit.whisk.protocol.test_messages_fuzz import POISON, json_values


def dumps(value: object) -> bytes:
    """The stdlib encoder: it writes what ours refuses (integers beyond 64 bits)."""
    return json.dumps(value).encode()


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SENTINEL = "__POISON__"


def nested_text(depth: int, shape: str) -> bytes:
    """JSON text nested ``depth`` levels (written directly: no encoder recursion)."""
    if shape == "list":
        return b"[" * depth + b"1" + b"]" * depth
    if shape == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    return b'["t",1,' * depth + b'["t",1]' + b"]" * depth


# -- The runtime's /init and /run bodies, every field --

INIT_FIELDS = ["name", "main", "binary", "code", "env"]

ENV_NAMES = st.sampled_from(["A", "", "A=B", "A\x00", "\ud800", "é", "__OW_X", "a" * 300])


RUN_FIELDS = ["value", "namespace", "action_name", "activation_id", "deadline", "api_key"]


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
