"""The committed seed corpus: real forms of every input, plus the poison seen in the wild.

    python -m tests.fuzz.seeds      # rewrites tests/fuzz/corpus/<target>/<name>

Seeds are what the fuzzer mutates first; starting from every valid form of each format (and
from the inputs that once broke the invoker) lets it reach every field quickly. Inputs that
atheris once found crashing are kept beside them under their own names (for example
``activation/lone_surrogate_in_name``); this script leaves those alone.
"""

from __future__ import annotations

import base64
import io
import zipfile
from pathlib import Path
from typing import Any

from tests.fuzz.targets import ACTION
from whisk.protocol import QualifiedName, dumps
from whisk.protocol.controller import GUEST, action_document, activation_message
from whisk.protocol.messages import InvokerInstance, combined_ack, completion_ack, result_ack
from whisk.protocol.messages import ping_message as ping_json
from whisk.protocol.runtime import init_body, run_body

CORPUS = Path(__file__).resolve().parent / "corpus"
AID = "5a64676ec8aa46b5a4676ec8aaf6b5d2"
TRANSID = ["K3uS0t1qQ9bVvJc2mO0fLZxX8rP4yT7a", 1717000000123]


def _nested(depth: int, leaf: Any = None) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def _deep_transid(depth: int) -> list[Any]:
    value: list[Any] = ["t", 1]
    for _ in range(depth):
        value = ["t", 1, value]
    return value


# Wrong in each way that once broke a parser, as raw JSON text (written without an encoder,
# so nesting and numbers can go beyond what any encoder or parser accepts).
VARIANTS: dict[str, bytes] = {
    "number": b"7",
    "array": b"[1,[2]]",
    "object": b'{"a":{}}',
    "null": b"null",
    "nested": b"[" * 300 + b"]" * 300,
    "too_deep": b"[" * 1030 + b"]" * 1030,  # beyond the parser's 1024 levels
    "huge_number": b"1" + b"0" * 400,
    "bad_utf8": b'"\xff\xfe"',
    "surrogate": b'"\\ud800"',  # a lone surrogate, JSON-escaped
}
HOLE = "@@POISON@@"


def poisoned(good: dict[str, Any], paths: list[str]) -> dict[str, bytes]:
    """``good`` with each dotted path in turn replaced by each variant."""
    out = {}
    for path in paths:
        doc: Any = {k: (dict(v) if isinstance(v, dict) else v) for k, v in good.items()}
        obj = doc
        *parents, last = path.split(".")
        for part in parents:
            obj[part] = dict(obj[part])
            obj = obj[part]
        obj[last] = HOLE
        text = dumps(doc)
        for name, variant in VARIANTS.items():
            out[f"{path}={name}"] = text.replace(f'"{HOLE}"'.encode(), variant)
    return out


def activations() -> dict[str, bytes]:
    base = activation_message(
        QualifiedName("guest", "hello", "0.0.1"),
        "1-8c4f2d0e5a1b7c9d3e6f0a2b4c6d8e0f",
        start_ms=1717000000123,
        activation_id=AID,
        transid=list(TRANSID),
        content={"name": "World"},
    ).to_json()
    full = dict(
        base,
        action={"path": "guest/pkg", "name": "hello", "version": "0.0.1", "binding": "b/p"},
        transid=[*TRANSID, True, ["sid_parent", 1]],
        initArgs=["secret"],
        lockedArgs={"secret": "noop"},
        content={"secret": "s", "x": [1, 2.5, None, True, {"y": "é"}]},
        cause="0a1b2c3d4e5f",
        traceContext={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        user={**GUEST.to_json(), "limits": {"maxPayloadSize": "1 MB", "maxActionMemory": 512}},
    )
    health = dict(
        base,
        transid=["sid_invokerHealth", 1717000000001],
        action={"path": "whisk.system", "name": "invokerHealthTestAction0"},
        revision=None,
        blocking=False,
    )
    health.pop("content", None)
    text = dumps(base)
    fields = [*full, "user.subject", "user.namespace", "user.namespace.name"]
    fields += ["user.authkey", "user.rights", "user.limits", "action.path", "action.name"]
    fields += ["rootControllerIndex.asString", "content.secret"]
    return {
        **poisoned(full, fields),
        "blocking_user": text,
        "all_fields": dumps(full),
        "health_action": dumps(health),
        "action_as_string": dumps(dict(base, action="guest/pkg/hello")),
        "deep_transid": dumps(dict(base, transid=_deep_transid(300))),
        "deep_content": dumps(dict(base, content={"a": _nested(900)})),
        "huge_number": text.replace(b'"blocking":true', b'"blocking":1' + b"0" * 400),
        "invalid_utf8": text.replace(b"World", b"W\xff\xfeorld"),
        "json_array": b"[" + text + b"]",
        "truncated": text[: len(text) // 2],
    }


def documents() -> dict[str, bytes]:
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("__main__.py", "def main(a):\n    return a\n")
    docs = {
        "python_inline": action_document("guest", "a", kind="python:3.11", code=b"def main(a): 1"),
        "nodejs_default": action_document("guest", "n", kind="nodejs:default", code=b"x=1"),
        "binary_zip": action_document(
            "guest", "z", kind="python:3.11", code=zipped.getvalue(), binary=True, main="run"
        ),
        "couch_attachment": action_document("guest", "big", kind="python:3.11", code=b"x" * 20000),
        "blackbox": action_document("guest", "b", kind="blackbox", image="openwhisk/example"),
        "in_package": action_document(
            "guest",
            "p",
            kind="python:3.11",
            code=b"def main(a): 1",
            package="pkg",
            parameters=[{"key": "k", "value": {"v": [1]}}],
        ),
    }
    out = {name: dumps(d) for name, d in docs.items()}
    inline = dict(docs["python_inline"], _rev="1-abc")
    inline["exec"] = {"kind": "python:3.11", "code": "def main(a): return a"}
    out["inline_code_string"] = dumps(inline)
    out["sequence"] = dumps(dict(inline, exec={"kind": "sequence", "components": ["/a/b"]}))
    paths = [k for k in inline if k != "exec"] + [f"exec.{k}" for k in ("kind", "code", "main")]
    paths += ["exec.binary", "exec.image", "limits.timeout", "limits.memory", "limits.logs"]
    return {**out, **poisoned(dict(inline, exec={**inline["exec"], "main": "m"}), paths)}


def runtime_bodies() -> tuple[dict[str, bytes], dict[str, bytes]]:
    from whisk.protocol import parse_activation

    msg = parse_activation(activations()["all_fields"])
    init = init_body(msg, ACTION, 1717000060123)
    binary = {"value": {**init["value"], "binary": True, "code": base64.b64encode(b"PK").decode()}}
    odd_env = {"value": {**init["value"], "env": {"A": {"b": [1]}, "C": None, "D": "x"}}}
    run = run_body(msg, ACTION, 1717000060123)
    inits = {"from_invoker": dumps(init), "binary": dumps(binary), "odd_env": dumps(odd_env)}
    inits.update(poisoned(init, [f"value.{k}" for k in init["value"]] + ["value.env.__OW_API_KEY"]))
    runs = {
        "from_invoker": dumps(run),
        "list_value": dumps({**run, "value": [1, 2]}),
        "deep_value": dumps({**run, "value": _nested(500)}),
    }
    runs.update(poisoned(run, list(run)))
    return inits, runs


def container_responses() -> dict[str, bytes]:
    return {
        "ok_object": b"\x00" + b'{"greeting":"Hello"}',
        "ok_array": b"\x00[1,2,3]",
        "app_error": b"\x00" + b'{"error":"boom"}',
        "dev_error": b"\x04" + b'{"error":{"deep":[1]}}',
        "not_json": b"\x04not json at all",
        "init_ok": b"\x00" + b'{"ok":true}',
    }


def acks() -> dict[str, bytes]:
    instance = InvokerInstance(0, 2 * 1024**3, "0").to_json()
    record = {"activationId": AID, "namespace": "guest", "response": {"statusCode": 0}}
    return {
        "result": dumps(result_ack(TRANSID, record)),
        "result_shrunk": dumps(result_ack(TRANSID, AID)),
        "completion": dumps(completion_ack(TRANSID, AID, False, instance)),
        "combined": dumps(combined_ack(TRANSID, record, True, instance)),
        "combined_shrunk": dumps(combined_ack(TRANSID, AID, False, instance)),
        "id_is_a_list": dumps(completion_ack(TRANSID, [AID], False, instance)),  # type: ignore[arg-type]
        **poisoned(combined_ack(TRANSID, record, True, instance), ["transid", "response"]),
        **poisoned(completion_ack(TRANSID, AID, False, instance), ["activationId", "instance"]),
        **poisoned(completion_ack(TRANSID, AID, False, instance), ["isSystemError"]),
    }


def pings() -> dict[str, bytes]:
    instance = InvokerInstance(3, 2 * 1024**3, "3", "node3").to_json(busy_memory_bytes=256)
    return {
        "enabled": dumps(ping_json(instance)),
        "disabled": dumps(ping_json(instance, enabled=False)),
        "minimal": b'{"name":{"instance":0,"userMemory":"1024 MB"}}',
        **poisoned(ping_json(instance), ["name", "name.instance", "name.userMemory", "isEnabled"]),
    }


def all_seeds() -> dict[str, dict[str, bytes]]:
    inits, runs = runtime_bodies()
    return {
        "activation": activations(),
        "action_document": documents(),
        "runtime_init": inits,
        "runtime_run": runs,
        "container_response": container_responses(),
        "ack": acks(),
        "ping": pings(),
    }


def main() -> None:
    for target, seeds in all_seeds().items():
        folder = CORPUS / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (folder / name).write_bytes(data)
        print(f"{target}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()
