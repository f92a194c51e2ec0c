"""The process backend with real processes: runtimes, isolation, limits, logs, reaping."""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import textwrap
import time
import zipfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from containers import cgroups
from containers.backend import ContainerGone, ContainerSpec, HttpResult
from containers.cpu import CpuTimes, share_between
from containers.http import RuntimeClient
from containers.logfile import TRIM_BYTES
from containers.pool import ContainerPool, StemCell
from containers.process import backend as process_module
from containers.process.backend import (
    LOG_FILE,
    NODE_RUNTIME,
    ProcessBackend,
    ProcessContainer,
    process_start_time,
)
from containers.process.claim import PrefixInUse
from tests.procs import alive, freezer_dir, frozen
from whisk.clock import SystemClock

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")
_counter = itertools.count(1)


def new_prefix() -> str:
    return f"wskt{os.getpid()}x{next(_counter)}"


@pytest.fixture
def state_dir() -> AsyncIterator[Path]:
    # Outside /tmp, so that the private /tmp per container can be used.
    d = Path(tempfile.mkdtemp(prefix="owproc-", dir="/var/tmp"))
    yield d  # type: ignore[misc]
    shutil.rmtree(d, ignore_errors=True)


async def started(state_dir: Path, **kwargs: Any) -> ProcessBackend:
    b = ProcessBackend(state_dir / "state", new_prefix(), **kwargs)
    await b.start()
    return b


@pytest.fixture
async def backend(state_dir: Path) -> AsyncIterator[ProcessBackend]:
    b = await started(state_dir)
    yield b
    await b.close()
    await b.remove_leftovers()


class Maker:
    """Creates containers with fresh names and initialises them."""

    def __init__(self, backend: ProcessBackend) -> None:
        self.backend = backend

    async def __call__(
        self,
        code: str | bytes,
        kind: str = "python:3.11",
        memory_mb: int = 256,
        main: str = "main",
        env: dict[str, str] | None = None,
        expect: int = 200,
    ) -> ProcessContainer:
        name = f"{self.backend.name_prefix}_{next(_counter)}_guest_action"
        c = await self.backend.create(ContainerSpec(name, kind, memory_mb))
        r = await c.init(init_body(code, main, env), 30)
        assert r.status == expect, r
        return c


@pytest.fixture
def make(backend: ProcessBackend) -> Maker:
    return Maker(backend)


def init_body(code: str | bytes, main: str = "main", env: dict[str, str] | None = None) -> bytes:
    binary = isinstance(code, bytes)
    value = {
        "name": "action",
        "main": main,
        "binary": binary,
        "code": base64.b64encode(code).decode() if binary else code,
        "env": env or {},
    }
    return json.dumps({"value": value}).encode()


def run_body(params: Any = None, **context: str) -> bytes:
    ctx = {"activation_id": "a" * 32, "namespace": "guest", "deadline": "0", **context}
    return json.dumps({"value": {} if params is None else params, **ctx}).encode()


async def run(
    c: ProcessContainer, params: Any = None, timeout_s: float = 30, **ctx: str
) -> HttpResult:
    return await c.run(run_body(params, **ctx), timeout_s)


def result(r: HttpResult) -> Any:
    return json.loads(r.body)


def zipped(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return buf.getvalue()


def py(source: str) -> str:
    return textwrap.dedent(source).lstrip()


ECHO_PY = "def main(args):\n    return {'greeting': 'Hello ' + args.get('name', 'stranger')}\n"
HEALTH_JS = "function main(params) { return params; }"


# -- runtimes --------------------------------------------------------------------------------


async def test_python_cold_start_and_warm_runs(make: Maker) -> None:
    c = await make(ECHO_PY)
    assert result(await run(c, {"name": "World"})) == {"greeting": "Hello World"}
    for i in range(20):
        r = await run(c, {"name": str(i)})
        assert r.status == 200 and result(r) == {"greeting": f"Hello {i}"}
    assert c.pid > 0 and c.address[0] == "127.0.0.1"


async def test_python_context_is_exported_and_arrays_pass(make: Maker) -> None:
    c = await make(
        py("""
        import os
        def main(args):
            return [os.environ.get('__OW_ACTIVATION_ID'), os.environ.get('__OW_NAMESPACE'),
                    os.environ.get('INIT_ARG'), os.environ.get('__OW_ACTION_NAME')]
        """),
        env={"INIT_ARG": "x", "__OW_ACTION_NAME": "/guest/action"},
    )
    r = await run(c, activation_id="b" * 32)
    assert (r.status, result(r)) == (200, ["b" * 32, "guest", "x", "/guest/action"])


@needs_node
async def test_node_health_action(make: Maker) -> None:
    c = await make(HEALTH_JS, kind="nodejs:20")
    r = await run(c, {"a": 1, "b": [True, None]})
    assert (r.status, result(r)) == (200, {"a": 1, "b": [True, None]})


@needs_node
@pytest.mark.parametrize(
    "code",
    [
        "exports.main = (p) => ({x: p.x + 1});",
        "module.exports = function (p) { return {x: p.x + 1}; };",
        "async function main(p) { await new Promise(r => setTimeout(r, 5)); return {x: p.x + 1}; }",
        "const helper = require('path').join; function main(p) { return {x: p.x + 1}; }",
    ],
)
async def test_node_main_styles(make: Maker, code: str) -> None:
    c = await make(code, kind="nodejs:20")
    assert result(await run(c, {"x": 1})) == {"x": 2}


@needs_node
async def test_node_rejections_and_errors(make: Maker) -> None:
    rejected = await make(
        "function main() { return Promise.reject({error: 'nope'}); }", kind="nodejs:20"
    )
    r = await run(rejected)
    assert r.status == 200 and result(r) == {"error": {"error": "nope"}}
    thrown = await make("function main() { throw new Error('boom'); }", kind="nodejs:20")
    r = await run(thrown)
    assert r.status == 502 and "boom" in result(r)["error"]
    scalar = await make("function main() { return 42; }", kind="nodejs:20")
    r = await run(scalar)
    assert r.status == 502 and result(r) == {
        "error": "The action did not return a dictionary or array."
    }


async def test_python_zip_action_with_helper_and_virtualenv(make: Maker) -> None:
    code = zipped(
        {
            "__main__.py": py("""
                import helper, vendored
                def main(a):
                    return {'v': helper.V + vendored.W}
                """),
            "helper.py": "V = 'helper+'\n",
            "virtualenv/lib/python3.11/site-packages/vendored.py": "W = 'vendored'\n",
        }
    )
    c = await make(code)
    assert result(await run(c)) == {"v": "helper+vendored"}


@needs_node
async def test_node_zip_package(make: Maker) -> None:
    code = zipped(
        {
            "package.json": json.dumps({"name": "a", "main": "lib/entry.js"}),
            "lib/entry.js": "const h = require('./helper'); exports.main = (p) => ({v: h.v});",
            "lib/helper.js": "exports.v = 'from helper';",
        }
    )
    c = await make(code, kind="nodejs:20")
    assert result(await run(c)) == {"v": "from helper"}


async def test_unsafe_zip_fails_init(make: Maker) -> None:
    c = await make(zipped({"../evil.py": "x = 1\n", "__main__.py": ""}), expect=502)
    assert not (c.dir / "evil.py").exists()


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["python:3.11", pytest.param("nodejs:20", marks=needs_node)])
async def test_init_failure_is_502_with_logs(make: Maker, kind: str) -> None:
    code = "def main(args:\n  return {}\n" if kind.startswith("python") else "function main( {"
    c = await make(code, kind=kind, expect=502)
    lines, complete = await c.read_logs(1 << 20, True)
    assert complete
    assert any("SyntaxError" in ln.text for ln in lines)


@pytest.mark.parametrize("kind", ["python:3.11", pytest.param("nodejs:20", marks=needs_node)])
async def test_second_init_is_403_and_missing_code_too(
    make: Maker, backend: ProcessBackend, kind: str
) -> None:
    c = await make(ECHO_PY if kind.startswith("python") else HEALTH_JS, kind=kind)
    r = await c.init(init_body(ECHO_PY), 30)
    assert (r.status, result(r)) == (403, {"error": "Cannot initialize the action more than once."})
    fresh = await backend.create(ContainerSpec(f"{backend.name_prefix}_99_guest_x", kind, 256))
    r = await fresh.init(json.dumps({"value": {"main": "main"}}).encode(), 30)
    assert r.status == 403 and "no code" in result(r)["error"]


async def test_application_error_passes_through(make: Maker) -> None:
    c = await make("def main(a):\n    return {'error': 'bad input'}\n")
    r = await run(c)
    assert (r.status, result(r)) == (200, {"error": "bad input"})


async def test_exception_is_an_error_result_and_traceback_goes_to_stderr(make: Maker) -> None:
    # As the stock python launcher: HTTP 200 with {"error": ...} (an application error).
    c = await make("def main(a):\n    return 1 / 0\n")
    r = await run(c)
    assert (r.status, result(r)) == (200, {"error": "division by zero"})  # str(exception)
    lines, complete = await c.read_logs(1 << 20, True)
    assert complete and any(ln.stream == "stderr" and "Traceback" in ln.text for ln in lines)
    assert (await run(c)).status == 200  # the runtime survives


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("def main(a):\n    return 'text'\n", "did not return a dictionary or array"),
        ("def main(a):\n    return {'x': object()}\n", "not valid JSON"),
        ("def main(a):\n    return {'x': float('nan')}\n", "not valid JSON"),
    ],
)
async def test_bad_results_are_502(make: Maker, code: str, message: str) -> None:
    r = await run(await make(code))
    assert r.status == 502 and message in result(r)["error"]


async def test_huge_result_is_bounded(make: Maker, backend: ProcessBackend) -> None:
    c = await make("def main(a):\n    return {'x': 'y' * (2 * 1024 * 1024)}\n")
    r = await run(c)
    assert r.status == 200
    assert len(r.body) == backend.max_response_bytes + 1
    assert getattr(r, "length", 2 * 1024 * 1024 + 8) == 2 * 1024 * 1024 + 8
    again = await run(c)  # the connection (or a new one) still works
    assert again.status == 200


async def test_timeout(make: Maker) -> None:
    c = await make("import time\ndef main(a):\n    time.sleep(a.get('s', 0))\n    return {}\n")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(TimeoutError):
        await run(c, {"s": 5}, timeout_s=0.3)
    assert loop.time() - t0 < 1.5


async def test_crash_is_container_gone(make: Maker) -> None:
    c = await make("import os\ndef main(a):\n    os._exit(3)\n")
    with pytest.raises(ContainerGone):
        await run(c)
    for _ in range(100):
        if c.exit_status is not None:
            break
        await asyncio.sleep(0.02)
    assert c.exit_status == 3
    assert not await c.was_oom_killed()


GREEDY = "def main(a):\n    data = b'x' * (300 * 1024 * 1024)\n    return {'n': len(data)}\n"


async def test_memory_limit_kills_and_is_reported(make: Maker, backend: ProcessBackend) -> None:
    if not backend.cgroup_support.usable:
        pytest.skip(f"cgroups not usable: {backend.cgroup_support.reason}")
    c = await make(GREEDY, memory_mb=128)
    with pytest.raises(ContainerGone):
        await run(c)
    assert await c.was_oom_killed()
    await c.destroy()
    assert await c.was_oom_killed()  # still known after destroy


async def test_memory_limit_without_cgroups_is_rlimit(state_dir: Path) -> None:
    b = await started(state_dir, use_cgroups=False)
    try:
        c = await Maker(b)(GREEDY, memory_mb=128)
        r = await run(c)
        assert (r.status, result(r)) == (200, {"error": ""})  # str(MemoryError()), as stock
        lines, _ = await c.read_logs(1 << 20, True)
        assert any(ln.stream == "stderr" and "MemoryError" in ln.text for ln in lines)
        assert not await c.was_oom_killed()
    finally:
        await b.close()


HEAP_LIMIT_JS = (
    "function main() { return {bytes: require('v8').getHeapStatistics().heap_size_limit}; }"
)


@needs_node
async def test_node_heap_is_limited_without_cgroups(state_dir: Path) -> None:
    # No cgroup to enforce the memory limit: V8's own heap limit must (--max-old-space-size),
    # else node sizes its heap from the machine's memory (GBs) and ignores the action's limit.
    b = await started(state_dir, use_cgroups=False)
    try:
        c = await Maker(b)(HEAP_LIMIT_JS, kind="nodejs:20", memory_mb=128)
        heap_mb = result(await run(c))["bytes"] / 2**20
        assert heap_mb < 2 * 128, f"node's heap limit is {heap_mb:.0f} MiB for a 128 MB action"
    finally:
        await b.close()


# -- logs ------------------------------------------------------------------------------------


async def test_logs_are_cut_per_activation(make: Maker) -> None:
    c = await make(
        py("""
        import subprocess, sys
        print('loading')
        def main(a):
            print('out', a['n'])
            print('err', a['n'], file=sys.stderr)
            subprocess.run(['echo', 'echo %d' % a['n']], check=True)
            sys.stdout.write('no newline')
            return {}
        """)
    )
    for n in (1, 2):
        assert (await run(c, {"n": n})).status == 200
        lines, complete = await c.read_logs(1 << 20, True)
        assert complete
        got = [(ln.stream, ln.text) for ln in lines]
        expected = [("stdout", f"out {n}\n"), ("stderr", f"err {n}\n"), ("stdout", f"echo {n}\n")]
        if n == 1:
            expected.insert(0, ("stdout", "loading\n"))
        for item in expected:
            assert item in got
        assert ("stdout", "no newline") in got
        assert all("XXX_THE_END" not in ln.text for ln in lines)
        assert all(ln.time.endswith("Z") and len(ln.time) == 30 for ln in lines)


@needs_node
async def test_node_logs(make: Maker) -> None:
    c = await make(
        "function main(p) { console.log('hi', p.n); console.error('oops');"
        " require('child_process').execSync('echo sub', {stdio: 'inherit'}); return {}; }",
        kind="nodejs:20",
    )
    for n in (1, 2):
        await run(c, {"n": n})
        lines, complete = await c.read_logs(1 << 20, True)
        assert complete
        got = sorted((ln.stream, ln.text) for ln in lines)
        assert got == [("stderr", "oops\n"), ("stdout", f"hi {n}\n"), ("stdout", "sub\n")]


async def test_log_limit_skips_the_rest(make: Maker) -> None:
    c = await make(
        "def main(a):\n    for i in range(a['n']):\n        print('line', i)\n    return {}\n"
    )
    await run(c, {"n": 2000})
    lines, complete = await c.read_logs(2000, True)
    assert complete and 0 < len(lines) < 50
    await run(c, {"n": 1})
    lines, complete = await c.read_logs(2000, True)
    assert complete and [ln.text for ln in lines] == ["line 0\n"]


async def test_a_chatty_warm_container_keeps_only_its_unread_log_on_disk(make: Maker) -> None:
    c = await make("def main(a):\n    print('x' * 1000 * 1000)\n    return {}\n")
    for _ in range(8):
        assert (await run(c)).status == 200
        _, complete = await c.read_logs(2 << 20, True)
        assert complete
    st = os.stat(c.dir / LOG_FILE)
    assert st.st_size > 8_000_000  # everything was written ...
    assert st.st_blocks * 512 < 3 * TRIM_BYTES  # ... and the part already read given back


# -- isolation -------------------------------------------------------------------------------


async def test_cpu_pinning_is_seen_by_the_action(make: Maker) -> None:
    c = await make(
        py("""
        import os, threading
        def main(a):
            seen = []
            t = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))
            t.start(); t.join()
            return {'main': sorted(os.sched_getaffinity(0)), 'thread': seen[0]}
        """)
    )
    cores = sorted(os.sched_getaffinity(0))
    for core in cores[:2]:
        await c.assign_cores(frozenset({core}))
        assert result(await run(c)) == {"main": [core], "thread": [core]}
    await c.assign_cores(frozenset(cores))
    assert result(await run(c))["main"] == cores


async def test_pause_and_resume(make: Maker) -> None:
    c = await make(ECHO_PY)
    await c.pause()
    task = asyncio.create_task(run(c, {"name": "later"}))
    await asyncio.sleep(0.4)
    assert not task.done()
    await c.resume()
    r = await asyncio.wait_for(task, 10)
    assert result(r) == {"greeting": "Hello later"}


TMP_PROBE = py("""
    import os, tempfile
    def main(a):
        with tempfile.NamedTemporaryFile('w', delete=False, suffix='.txt') as f:
            f.write(a['me'])
        if a['private']:  # else /tmp is the host's, where no test may leave a file
            with open('/tmp/shared-name.txt', 'w') as g:
                g.write(a['me'])
        with open('relative.txt', 'w') as h:
            h.write(a['me'])
        tmp = tempfile.gettempdir()
        return {'cwd': os.getcwd(), 'tmpdir': tmp, 'temp': os.path.dirname(f.name),
                'shared': a['private'] and open('/tmp/shared-name.txt').read(),
                'home': os.environ['HOME'], 'listing': sorted(os.listdir(tmp))}
    """)


async def test_own_cwd_and_tmp_per_container_unsandboxed(state_dir: Path) -> None:
    """--sandbox none: each container's directories on the host (the sandbox's are tmpfs
    mounts of its own: test_sandbox.py)."""
    backend = await started(state_dir, sandbox=False)
    try:
        await _own_cwd_and_tmp(Maker(backend), backend)
    finally:
        await backend.close()


async def _own_cwd_and_tmp(make: Maker, backend: ProcessBackend) -> None:
    a, b = await make(TMP_PROBE), await make(TMP_PROBE)
    private = backend.private_tmp  # off for a checkout under /tmp, which it would hide
    ra = result(await run(a, {"me": "a", "private": private}))
    rb = result(await run(b, {"me": "b", "private": private}))
    assert ra["cwd"] == str(a.dir / "work") and rb["cwd"] == str(b.dir / "work")
    assert ra["tmpdir"] == str(a.dir / "tmp") and ra["temp"] == ra["tmpdir"]
    assert ra["home"] == ra["cwd"]
    assert (a.dir / "work" / "relative.txt").read_text() == "a"
    assert (b.dir / "work" / "relative.txt").read_text() == "b"
    again = result(await run(a, {"me": "a", "private": private}))
    own = [n for n in again["listing"] if n.endswith(".txt") and n != "shared-name.txt"]
    assert len(own) == 2  # the two runs of a; b's temp file is in b's directory
    assert len(list((b.dir / "tmp").glob("*.txt"))) >= 1
    if private:  # /tmp itself is private too
        assert (ra["shared"], rb["shared"], again["shared"]) == ("a", "b", "a")
        assert (a.dir / "tmp" / "shared-name.txt").read_text() == "a"


ENV_PROBE = py("""
    import os
    def main(a):
        with open('/proc/self/environ', 'rb') as f:
            initial = f.read().decode(errors='replace')
        parent = ''
        if os.getppid():  # 0 in a sandbox: its parent is outside its pid namespace
            with open('/proc/%d/environ' % os.getppid(), 'rb') as f:
                parent = f.read().decode(errors='replace')
        return {'env': dict(os.environ), 'initial': initial, 'parent': parent}
    """)


async def test_action_sees_none_of_the_invokers_environment(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_TEST_VAR", "kafka-password")
    b = await started(state_dir)
    try:
        c = await Maker(b)(ENV_PROBE)
        r = result(await run(c))
        assert "SECRET_TEST_VAR" not in r["env"]
        assert "kafka-password" not in json.dumps(r)
        assert set(r["env"]) <= {"PATH", "HOME", "LANG", "TMPDIR", "TEMP", "TMP"} | {
            k for k in r["env"] if k.startswith("__OW_")
        }
    finally:
        await b.close()


async def test_blackbox_is_not_supported(backend: ProcessBackend) -> None:
    assert not backend.supports("blackbox")
    assert backend.supports("python:3.11")
    with pytest.raises(ValueError):
        await backend.create(ContainerSpec(f"{backend.name_prefix}_1_guest_bb", "blackbox", 256))


async def test_destroy_is_idempotent_and_cleans_up(make: Maker) -> None:
    c = await make(ECHO_PY)
    pid, cg, d = c.pid, c.cgroup, c.dir
    await c.destroy()
    await c.destroy()
    assert not d.exists()
    assert await wait_until(lambda: not alive(pid), 5)
    if cg is not None:
        assert not cg.exists()
    with pytest.raises(ContainerGone):
        await run(c)


async def test_a_dead_zygote_is_restarted(make: Maker, backend: ProcessBackend) -> None:
    c = await make(ECHO_PY)
    assert backend._zygote is not None
    os.kill(backend._zygote.pid, signal.SIGKILL)
    with pytest.raises((ContainerGone, TimeoutError)):
        for _ in range(50):
            await run(c, timeout_s=2)
            await asyncio.sleep(0.05)
    fresh = await make(ECHO_PY)
    assert result(await run(fresh, {"name": "again"})) == {"greeting": "Hello again"}


# -- leftovers and reaping -------------------------------------------------------------------

CHILD_SCRIPT = """
import asyncio, json, sys
sys.path.insert(0, {root!r})
from containers.backend import ContainerSpec
from containers.process.backend import ProcessBackend

async def main():
    b = ProcessBackend({state!r}, {prefix!r})
    await b.start()
    pids = []
    for i, kind in enumerate({kinds!r}):
        c = await b.create(ContainerSpec({prefix!r} + '_%d_guest_x' % i, kind, 128))
        code = {code!r} if kind.startswith('py') else {js!r}
        body = {{"value": {{"main": "main", "code": code}}}}
        assert (await c.init(json.dumps(body).encode(), 30)).status == 200
        pids.append(c.pid)
    print(json.dumps({{"zygote": b._zygote.pid, "pids": pids}}), flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def wait_until(cond: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.05)
    return cond()


async def test_kill_9_of_the_invoker_leaves_no_action_behind(state_dir: Path) -> None:
    prefix = new_prefix()
    state = state_dir / "state"
    kinds = ["python:3.11", "python:3.11"] + (["nodejs:20"] if NODE else [])
    script = CHILD_SCRIPT.format(
        root=str(ROOT), state=str(state), prefix=prefix, kinds=kinds,
        code=py("""
            import subprocess
            child = subprocess.Popen(['sleep', '600'])
            def main(a):
                return {}
            """),
        js="require('child_process').spawn('sleep', ['600']); function main() { return {}; }",
    )  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        info = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        pids = [info["zygote"], *info["pids"]]
        assert all(alive(p) for p in pids)
        proc.kill()  # SIGKILL: no cleanup of any kind in the "invoker"
        await proc.wait()
        assert await wait_until(lambda: not any(alive(p) for p in pids), 10), "containers survived"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    # The `sleep 600` grandchildren: in the containers' cgroups, or adopted and killed by the
    # zygote (subreaper) on its way out.
    b = ProcessBackend(state, prefix)
    await b.start()
    try:
        left = await b.remove_leftovers()
        assert left >= len(kinds)
        assert not [d for d in state.iterdir() if d.is_dir() and d.name.startswith(prefix + "_")]
        if b.cgroup_support.usable:
            assert b.cgroup_support.memory_parent is not None
            mine = [
                d for d in os.listdir(b.cgroup_support.memory_parent) if d.startswith(prefix + "_")
            ]
            live_spares = f"{prefix}_spare_{b._zygote.tag if b._zygote else ''}_"
            assert all(d.startswith(live_spares) for d in mine), mine
    finally:
        await b.close()
    assert await wait_until(lambda: not processes_under(state), 5), processes_under(state)


def processes_under(directory: Path) -> list[int]:
    """Live processes whose working directory is inside ``directory``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and alive(int(entry)):
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            if cwd.startswith(str(directory)):
                found.append(int(entry))
    return found


async def test_a_second_backend_with_the_same_prefix_is_refused(state_dir: Path) -> None:
    """Start-up removes whatever carries the prefix: a second live backend with it (a second
    invoker given the same name) must not start and kill the first one's containers."""
    b = await started(state_dir)
    try:
        c = await Maker(b)(ECHO_PY)
        second = ProcessBackend(state_dir / "other", b.name_prefix)
        with pytest.raises(PrefixInUse, match=b.name_prefix):
            await second.start()
        assert alive(c.pid)
        assert result(await run(c, {"name": "still"})) == {"greeting": "Hello still"}
    finally:
        await b.close()
    third = ProcessBackend(state_dir / "other", b.name_prefix)  # free once the first stopped
    await third.start()
    await third.close()


async def test_remove_leftovers_never_kills_unrelated_processes(state_dir: Path) -> None:
    b = await started(state_dir)
    bystander = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        c = await Maker(b)(ECHO_PY)
        meta_path = c.dir / "container.json"
        meta = json.loads(meta_path.read_text())
        # A stale record pointing at someone else's pid (with its real start time even).
        meta["pid"], meta["start_time"] = bystander.pid, process_start_time(bystander.pid)
        meta_path.write_text(json.dumps(meta))
        other = ProcessBackend(b.state_dir, b.name_prefix)
        other.cgroup_support = b.cgroup_support
        assert await other.remove_leftovers() >= 1
        assert bystander.returncode is None and alive(bystander.pid), "a bystander was killed"
        assert not c.dir.exists()
    finally:
        bystander.kill()
        await bystander.wait()
        await b.close()


POOL_SCRIPT = """
import asyncio, json, sys
sys.path.insert(0, {root!r})
from containers.pool import ContainerPool, StemCell
from containers.process.backend import ProcessBackend
from whisk.clock import SystemClock

async def main():
    b = ProcessBackend({state!r}, {prefix!r})
    await b.start()
    cells = tuple(StemCell(kind, 128, 1) for kind in {kinds!r})
    pool = ContainerPool(b, user_memory_mb=4096, clock=SystemClock(), name_prefix={prefix!r},
                         stem_cells=cells)
    await pool.start()
    await asyncio.gather(*(s.ready for s in pool.slots.values()))
    print(json.dumps([s.container.pid for s in pool.slots.values()]), flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to freeze processes")
async def test_restart_after_kill_9_while_old_containers_cannot_exit_yet(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """kill -9 of an invoker whose prewarmed containers are stuck exiting (frozen, so SIGKILL
    waits, as for a process in uninterruptible sleep): the next run with the same prefix
    prewarms the same kinds at once, usable, without "busy" errors; the stuck cgroups go in
    the background once their processes can exit."""
    support = cgroups.probe(new_prefix())
    if freezer_dir() is None or support.version != 1 or support.memory_parent is None:
        pytest.skip("needs the cgroup v1 freezer and memory cgroups")
    parent = support.memory_parent
    prefix, state = new_prefix(), state_dir / "state"
    kinds = ["python:3.11"] + (["nodejs:20"] if NODE else [])
    script = POOL_SCRIPT.format(root=str(ROOT), state=str(state), prefix=prefix, kinds=kinds)
    host = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE
    )
    pool: ContainerPool | None = None
    try:
        assert host.stdout is not None
        pids = json.loads(await asyncio.wait_for(host.stdout.readline(), 60))
        old = [d for d in os.listdir(parent) if d.startswith(prefix + "_") and "prewarm" in d]
        assert len(old) == len(kinds), old
        with frozen(pids, f"{prefix}_frozen") as thaw:
            host.kill()  # SIGKILL: its zygote goes, its frozen containers cannot exit yet
            await host.wait()
            caplog.set_level(logging.INFO)
            b = ProcessBackend(state, prefix)
            await b.start()
            cells = tuple(StemCell(kind, 128, 1) for kind in kinds)
            pool = ContainerPool(
                b, user_memory_mb=4096, clock=SystemClock(), name_prefix=prefix, stem_cells=cells
            )
            await pool.start()
            await asyncio.gather(*(s.ready for s in pool.slots.values() if s.ready is not None))
            problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert not problems, problems
            assert len(pool.slots) == len(kinds)
            for slot in pool.slots.values():
                assert slot.container is not None, f"prewarm of {slot.kind} failed"
                code = ECHO_PY if slot.kind.startswith("python") else HEALTH_JS
                assert (await slot.container.init(init_body(code), 30)).status == 200
                r = await slot.container.run(run_body({"name": "x"}), 30)
                assert r.status == 200 and "x" in r.body.decode(), r
            assert all(alive(p) for p in pids), "frozen containers exit only once thawed"
            thaw()
            gone = lambda: not any((parent / d).exists() for d in old)  # noqa: E731
            assert await wait_until(gone, 15), "stuck cgroups not removed in the background"
    finally:
        if host.returncode is None:
            host.kill()
            await host.wait()
        if pool is not None:
            await pool.close()
            await pool.backend.close()
        await ProcessBackend(state, prefix).remove_leftovers()


# -- the GPU pool hook (runtime in `serve` mode, with a stand-in project root) ---------------


async def serve_runtime(root: Path, cwd: Path) -> tuple[asyncio.subprocess.Process, RuntimeClient]:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    runtime = ROOT / "containers" / "runtimes" / "python_runtime.py"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-B", str(runtime), "serve", "--listen-fd", str(sock.fileno()),
        "--project-root", str(root), cwd=cwd, pass_fds=(sock.fileno(),),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    sock.close()
    return proc, RuntimeClient("127.0.0.1", port)


@pytest.mark.parametrize("has_client", [True, False])
async def test_gpu_pool_hook(tmp_path: Path, has_client: bool) -> None:
    root, cwd = tmp_path / "root", tmp_path / "work"
    (root / "gpu").mkdir(parents=True)
    cwd.mkdir()
    (root / "gpu" / "__init__.py").write_text("")
    if has_client:
        client_py = "CALLS = []\ndef install(address):\n    CALLS.append(address)\n"
        (root / "gpu" / "client.py").write_text(client_py)
    code = "import gpu.client\ndef main(a):\n    return {'calls': gpu.client.CALLS}\n"
    proc, client = await serve_runtime(root, cwd)
    try:
        r = await client.post_init(init_body(code, env={"__OW_GPU_POOL": "unix:/x.sock"}), 30)
        if has_client:
            assert r.status == 200, r
            ran = await client.post_run(run_body(), 30)
            assert json.loads(ran.body) == {"calls": ["unix:/x.sock"]}
        else:
            assert r.status == 502
            assert "GPU pool client could not be installed" in json.loads(r.body)["error"]
    finally:
        client.close()
        proc.kill()
        await proc.wait()


async def test_invoker_packages_are_not_importable(make: Maker) -> None:
    c = await make(
        py("""
        import importlib.util
        def main(a):
            names = ('invoker', 'containers', 'json')
            return {n: importlib.util.find_spec(n) is not None for n in names}
        """)
    )
    assert result(await run(c)) == {"invoker": False, "containers": False, "json": True}


USER_PROBE_PY = py("""
    import os, signal
    def main(a):
        try:
            os.kill(a['invoker'], 0)
            signal_ok = True
        except PermissionError:
            signal_ok = False
        try:
            open('/proc/%d/environ' % a['invoker'], 'rb').read()
            environ_ok = True
        except PermissionError:
            environ_ok = False
        open('own.txt', 'w').write('x')
        return {'uid': os.getuid(), 'signal': signal_ok, 'environ': environ_ok}
    """)
USER_PROBE_JS = """
const fs = require('fs');
function main(a) {
  let signal = true, environ = true;
  try { process.kill(a.invoker, 0); } catch (e) { signal = false; }
  try { fs.readFileSync('/proc/' + a.invoker + '/environ'); } catch (e) { environ = false; }
  fs.writeFileSync('own.txt', 'x');
  return {uid: process.getuid(), signal, environ};
}
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")
@pytest.mark.parametrize("kind", ["python:3.11", pytest.param("nodejs:20", marks=needs_node)])
async def test_actions_can_run_as_another_user(state_dir: Path, kind: str) -> None:
    b = await started(state_dir, user="nobody", sandbox=False)
    try:
        code = USER_PROBE_PY if kind.startswith("python") else USER_PROBE_JS
        c = await Maker(b)(code, kind=kind)
        r = result(await run(c, {"invoker": os.getpid()}))
        assert r == {"uid": b.user[0] if b.user else -1, "signal": False, "environ": False}
        assert (c.dir / "work" / "own.txt").read_text() == "x"
    finally:
        await b.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")
@needs_node
async def test_nodejs_runs_as_another_user_when_the_project_is_private(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A clone under ``mktemp -d`` (mode 700): the action user cannot read the runtime's file,
    nor traverse the state dir; the runtime still starts (it comes on stdin)."""
    assert state_dir.stat().st_mode & 0o077 == 0, "mkdtemp makes a private directory"
    runtime = state_dir / "project" / "containers" / "runtimes" / NODE_RUNTIME.name
    runtime.parent.mkdir(parents=True)
    shutil.copy(NODE_RUNTIME, runtime)
    monkeypatch.setattr(process_module, "NODE_RUNTIME", runtime)
    b = await started(state_dir, user="nobody", sandbox=False)
    assert f"cannot traverse {state_dir}:" in caplog.text  # said once, at start
    try:
        c = await Maker(b)(USER_PROBE_JS, kind="nodejs:20")
        r = result(await run(c, {"invoker": os.getpid()}))
        assert r == {"uid": b.user[0] if b.user else -1, "signal": False, "environ": False}
        assert (c.dir / "work" / "own.txt").read_text() == "x"
    finally:
        await b.close()


# -- CPU accounting (the scheduler's CPU shares) ---------------------------------------------

SPIN_PY = py("""
    import subprocess, sys, time
    BURN = "import time\\nend = time.process_time() + %s\\nwhile time.process_time() < end: pass"
    def main(a):
        if a.get("child"):
            subprocess.run([sys.executable, "-c", BURN % a["cpu"]], check=True)
        else:
            exec(BURN % a["cpu"])
        time.sleep(a.get("sleep", 0))
        return {}
    """)


@pytest.mark.parametrize("use_cgroups", [True, False])
async def test_cpu_time_of_a_call_is_measured(state_dir: Path, use_cgroups: bool) -> None:
    """A call's CPU time (the container's, children included) is what it burnt; a call
    that sleeps uses almost none."""
    b = await started(state_dir, use_cgroups=use_cgroups)
    try:
        c = await Maker(b)(SPIN_PY)
        for params, low, high in (
            ({"cpu": 0.3}, 0.28, 0.45),
            ({"cpu": 0.3, "child": True}, 0.28, 0.6),
            ({"cpu": 0.0, "sleep": 0.5}, 0.0, 0.05),
        ):
            before = (await c.cpu_times()).used
            assert (await run(c, params)).status == 200
            used = (await c.cpu_times()).used - before
            assert low <= used <= high, (params, used)
        await c.destroy()
        assert await c.cpu_times() is None
    finally:
        await b.close()
        await b.remove_leftovers()


@pytest.mark.parametrize("use_cgroups", [True, False])
async def test_cpu_time_of_a_running_call_advances_while_it_runs(
    state_dir: Path, use_cgroups: bool
) -> None:
    """The invoker samples running calls (the misprediction guard): a CPU-bound call's
    counter moves during /run, not only when it ends, and reads as CPU-bound."""
    b = await started(state_dir, use_cgroups=use_cgroups)
    try:
        c = await Maker(b)(SPIN_PY)
        before = await c.cpu_times()
        readings: list[tuple[float, CpuTimes]] = []

        async def sample() -> None:
            for _ in range(2):
                await asyncio.sleep(0.4)
                readings.append((time.perf_counter(), await c.cpu_times()))

        r, _ = await asyncio.gather(run(c, {"cpu": 1.5}), sample())
        assert r.status == 200
        after = await c.cpu_times()
        (t1, first), (t2, second) = readings
        assert before.used < first.used < second.used < after.used, (before, readings, after)
        assert share_between(first, second, t2 - t1) >= 0.7, (readings, t2 - t1)
    finally:
        await b.close()
        await b.remove_leftovers()


async def test_cpu_wait_of_calls_sharing_a_core_is_measured(make: Maker) -> None:
    """Two CPU-bound calls pinned to one core: each waits for the CPU about as long as it
    runs, and its CPU time over the rest of its time says it is CPU-bound."""
    core = max(os.sched_getaffinity(0))
    a, b = await make(SPIN_PY), await make(SPIN_PY)
    for c in (a, b):
        await c.assign_cores(frozenset({core}))
    before = [await c.cpu_times() for c in (a, b)]
    t0 = time.perf_counter()
    await asyncio.gather(run(a, {"cpu": 0.4}), run(b, {"cpu": 0.4}))
    wall = time.perf_counter() - t0
    for c, was in zip((a, b), before, strict=True):
        now = await c.cpu_times()
        used, waited = now.used - was.used, now.waited - was.waited
        assert waited >= 0.1, (used, waited, wall)
        assert used / (wall - waited) >= 0.7, (used, waited, wall)
