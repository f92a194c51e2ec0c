"""The contract of every container backend (:mod:`containers.backend`), run against each:
create, ``/init`` and ``/run`` of python and nodejs actions, their errors and limits, CPU
pinning and CPU time, pause and resume, logs cut per activation, the memory limit, a
crashing action, the environment an action sees, removal, and removing by name prefix, CPU
weights on a shared core, and the memory a container uses.

``BACKENDS`` lists the backends under the contract; each entry says how to start one for a
test and what only that backend can tell about its containers (how a crashed runtime's exit
status is read, what is left of a removed container, which environment variables its images
add). Every test runs on ``EVERY`` (the process backend, sandboxed as by default, and the
Docker backend on dockerd); those marked ``@on(*ALL)`` on ``podman`` too (the Docker backend
on Podman's API): the scenarios that exercise the engine (cpuset updates, pause, its log
file, exit status, OOM kills, removal) rather than the runtimes in its images, which are the
same on both engines. The Docker backend runs as production runs it (containers with no
network, reached from inside their network namespace); its tests are marked ``services``
(the suite's engines, see tests/integration/containers/backends.py).

The simulated backend (:mod:`containers.simulated`) is not under the contract: it runs no
action code (its ``/run`` answers from the call's simulated cost), see its own tests
(``tests/unit/containers/test_simulated.py``, ``tests/unit/invoker/test_simulate.py``).

What only one backend does (the process backend's zygote, directories, cgroups and users; the
Docker backend's engine requests, images, reach modes and log sources) is tested in
``test_backend.py`` and ``test_backend.py``, which run some of the scenarios
here again with other options (no cgroups; the engine's logs endpoint).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from containers.backend import ContainerBackend, ContainerGone, ContainerSpec
from containers.cgroups import DEFAULT_CPU_WEIGHT
from containers.cpu import CpuTimes, share_between
from containers.docker.backend import LISTEN_ENV
from containers.docker.engine import EngineError
from containers.process.backend import ProcessBackend
from tests.integration.containers.backends import (
    ECHO_PY,
    GREEDY,
    HEALTH_JS,
    SPIN_PY,
    Maker,
    init_body,
    needs_node,
    new_backend,
    new_prefix,
    prepare_engine,
    py,
    result,
    run,
    state_dir,  # noqa: F401  (a fixture)
    wait_until,
    zipped,
)
from tests.procs import alive

F = TypeVar("F", bound=Callable[..., Any])


# -- the backends under the contract ---------------------------------------------------------


class UnderTest:
    """One backend under the contract: how a test starts one, and what only it can tell."""

    name: str
    marks: tuple[pytest.MarkDecorator, ...] = ()
    # Variables a runtime may see besides the spec's and ``__OW_*`` (the image's own) ...
    env_allowed: frozenset[str] = frozenset()
    # ... and ``__OW_*`` ones that are the backend's, not the action's.
    env_hidden: frozenset[str] = frozenset()
    # A call's CPU time: (parameters of SPIN_PY, lowest, highest seconds).
    cpu_cases: tuple[tuple[dict[str, Any], float, float], ...] = ()

    async def start(self, request: pytest.FixtureRequest, prefix: str | None = None) -> Any:
        """A started backend, ``prefix`` its name prefix (default: a fresh one)."""
        raise NotImplementedError

    async def close(self, backend: Any) -> None:
        await backend.close()

    async def exit_code(self, backend: Any, c: Any) -> int | None:
        """The exit status of a container whose runtime exited."""
        raise NotImplementedError

    def memory_limit_missing(self, backend: Any) -> str | None:
        """Why this backend cannot enforce a memory limit here (the test skips), or None."""
        return None

    async def engine_says_oom(self, backend: Any, c: Any) -> bool | None:
        """Whether the engine itself reports the OOM kill (None: it never says)."""
        return None

    def traces(self, c: Any) -> Any:
        """What of a live container :meth:`check_removed` looks for once it is removed."""
        raise NotImplementedError

    async def check_removed(self, backend: Any, c: Any, traces: Any) -> None:
        """Asserts that nothing of a removed container is left."""
        raise NotImplementedError


class Process(UnderTest):
    name = "process"
    env_allowed = frozenset({"PATH", "HOME", "LANG", "TMPDIR", "TEMP", "TMP"})
    cpu_cases = (
        ({"cpu": 0.3}, 0.28, 0.45),
        ({"cpu": 0.3, "child": True}, 0.28, 0.6),
        ({"cpu": 0.0, "sleep": 0.5}, 0.0, 0.05),
    )

    async def start(
        self, request: pytest.FixtureRequest, prefix: str | None = None
    ) -> ProcessBackend:
        state: Path = request.getfixturevalue("state_dir")
        b = ProcessBackend(state / "state", prefix or new_prefix())
        await b.start()
        return b

    async def close(self, backend: ProcessBackend) -> None:
        await backend.close()
        await backend.remove_leftovers()

    async def exit_code(self, backend: ProcessBackend, c: Any) -> int | None:
        for _ in range(100):  # the zygote reports the exit
            if c.exit_status is not None:
                break
            await asyncio.sleep(0.02)
        return c.exit_status  # type: ignore[no-any-return]

    def memory_limit_missing(self, backend: ProcessBackend) -> str | None:
        support = backend.cgroup_support
        return None if support.usable else f"cgroups not usable: {support.reason}"

    def traces(self, c: Any) -> Any:
        assert c.pid > 0 and alive(c.pid) and c.address[0] == "127.0.0.1"
        return c.pid, c.cgroup, c.dir

    async def check_removed(self, backend: ProcessBackend, c: Any, traces: Any) -> None:
        pid, cg, d = traces
        assert not d.exists()
        assert await wait_until(lambda: not alive(pid), 5)
        if cg is not None:
            assert not cg.exists()


class Docker(UnderTest):
    marks = (pytest.mark.services,)
    env_allowed = frozenset(
        {"PATH", "HOME", "HOSTNAME", "LANG", "TERM", "container", "PYTHONDONTWRITEBYTECODE"}
    )
    env_hidden = frozenset({LISTEN_ENV})  # the entrypoint's, not the action's
    cpu_cases = (({"cpu": 0.3}, 0.28, 0.5), ({"cpu": 0.0, "sleep": 0.5}, 0.0, 0.06))

    def __init__(self, engine: str) -> None:
        self.name = engine  # docker: dockerd; podman: Podman's Docker-compatible API
        self._svc: Any = None

    async def start(self, request: pytest.FixtureRequest, prefix: str | None = None) -> Any:
        if self._svc is None:  # once a session: the runtime images built in the engine
            self._svc = prepare_engine(request, self.name)
        b = new_backend(self._svc.docker_host, self._svc.container_label, prefix)
        await b.start()
        return b

    async def exit_code(self, backend: Any, c: Any) -> int | None:
        for _ in range(100):  # the engine sees the exit
            state = (await backend.engine.inspect(c.id))["State"]
            if not state["Running"]:
                break
            await asyncio.sleep(0.05)
        return state["ExitCode"]  # type: ignore[no-any-return]

    async def engine_says_oom(self, backend: Any, c: Any) -> bool | None:
        if self.name != "docker":
            return None  # Podman 4.3 never does
        return (await backend.engine.inspect(c.id))["State"]["OOMKilled"]  # type: ignore[no-any-return]

    def traces(self, c: Any) -> Any:
        return c.id

    async def check_removed(self, backend: Any, c: Any, traces: Any) -> None:
        with pytest.raises(EngineError) as err:
            await backend.engine.inspect(traces)
        assert err.value.status == 404


# The backend list: every backend under the contract, by test id.
BACKENDS: dict[str, UnderTest] = {
    "process": Process(),
    "docker": Docker("docker"),
    "podman": Docker("podman"),
}
EVERY = ("process", "docker")
ALL = ("process", "docker", "podman")


def on(*names: str) -> Callable[[F], F]:
    """The backends a test runs on, instead of ``EVERY``."""

    def mark(fn: F) -> F:
        fn.backends = names  # type: ignore[attr-defined]
        return fn

    return mark


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "under" in metafunc.fixturenames:
        names = getattr(metafunc.function, "backends", EVERY)
        params = [pytest.param(BACKENDS[n], id=n, marks=BACKENDS[n].marks) for n in names]
        metafunc.parametrize("under", params)


@pytest.fixture
async def backend(under: UnderTest, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    b = await under.start(request)
    yield b
    await under.close(b)


@pytest.fixture
def make(backend: ContainerBackend) -> Maker:
    return Maker(backend)


# -- runtimes --------------------------------------------------------------------------------


async def test_python_cold_start_and_warm_runs(make: Maker) -> None:
    c = await make(ECHO_PY)
    assert result(await run(c, {"name": "World"})) == {"greeting": "Hello World"}
    for i in range(20):
        r = await run(c, {"name": str(i)})
        assert r.status == 200 and result(r) == {"greeting": f"Hello {i}"}


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


# -- errors ----------------------------------------------------------------------------------


@on(*ALL)
@pytest.mark.parametrize("kind", ["python:3.11", pytest.param("nodejs:20", marks=needs_node)])
async def test_init_failure_is_502_with_logs(make: Maker, kind: str) -> None:
    code = "def main(args:\n  return {}\n" if kind.startswith("python") else "function main( {"
    c = await make(code, kind=kind, expect=502)
    lines, complete = await c.read_logs(1 << 20, True)
    assert complete
    assert any("SyntaxError" in ln.text for ln in lines)


@pytest.mark.parametrize("kind", ["python:3.11", pytest.param("nodejs:20", marks=needs_node)])
async def test_second_init_is_403_and_missing_code_too(
    make: Maker, backend: Any, kind: str
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


async def test_huge_result_is_bounded(make: Maker, backend: Any) -> None:
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


@on(*ALL)
async def test_crash_is_container_gone_not_oom(under: UnderTest, backend: Any, make: Maker) -> None:
    c = await make("import os\ndef main(a):\n    os._exit(3)\n")
    with pytest.raises(ContainerGone):
        await run(c)
    assert await under.exit_code(backend, c) == 3
    assert not await c.was_oom_killed()


@on(*ALL)
async def test_memory_limit_kills_and_is_reported(
    under: UnderTest, backend: Any, make: Maker
) -> None:
    if why := under.memory_limit_missing(backend):
        pytest.skip(why)
    c = await make(GREEDY, memory_mb=128)
    with pytest.raises(ContainerGone):
        await run(c)
    assert await c.was_oom_killed()
    if (said := await under.engine_says_oom(backend, c)) is not None:
        assert said is True  # the engine itself says so
    await c.destroy()
    assert await c.was_oom_killed()  # still known after destroy


# -- logs ------------------------------------------------------------------------------------


@on(*ALL)
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


# -- cores, CPU time, pause ------------------------------------------------------------------


@on(*ALL)
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


async def cpu_time_of_a_call(make: Maker, cases: tuple[tuple[dict[str, Any], float, float], ...]):
    """A call's CPU time (the container's, children included) is what it burnt; a call
    that sleeps uses almost none; none once the container is gone."""
    c = await make(SPIN_PY)
    for params, low, high in cases:
        before = (await c.cpu_times()).used
        assert before is not None
        assert (await run(c, params)).status == 200
        used = (await c.cpu_times()).used - before
        assert low <= used <= high, (params, used)
    await c.destroy()
    assert await c.cpu_times() is None


@on(*ALL)
async def test_cpu_time_of_a_call_is_measured(under: UnderTest, make: Maker) -> None:
    await cpu_time_of_a_call(make, under.cpu_cases)


async def cpu_time_of_a_running_call(make: Maker) -> None:
    """The invoker samples running calls (the misprediction guard): a CPU-bound call's
    counter moves during /run, not only when it ends, and reads as CPU-bound."""
    c = await make(SPIN_PY)
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


async def test_cpu_time_of_a_running_call_advances_while_it_runs(make: Maker) -> None:
    await cpu_time_of_a_running_call(make)


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


async def cpu_weight_orders_a_shared_core(make: Maker) -> None:
    """Two CPU-bound calls pinned to one core, one at a high CPU weight and one at a low:
    while the first runs, the kernel gives the second a small part of the core; set back
    to the default weight, the second then finishes. (The low weight is 10, not 1: under a
    loaded machine the other processes' nice-0 weight would starve a weight-1 call.)"""
    core = max(os.sched_getaffinity(0))
    high, low = await make(SPIN_PY), await make(SPIN_PY)
    for c, weight in ((high, 1000), (low, 10)):
        await c.assign_cores(frozenset({core}))
        await c.set_cpu_weight(weight)
    with pytest.raises(ValueError, match=r"1\.\.10000"):
        await low.set_cpu_weight(0)
    was = [await c.cpu_times() for c in (high, low)]
    slow = asyncio.create_task(run(low, {"cpu": 0.6}))
    await run(high, {"cpu": 0.6})
    now = [await c.cpu_times() for c in (high, low)]
    high_used, low_used = (b.used - a.used for a, b in zip(was, now, strict=True))
    assert low_used < 0.25 * high_used, (high_used, low_used)
    await low.set_cpu_weight(DEFAULT_CPU_WEIGHT)
    assert (await asyncio.wait_for(slow, 30)).status == 200


@on(*ALL)
async def test_a_low_cpu_weight_gives_way_on_a_shared_core(make: Maker) -> None:
    await cpu_weight_orders_a_shared_core(make)


HOARD_PY = py("""
    kept = []
    def main(a):
        kept.append(bytearray(a["mb"] << 20))  # touched: resident, and kept after the call
        return {}
    """)


async def memory_usage_follows_what_it_holds(make: Maker) -> None:
    """An idle python runtime uses a few tens of MB, far below its 256 MB limit; one that
    keeps 100 MB after its call is measured holding them."""
    c = await make(HOARD_PY, memory_mb=256)
    idle = await c.memory_usage()
    assert idle is not None and 1 << 20 < idle < 120 << 20, idle
    assert (await run(c, {"mb": 100})).status == 200
    grown = await c.memory_usage()
    assert grown is not None and grown - idle >= 90 << 20, (idle, grown)


@on(*ALL)
async def test_memory_usage_of_an_idle_container_is_its_footprint(make: Maker) -> None:
    await memory_usage_follows_what_it_holds(make)


@on(*ALL)
async def test_pause_and_resume(make: Maker) -> None:
    c = await make(ECHO_PY)
    await c.pause()
    task = asyncio.create_task(run(c, {"name": "later"}))
    await asyncio.sleep(0.4)
    assert not task.done()
    await c.resume()
    r = await asyncio.wait_for(task, 10)
    assert result(r) == {"greeting": "Hello later"}


# -- isolation -------------------------------------------------------------------------------

ENV_PROBE = py("""
    import os
    def read(path):
        with open(path, 'rb') as f:
            return f.read().decode(errors='replace')
    def main(a):
        # The parent: 0 in a sandbox or as an image's pid 1 (outside its pid namespace).
        parent = read('/proc/%d/environ' % os.getppid()) if os.getppid() else ''
        return {'env': dict(os.environ), 'initial': read('/proc/self/environ'),
                'parent': parent, 'init': read('/proc/1/environ')}
    """)


@on(*ALL)
async def test_action_sees_none_of_the_invokers_environment(
    under: UnderTest, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_TEST_VAR", "kafka-password")
    b = await under.start(request)
    try:
        c = await Maker(b)(ENV_PROBE)
        r = result(await run(c))
        assert "SECRET_TEST_VAR" not in r["env"]
        assert "kafka-password" not in json.dumps(r)
        own = {k for k in r["env"] if k.startswith("__OW_")} - under.env_hidden
        assert set(r["env"]) <= under.env_allowed | own, set(r["env"]) - under.env_allowed
    finally:
        await under.close(b)


# -- removal ---------------------------------------------------------------------------------


@on(*ALL)
async def test_destroy_is_idempotent_and_removes_the_container_even_paused(
    under: UnderTest, backend: Any, make: Maker
) -> None:
    c = await make(ECHO_PY)
    traces = under.traces(c)
    await c.pause()
    await c.destroy()
    await c.destroy()
    await under.check_removed(backend, c, traces)
    with pytest.raises(ContainerGone):
        await run(c)
    assert await c.read_logs(1 << 20, False) == ([], True)


async def test_remove_leftovers_removes_its_prefixs_containers_and_no_others(
    under: UnderTest, request: pytest.FixtureRequest
) -> None:
    """What start-up (and shutdown) removes goes by the name prefix: everything of this one,
    nothing of an invoker whose prefix merely begins with it (``wsk1`` and ``wsk10``)."""
    ours = await under.start(request)
    other = await under.start(request, prefix=f"{ours.name_prefix}0")
    try:
        mine = [await Maker(ours)(ECHO_PY), await Maker(ours)(ECHO_PY)]
        traces = [under.traces(c) for c in mine]
        theirs = await Maker(other)(ECHO_PY)
        assert await ours.remove_leftovers() >= len(mine)
        for c, left in zip(mine, traces, strict=True):
            await under.check_removed(ours, c, left)
            with pytest.raises(ContainerGone):
                await run(c)
        assert result(await run(theirs, {"name": "still"})) == {"greeting": "Hello still"}
    finally:
        await under.close(ours)
        await under.close(other)
