"""Zip safety of the Node.js runtime's own zip reader (node in a child process): nothing of an
archive may land outside the action dir."""

from __future__ import annotations

import base64
import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.unit.containers.runtimes.test_python_runtime_zip import make_zip

NODE = shutil.which("node")

NODE_RUNTIME = Path(__file__).resolve().parents[4] / "containers" / "runtimes" / "node_runtime.js"


# -- the node runtime's own zip reader ------------------------------------------------------


def node_extract(dest: Path, data: bytes) -> dict[str, object]:
    script = (
        "const r = require(process.argv[1]);"
        "const buf = Buffer.from(process.argv[2], 'base64');"
        "try { console.log(JSON.stringify({ok: r.extractZip(buf, process.argv[3])})); }"
        "catch (e) {"
        "  console.log(JSON.stringify({error: String(e), unsafe: e instanceof r.UnsafeArchive}));"
        "}"
    )
    out = subprocess.run(
        [NODE, "-e", script, str(NODE_RUNTIME), base64.b64encode(data).decode(), str(dest)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_node_extracts_a_package(tmp_path: Path) -> None:
    data = make_zip(
        [
            ("package.json", b'{"main": "lib/entry.js"}', 0),
            ("lib/entry.js", b"exports.main = () => ({});", 0),
            ("lib/", b"", 0),
        ]
    )
    result = node_extract(tmp_path, data)
    assert sorted(result["ok"]) == ["lib/entry.js", "package.json"]  # type: ignore[arg-type]
    assert (tmp_path / "lib" / "entry.js").read_bytes() == b"exports.main = () => ({});"


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize(
    "entries",
    [
        [("../escape.js", b"x", 0)],
        [("/abs.js", b"x", 0)],
        [("link", b"/etc", stat.S_IFLNK | 0o777)],
    ],
)
def test_node_refuses_unsafe_entries(tmp_path: Path, entries: list[tuple[str, bytes, int]]) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    result = node_extract(dest, make_zip(entries))
    assert result.get("unsafe") is True, result
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "escape.js").exists()
