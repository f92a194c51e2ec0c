"""The runtime compatibility corpus: vectors (data) and how one is played against a container.

The vectors in ``vectors/<family>.toml`` record what the official OpenWhisk runtimes answer
(status codes, results, log lines) as data, so that both of our runtimes, on every backend, are
held to the same facts. One ``[[vector]]`` is one action:

``name``, ``from``
    An id, and the official test (or source) the facts come from.
``differs``
    Present where we deliberately differ: how the official runtime behaves and why we do not.
    The vector's expectations are then ours; docs/runtimes.md lists the same differences.
``code`` | ``code_lines`` | ``zip``
    Plain source; source assembled from lines; or a zip archive as ``{path: text}``.
``main``, ``init_env``, ``container_env``
    The /init ``main`` (default ``main``) and ``env``; the container's own environment (the
    stock invoker passes ``__OW_API_HOST`` there, with ``docker run -e``).
``init_body_json``
    A raw /init body instead of the one built from the fields above.
``init``, ``init_again``, ``no_init``
    Expected answers of /init (default: status 200) and of a second /init with the same body;
    ``no_init = true``: no /init at all (the runs go to an uninitialised container).
``runs``
    /run calls, in order: ``value`` | ``value_json``, ``context`` (top-level fields of the body,
    defaults: :data:`DEFAULT_CONTEXT`), ``timeout_s``, and either ``expect = "timeout"`` or
    ``"gone"`` (the call raises) or the answer's expectations.

Expectations (of an answer): ``status``; ``result`` | ``result_json`` (the whole JSON body);
``result_keys`` (an object with these keys); ``result_has`` / ``result_has_ci`` (substrings of
the body's string values, case-sensitive or not); ``logs``. Log expectations, over the lines of
one activation (up to its sentinels): ``stdout`` / ``stderr`` (the exact lines), ``stdout_has``,
``stderr_has``, ``any_has``, ``any_has_ci`` (substrings), ``stdout_text`` (the stream's text,
line breaks included, whatever way the engine split long lines).

Anywhere in a value, result or text, ``{"$repeat": [text, n]}`` (or ``[text, n, suffix]``)
stands for ``text * n + suffix``: large inputs stay small on disk.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from containers.backend import Container, ContainerGone, HttpResult, LogLine

VECTORS = Path(__file__).resolve().parent / "vectors"
FAMILY_KIND = {"python": "python:3.11", "nodejs": "nodejs:20"}
DEFAULT_CONTEXT = {
    "api_key": "corpus:key",
    "namespace": "guest",
    "action_name": "/guest/corpus",
    "action_version": "0.0.1",
    "activation_id": "0" * 32,
    "transaction_id": "1" * 32,
    "deadline": "4102444800000",
}
INIT_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 30.0
LOG_LIMIT_BYTES = 10 * 1024 * 1024
_KNOWN = {
    "name",
    "from",
    "differs",
    "code",
    "code_lines",
    "zip",
    "main",
    "init_env",
    "container_env",
    "init_body_json",
    "init",
    "init_again",
    "no_init",
    "runs",
}
_ANSWER = {"status", "result", "result_json", "result_keys", "result_has", "result_has_ci", "logs"}
_RUN = _ANSWER | {"value", "value_json", "context", "timeout_s", "expect"}
_LOGS = {"stdout", "stderr", "stdout_has", "stderr_has", "any_has", "any_has_ci", "stdout_text"}


@dataclass(frozen=True, slots=True)
class Vector:
    family: str
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def kind(self) -> str:
        return FAMILY_KIND[self.family]

    def __str__(self) -> str:
        return f"{self.family}:{self.name}"


def load(family: str) -> list[Vector]:
    """The vectors of one runtime family, checked for unknown fields and duplicate names."""
    with open(VECTORS / f"{family}.toml", "rb") as f:
        doc = tomllib.load(f)
    vectors = [Vector(family, v) for v in doc.get("vector", [])]
    seen: set[str] = set()
    for v in vectors:
        problems = _schema_problems(v.data)
        if problems or v.name in seen:
            raise ValueError(f"{family}.toml vector {v.data.get('name')!r}: {problems or 'dup'}")
        seen.add(v.name)
    return vectors


def _schema_problems(v: dict[str, Any]) -> list[str]:
    out = [f"unknown field {k!r}" for k in v if k not in _KNOWN]
    if "name" not in v or "from" not in v:
        out.append("needs name and from")
    sources = [k for k in ("code", "code_lines", "zip", "init_body_json") if k in v]
    if len(sources) != (0 if v.get("no_init") else 1):
        out.append(f"needs exactly one of code, code_lines, zip, init_body_json: {sources}")
    answers = [("init", v.get("init", {})), ("init_again", v.get("init_again", {}))]
    answers += [(f"runs[{i}]", r) for i, r in enumerate(v.get("runs", []))]
    for where, a in answers:
        allowed = _RUN if where.startswith("runs") else _ANSWER
        out += [f"{where}: unknown field {k!r}" for k in a if k not in allowed]
        out += [f"{where}.logs: unknown field {k!r}" for k in a.get("logs", {}) if k not in _LOGS]
    return out


def expand(value: Any) -> Any:
    """``value`` with every ``{"$repeat": [text, n(, suffix)]}`` replaced by its text."""
    if isinstance(value, dict):
        if set(value) == {"$repeat"}:
            text, n, *suffix = value["$repeat"]
            return str(text) * int(n) + (str(suffix[0]) if suffix else "")
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    return value


def zipped(files: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in files.items():
            zf.writestr(name, expand(text))
    return buf.getvalue()


def init_body(v: Vector) -> bytes:
    """The /init body the invoker would send for this vector's action."""
    d = v.data
    if "init_body_json" in d:
        return str(d["init_body_json"]).encode()
    if "zip" in d:
        code, binary = base64.b64encode(zipped(d["zip"])).decode(), True
    elif "code_lines" in d:
        code, binary = "\n".join(expand(line) for line in d["code_lines"]) + "\n", False
    else:
        code, binary = str(d["code"]), False
    value = {
        "name": "corpus",
        "main": d.get("main", "main"),
        "binary": binary,
        "code": code,
        "env": d.get("init_env", {}),
    }
    return json.dumps({"value": value}, ensure_ascii=False).encode()


def run_body(run: dict[str, Any]) -> bytes:
    """The /run body: the value plus the activation context as top-level string fields."""
    raw = run.get("value_json")
    value = json.loads(raw) if raw is not None else expand(run.get("value", {}))
    return json.dumps({"value": value, **DEFAULT_CONTEXT, **run.get("context", {})}).encode()


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [str(k), *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [json.dumps(value)]


def check_answer(where: str, expected: dict[str, Any], r: HttpResult) -> list[str]:
    """What differs between an answer and its expectations (empty: it matches)."""
    out: list[str] = []
    want_status = expected.get("status", 200)
    if r.status != want_status:
        out.append(f"{where}: status {r.status}, expected {want_status}; body {r.body[:300]!r}")
    try:
        body = json.loads(r.body)
    except ValueError:
        return [*out, f"{where}: body is not JSON: {r.body[:300]!r}"]
    if "result_json" in expected or "result" in expected:
        want = (
            json.loads(expected["result_json"])
            if "result_json" in expected
            else expand(expected["result"])
        )
        if body != want:
            out.append(f"{where}: result {_short(body)}, expected {_short(want)}")
    if keys := expected.get("result_keys"):
        missing = [k for k in keys if not isinstance(body, dict) or k not in body]
        if missing:
            out.append(f"{where}: result {_short(body)} lacks keys {missing}")
    text = "\n".join(_strings(body))
    for s in expected.get("result_has", []):
        if s not in text:
            out.append(f"{where}: result {_short(body)} does not contain {s!r}")
    for s in expected.get("result_has_ci", []):
        if s.lower() not in text.lower():
            out.append(f"{where}: result {_short(body)} does not contain {s!r} (any case)")
    return out


def check_logs(where: str, expected: dict[str, Any], lines: list[LogLine]) -> list[str]:
    out: list[str] = []
    texts = {s: [ln.text for ln in lines if ln.stream == s] for s in ("stdout", "stderr")}
    clean = {s: [t.removesuffix("\n") for t in ts] for s, ts in texts.items()}
    joined = {s: "\n".join(ts) for s, ts in clean.items()}
    for stream in ("stdout", "stderr"):
        if stream in expected and clean[stream] != expected[stream]:
            out.append(
                f"{where}: {stream} lines {_short(clean[stream])}, expected {expected[stream]}"
            )
        for s in expected.get(f"{stream}_has", []):
            if s not in joined[stream]:
                out.append(f"{where}: {stream} does not contain {s!r}: {_short(clean[stream])}")
    both = joined["stdout"] + "\n" + joined["stderr"]
    for s in expected.get("any_has", []):
        if s not in both:
            out.append(f"{where}: logs do not contain {s!r}: {_short(both)}")
    for s in expected.get("any_has_ci", []):
        if s.lower() not in both.lower():
            out.append(f"{where}: logs do not contain {s!r} (any case): {_short(both)}")
    if "stdout_text" in expected:
        want = expand(expected["stdout_text"])
        got = "".join(texts["stdout"])
        if got != want:
            out.append(f"{where}: stdout text of {len(got)} chars, expected {len(want)}")
    return out


async def _answer_logs(where: str, expected: dict[str, Any], c: Container) -> list[str]:
    if "logs" not in expected:
        return []
    lines, complete = await c.read_logs(LOG_LIMIT_BYTES, True)
    out = [] if complete else [f"{where}: the sentinels did not arrive"]
    return out + check_logs(where, expected["logs"], lines)


async def play(v: Vector, c: Container) -> list[str]:
    """Run one vector against a fresh container; returns the differences found."""
    d = v.data
    out: list[str] = []
    if not d.get("no_init"):
        body = init_body(v)
        init = d.get("init", {})
        r = await c.init(body, INIT_TIMEOUT_S)
        out += check_answer("init", init, r)
        if r.status != 200:
            return out + await _answer_logs("init", init, c)
    if "init_again" in d:
        again = await c.init(init_body(v), INIT_TIMEOUT_S)
        out += check_answer("init_again", d["init_again"], again)
    for i, run in enumerate(d.get("runs", [])):
        where = f"runs[{i}]"
        timeout_s = float(run.get("timeout_s", RUN_TIMEOUT_S))
        expect = run.get("expect")
        if expect in ("timeout", "gone"):
            error = TimeoutError if expect == "timeout" else ContainerGone
            try:
                r = await c.run(run_body(run), timeout_s)
            except error:
                continue
            out.append(f"{where}: expected {error.__name__}, got {r.status} {r.body[:200]!r}")
            continue
        if d.get("no_init") and i == 0:
            r = await _run_once_listening(c, run_body(run), timeout_s)
        else:
            r = await c.run(run_body(run), timeout_s)
        out += check_answer(where, run, r)
        # Every /run ends with the sentinels on both streams, whatever its answer.
        out += await _answer_logs(where, {"logs": {}, **run}, c)
    return out


async def _run_once_listening(c: Container, body: bytes, timeout_s: float) -> HttpResult:
    """/run on a container that may still be starting: with no /init first (which retries
    refused connections, as the invoker's does), a refused /run is retried here."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + INIT_TIMEOUT_S  # however long each refusal takes to come
    while True:
        try:
            return await c.run(body, timeout_s)
        except ContainerGone:
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(0.1)


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"
