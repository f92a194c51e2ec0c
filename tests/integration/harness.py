"""Test actions for invokers under test; the invoker and the controller stub that drive
them are the project's own (``harness.controller``)."""

from __future__ import annotations

import base64
import io
import zipfile

PY_HELLO = b"""
import sys
def main(args):
    print("hello stdout")
    print("hello stderr", file=sys.stderr)
    return {"greeting": "Hello " + args.get("name", "stranger")}
"""
NODE_ECHO = b"function main(params) { console.log('node says hi'); return params; }"


def python_zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
