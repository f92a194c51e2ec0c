"""What only the process backend does, with real processes: its zygote (restarted when it
dies, and everything killed with the invoker), its directories, logs on disk and cgroups, a
run without cgroups, users, the host-wide claim of its name prefix, and the GPU pool hook of
its runtime. The contract every backend fulfils (runtimes, errors, limits, logs, pause, CPU
time, removal) runs against this backend in ``test_backend_contract.py``."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import socket
import sys
from pathlib import Path

import pytest

from containers import cgroups
from containers.backend import ContainerGone, ContainerSpec
from containers.http import RuntimeClient
from containers.logfile import TRIM_BYTES
from containers.pool import ContainerPool, StemCell
from containers.process import backend as process_module
from containers.process.backend import LOG_FILE, NODE_RUNTIME, ProcessBackend, process_start_time
from containers.process.claim import PrefixInUse
from tests.integration.containers import backends
from tests.integration.containers import test_backend_contract as contract
from tests.integration.containers.backends import (
    ECHO_PY,
    GREEDY,
    HEALTH_JS,
    NODE,
    ROOT,
    Maker,
    init_body,
    needs_node,
    new_prefix,
    py,
    result,
    run,
    run_body,
    started,
    wait_until,
    zipped,
)
from tests.procs import alive, freezer_dir, frozen, nice_orders_one_core, scheduling_of
from whisk.clock import SystemClock

# The process backend's fixtures: a state directory, a started backend, a Maker for it.
state_dir, backend, make = backends.state_dir, backends.backend, backends.make

# -- runtimes --------------------------------------------------------------------------------


async def test_unsafe_zip_fails_init(make: Maker) -> None:
    c = await make(zipped({"../evil.py": "x = 1\n", "__main__.py": ""}), expect=502)
    assert not (c.dir / "evil.py").exists()


# -- without cgroups: limits and CPU time ------------------------------------------------------


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


async def test_cpu_time_of_a_call_is_measured_without_cgroups(state_dir: Path) -> None:
    """From the processes' own accounting (``/proc``) instead of a cgroup's: the contract's
    scenario (test_backend_contract.py::test_cpu_time_of_a_call_is_measured)."""
    b = await started(state_dir, use_cgroups=False)
    try:
        await contract.cpu_time_of_a_call(Maker(b), contract.BACKENDS["process"].cpu_cases)
    finally:
        await b.close()
        await b.remove_leftovers()


async def test_cpu_time_of_a_running_call_advances_without_cgroups(state_dir: Path) -> None:
    b = await started(state_dir, use_cgroups=False)
    try:
        await contract.cpu_time_of_a_running_call(Maker(b))
    finally:
        await b.close()
        await b.remove_leftovers()


async def test_cpu_weight_without_cgroups_is_the_nice_value(state_dir: Path) -> None:
    """The contract's scenario (test_backend_contract.py) by each thread's nice value, with
    the invoker started under SCHED_IDLE (as a CI job may be), where the kernel ignores nice
    values: its containers run in the normal class. Skipped, saying why, on a host whose
    scheduler does not order two plain processes on one core by nice value either."""
    core = max(os.sched_getaffinity(0))
    honoured, control = await asyncio.to_thread(
        nice_orders_one_core, core, process_module.nice_of(1000), process_module.nice_of(10)
    )
    if not honoured:
        pytest.skip(
            f"this host's scheduler ignores nice values: {control}; {scheduling_of(os.getpid())}"
        )
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # this thread: it forks
    try:
        b = await started(state_dir, use_cgroups=False)
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    try:
        make = Maker(b)
        try:
            await contract.cpu_weight_orders_a_shared_core(make)
        except AssertionError as e:
            seen = [scheduling_of(p) for p in (b._zygote.pid, *(c.pid for c in make.made))]
            raise AssertionError(f"{e}; control: {control}; zygote, containers: {seen}") from e
        c = await Maker(b)(ECHO_PY)
        # As on CI's host, where containers were forked before the zygote left SCHED_IDLE:
        os.sched_setscheduler(c.pid, os.SCHED_IDLE, os.sched_param(0))
        await c.set_cpu_weight(1)
        assert os.getpriority(os.PRIO_PROCESS, c.pid) == process_module.nice_of(1) == 19
        assert os.sched_getscheduler(c.pid) == os.SCHED_OTHER
    finally:
        await b.close()
        await b.remove_leftovers()


async def test_memory_usage_without_cgroups_is_the_resident_memory(state_dir: Path) -> None:
    b = await started(state_dir, use_cgroups=False)
    try:
        await contract.memory_usage_follows_what_it_holds(Maker(b))
    finally:
        await b.close()
        await b.remove_leftovers()


# -- logs ------------------------------------------------------------------------------------


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


async def test_blackbox_is_not_supported(backend: ProcessBackend) -> None:
    assert not backend.supports("blackbox")
    assert backend.supports("python:3.11")
    with pytest.raises(ValueError):
        await backend.create(ContainerSpec(f"{backend.name_prefix}_1_guest_bb", "blackbox", 256))


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


async def test_a_create_the_moment_the_zygote_dies_is_made_by_a_fresh_one(
    make: Maker, backend: ProcessBackend
) -> None:
    # No await between the kill and the create: the backend has not yet read the zygote's
    # end of its channel, so it hands the request to the dead one, which never answers.
    await make(ECHO_PY)
    dead = backend._zygote
    assert dead is not None
    os.kill(dead.pid, signal.SIGKILL)
    fresh = await make(ECHO_PY)
    assert backend._zygote is not dead
    assert result(await run(fresh, {"name": "after"})) == {"greeting": "Hello after"}


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
