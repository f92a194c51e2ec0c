"""docs/operations.md as a tested guide: every ``sh`` block of it runs, in order, against the
test services (Kafka, the CouchDB-API server), with ``ow-invoker front`` standing in for the
stock controller. Between the blocks, calls go to node 0; the drain-and-swap blocks must
lose none of them and run none twice.

Also here: action code of 16 KB or more, which the guide discusses (pouchdb-server ignores
``If-Match`` on attachment uploads; code kept inline in the document runs)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import signal
import socket
import time
import uuid
import zlib
from pathlib import Path

import aiohttp
import pytest

from front.identities import GUEST_AUTH, basic_auth
from harness.controller import running_invoker
from harness.processes import free_port, remove_container_cgroups
from invoker.config import InvokerConfig
from whisk.protocol import QualifiedName
from whisk.protocol.controller import action_document

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "operations.md"
SLEEPY = "import time\ndef main(a):\n    time.sleep(a.get('s', 1))\n    return {'i': a.get('i')}\n"


def shell_blocks() -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", GUIDE.read_text(), re.M | re.S)


def test_every_shell_block_is_one_the_guide_test_runs():
    # The guide test names the blocks by what they do; a new block must be added there.
    firsts = [b.strip().splitlines()[0] for b in shell_blocks()]
    assert len(firsts) == len(STEPS), firsts
    for first, (_, marker) in zip(firsts, STEPS, strict=True):
        assert marker in first, (first, marker)


# (name, a string of the block's first line), in the guide's order.
STEPS = [
    ("databases", "ow-invoker admin initdb"),
    ("front", 'mkdir -p "$STATE"'),
    ("invokers", "ow-invoker run --id 0"),
    ("first action", "curl -sf -u"),
    ("admin view", "ADMIN=("),
    ("drain node 0", "scripts/drain-invoker.sh"),
    ("successor", "ow-invoker run --id 0"),
]


def _home_of_invoker0(prefix: str) -> str:
    """An action name the front's balancer places on invoker 0 of 2 (its home invoker)."""
    for i in range(1000):
        name = f"{prefix}{i}"
        if zlib.crc32(f"guest/guest/{name}".encode()) % 2 == 0:  # (namespace, docid)
            return name
    raise AssertionError("no name found")


class Guide:
    def __init__(self, env: dict[str, str], state: Path) -> None:
        self.env = env
        self.state = state
        self.outputs: dict[str, str] = {}

    async def run(self, name: str, block: str, timeout_s: float) -> str:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-euo",
            "pipefail",
            "-c",
            block,
            cwd=ROOT,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            async with asyncio.timeout(timeout_s):
                out, _ = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(
                f"guide step {name!r} ran past {timeout_s} s\n{self.logs()}"
            ) from None
        text = out.decode(errors="replace")
        self.outputs[name] = text
        assert proc.returncode == 0, f"guide step {name!r} failed:\n{text}\n{self.logs()}"
        return text

    def logs(self) -> str:
        parts = []
        for log in sorted(self.state.glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def stop_all(self) -> None:
        """Stop what the guide started, as an operator would (SIGTERM: the invokers remove
        their containers), killing what is still up after 30 s; then remove what a killed
        invoker leaves (its containers' cgroups, under the guide's `wsk<hostname -s><id>`)."""
        pids = []
        for pid_file in self.state.glob("*.pid"):
            with contextlib.suppress(ValueError, ProcessLookupError):
                pid = int(pid_file.read_text())
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        host = socket.gethostname().split(".")[0]
        for instance in (0, 1):
            remove_container_cgroups(
                InvokerConfig(unique_name=host, instance=instance).container_prefix
            )


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, once its parent is gone, is reaped by init)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


async def _invoke(http, apihost: str, name: str, params: dict) -> str:
    url = f"{apihost}/api/v1/namespaces/_/actions/{name}?blocking=false"
    async with http.post(url, json=params) as r:
        body = await r.json()
        assert r.status == 202, body
        return body["activationId"]


async def _record(http, apihost: str, aid: str, timeout_s: float) -> dict:
    async with asyncio.timeout(timeout_s):
        while True:
            async with http.get(f"{apihost}/api/v1/namespaces/_/activations/{aid}") as r:
                if r.status == 200:
                    return await r.json()
            await asyncio.sleep(0.3)


async def test_operations_guide_runs_and_the_swap_loses_no_call(kafka, couchdb, tmp_path):
    blocks = shell_blocks()
    tag = uuid.uuid4().hex[:8]
    state = tmp_path / "state"
    apihost = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
        "KAFKA_HOSTS": kafka.bootstrap,
        "CONFIG_whisk_kafka_topics_prefix": f"g{tag}_",
        "OW_INVOKER_COUCHDB_URL": couchdb.url,
        "CONFIG_whisk_couchdb_username": couchdb.user,
        "CONFIG_whisk_couchdb_password": couchdb.password,
        "DB_PREFIX": f"g{tag}_",
        "CONFIG_whisk_invoker_username": "ops",
        "CONFIG_whisk_invoker_password": f"secret-{tag}",
        "APIHOST": apihost,
        "AUTH": GUEST_AUTH,
        "STATE": str(state),
        "NODE0_PORT": str(free_port()),
        "NODE1_PORT": str(free_port()),
        "PYTHONUNBUFFERED": "1",
    }
    guide = Guide(env, state)
    user_auth = {"Authorization": basic_auth(GUEST_AUTH)}
    admin_auth = {"Authorization": basic_auth(f"ops:secret-{tag}")}
    try:
        out = await guide.run("databases", blocks[0], 180)
        assert re.search(r"^[0-9a-f-]{36}:\S+$", out, re.M), out  # user create printed a key
        assert '"allowedKinds"' in out or "allowedKinds" in out
        await guide.run("front", blocks[1], 60)
        out = await guide.run("invokers", blocks[2], 180)
        assert '"invoker0/' in out and '"invoker1/' in out and out.count('"up"') == 2, out
        out = await guide.run("first action", blocks[3], 60)
        assert '"hi": "ops"' in out or '"hi":"ops"' in out, out
        out = await guide.run("admin view", blocks[4], 30)
        assert '"queuedTotal"' in out and '"byAction"' in out and "invoker_queue_length" in out
        assert '"stretchEdges"' in out  # /scheduler

        async with aiohttp.ClientSession(headers=user_auth) as http:
            name = _home_of_invoker0("sleepy")
            async with http.put(
                f"{apihost}/api/v1/namespaces/_/actions/{name}?overwrite=true",
                json={"exec": {"kind": "python:3.11", "code": SLEEPY}},
            ) as r:
                assert r.status == 200, await r.text()
            # Work in flight on node 0 when the drain begins: one running, three waiting.
            before = [await _invoke(http, apihost, name, {"i": i, "s": 2}) for i in range(4)]
            node0 = f"http://127.0.0.1:{env['NODE0_PORT']}"
            async with asyncio.timeout(30):
                while True:
                    async with http.get(f"{node0}/activations", headers=admin_auth) as r:
                        view = await r.json()
                    if view["runningTotal"] == 1 and view["queuedTotal"] >= 1:
                        break
                    await asyncio.sleep(0.1)
            drain = asyncio.ensure_future(guide.run("drain node 0", blocks[5], 120))
            # Calls keep coming while node 0 drains: the controller sends them elsewhere.
            during = []
            while not drain.done():
                during.append(await _invoke(http, apihost, name, {"i": 100, "s": 0.1}))
                await asyncio.sleep(0.5)
            out = await drain
            assert "drained" in out and "is now disabled" in out, out
            await guide.run("successor", blocks[6], 120)
            after = [await _invoke(http, apihost, name, {"i": 200, "s": 0.1}) for _ in range(3)]
            records = {
                aid: await _record(http, apihost, aid, 90) for aid in before + during + after
            }
        assert all(r["response"]["success"] for r in records.values()), records
        assert len({r["activationId"] for r in records.values()}) == len(records)
        assert during, "calls were sent while node 0 drained"
        # Node 0 finished its calls before it stopped; nothing was handed back or re-run.
        log0 = (state / "invoker0.log").read_text()
        assert "handing back" not in log0 and "re-acknowledging" not in log0, log0[-3000:]
    finally:
        guide.stop_all()


async def test_code_of_16_kb_or_more(kafka, couchdb, tmp_path):
    """pouchdb-server ignores ``If-Match`` on attachment uploads (the stock controller's
    way) and answers 409; code kept inline (``CONFIG_whisk_db_maxInlineSize``) runs."""
    db = f"t{uuid.uuid4().hex[:8]}_probe"
    basic = {"Authorization": basic_auth(f"{couchdb.user}:{couchdb.password}")}
    async with aiohttp.ClientSession(headers=basic) as http:
        async with http.put(f"{couchdb.url}/{db}") as r:
            assert r.status in (201, 202)
        async with http.put(f"{couchdb.url}/{db}/guest%2Fbig", json={"a": 1}) as r:
            rev = (await r.json(content_type=None))["rev"]
        att = f"{couchdb.url}/{db}/guest%2Fbig/code"
        headers = {"If-Match": f'"{rev}"', "Content-Type": "application/octet-stream"}
        async with http.put(att, data=b"x" * 20_000, headers=headers) as r:
            assert r.status == 409  # CouchDB would take it; a stock controller gets this
        async with http.put(f"{att}?rev={rev}", data=b"x" * 20_000, headers=headers) as r:
            assert r.status in (201, 202)
        await http.delete(f"{couchdb.url}/{db}")

    async with running_invoker(kafka, couchdb, tmp_path) as (_, stub):
        filler = "# " + "x" * 64_000 + "\n"
        code = (filler + "def main(a):\n    return {'big': True}\n").encode()
        doc = action_document("guest", "big", kind="python:3.11", code=code)
        # What the controller writes with max-inline-size above the code's size.
        doc["exec"]["code"]["attachmentName"] = "mem:" + base64.urlsafe_b64encode(code).decode()
        rev = await stub.store.put(stub.config.whisks_db, doc)
        aid = await stub.invoke(QualifiedName("guest", "big", "0.0.1"), rev)
        acks = await stub.wait_completion(aid, timeout_s=60)
        assert acks[-1]["isSystemError"] is False
        record = await stub.record(aid)
        assert record["response"]["result"] == {"big": True}, record["response"]
