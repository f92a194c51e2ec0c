"""What only the Docker backend does, against real engines: a Docker Engine (dockerd) and
Podman's Docker-compatible API (see docs/docker.md). The contract every backend fulfils
(runtimes, errors, limits, logs, pause, CPU time, removal) runs against it on both engines in
``test_backend_contract.py``; here: the engine's view of a container (names, labels, limits,
cpuset updates, the freezer), images and pulls, reach modes, the two log sources, leftovers
beside other containers, and the whole invoker on Docker.

Every test that takes ``engine_host`` runs once per engine (``pytest_generate_tests`` of
tests/integration/containers/backends.py): ``docker`` (the ``dockerd`` fixture) and ``podman`` (the
``podman`` fixture), with the backend as production runs it: containers with no network
(``NetworkMode none``), reached from inside their own network namespace (``reach="netns"``);
Podman's published ports have a test of their own. Tests marked ``docker_only`` (what Podman
lacks, or what only repeats on Podman what another test already shows there) run on dockerd
alone, to keep the suite's time.

The official runtime images cannot be pulled here, so ``scripts/runtime-images.sh`` builds
local ones that run the project's runtimes (``containers/docker/local.py``); the kinds map to
them through the backend's image overrides. Every container carries the engine fixture's
label, so the fixture removes whatever a failed test leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import sys
import tarfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from containers.backend import ContainerGone, ContainerSpec, LogLine
from containers.docker.backend import LISTEN_ENV, PREFIX_LABEL, DockerBackend, ImagePullError
from containers.docker.engine import Engine, EngineError, image_tag
from containers.docker.local import PYTHON_IMAGE, local_images
from containers.docker.logs import (
    Cursor,
    EngineLog,
    FrameDecoder,
    epoch_ns,
    iso_ns,
    json_lines,
    k8s_to_json,
    normalised,
    since_param,
    split_glued_sentinel,
)
from containers.http import NoAnswer, RuntimeClient
from harness.controller import running_invoker
from tests.integration.containers import backends
from tests.integration.containers import test_backend_contract as contract
from tests.integration.containers.backends import (
    ECHO_PY,
    NODE,
    ROOT,
    Maker,
    init_body,
    new_backend,
    new_docker_prefix,
    py,
    result,
    run,
)
from tests.integration.harness import PY_HELLO
from whisk.protocol.logs import SENTINEL

pytestmark = pytest.mark.services

# The engines' fixtures (tests/integration/containers/backends.py): each test on both engines.
pytest_generate_tests = backends.pytest_generate_tests
engine_host, svc, engine = backends.engine_host, backends.svc, backends.engine
bridge_network = backends.bridge_network


@pytest.fixture
async def backend(engine_host: str, svc) -> AsyncIterator[DockerBackend]:
    b = new_backend(engine_host, svc.container_label)
    await b.start()
    yield b
    await b.close()


@pytest.fixture
def make(backend: DockerBackend) -> Maker:
    return Maker(backend)


@pytest.fixture(params=["file", "api"])
async def log_backend(request, engine_host: str, svc) -> AsyncIterator[DockerBackend]:
    """A backend reading logs from the engine's log file, or from its logs endpoint."""
    b = new_backend(engine_host, svc.container_label, log_source=request.param)
    await b.start()
    yield b
    await b.close()


# -- the engine's view of a container -----------------------------------------------------------

LIMITS_PROBE = py("""
    import os, resource
    def read(*paths):
        for p in paths:
            try:
                return open(p).read().strip()
            except OSError:
                pass
    def main(a):
        caps = int(open('/proc/self/status').read().split('CapEff:')[1].split()[0], 16)
        return {'nofile': list(resource.getrlimit(resource.RLIMIT_NOFILE)),
                'pids': read('/sys/fs/cgroup/pids/pids.max', '/sys/fs/cgroup/pids.max'),
                'memory': read('/sys/fs/cgroup/memory/memory.limit_in_bytes',
                               '/sys/fs/cgroup/memory.max'),
                'net_raw': bool(caps >> 13 & 1), 'net_admin': bool(caps >> 12 & 1),
                'cwd': os.getcwd()}
    """)


async def test_cold_start_names_labels_limits_and_loopback_port(
    backend: DockerBackend, engine: Engine, svc
) -> None:
    name = f"{backend.name_prefix}_7_guest_hello"
    c = await backend.create(ContainerSpec(name, "python:3.11", 256, cpu_shares=128))
    assert (await c.init(init_body(LIMITS_PROBE), 30)).status == 200
    inside = result(await run(c))
    assert inside == {
        "nofile": [1024, 1024],
        "pids": "1024",
        "memory": str(256 * 1024 * 1024),
        "net_raw": False,
        "net_admin": False,
        "cwd": "/action",
    }
    for _ in range(10):  # warm
        assert (await run(c)).status == 200
    info = await engine.inspect(c.id)
    assert info["Name"].lstrip("/") == name == c.name
    labels = info["Config"]["Labels"]
    assert labels[PREFIX_LABEL] == backend.name_prefix and svc.container_label in labels
    hc = info["HostConfig"]
    assert (hc["Memory"], hc["MemorySwap"]) == (256 << 20, 256 << 20)
    assert (hc["PidsLimit"], hc["CpuShares"]) == (1024, 128)
    assert "NET_RAW" in hc["CapDrop"]
    assert hc["LogConfig"]["Type"] == "json-file"
    assert hc["SecurityOpt"] == ["no-new-privileges"] and hc["ShmSize"] == 64 << 20
    # No network; the runtime on the container's own loopback.
    assert hc["NetworkMode"] == "none"
    assert f"{LISTEN_ENV}=127.0.0.1:8080" in info["Config"]["Env"]
    assert c.address == ("127.0.0.1", 8080) and not info["NetworkSettings"]["Ports"]
    assert c.image == PYTHON_IMAGE
    assert c.log_source == "file"  # a local engine: its log file is read, as the reference does


async def test_podman_publishes_the_runtime_on_127_0_0_1(engine_host: str, svc) -> None:
    """``reach="publish"`` on Podman's bridge: 8080 on a host port of 127.0.0.1, cold and
    warm calls through it (dockerd has no bridge here: its published ports are the
    userland-proxy tests below). Several containers at once, as a burst of cold starts."""
    if svc.engine != "podman":
        pytest.skip("dockerd has no bridge network here")
    b = new_backend(engine_host, svc.container_label, reach="publish", network="bridge")
    await b.start()
    try:
        cs = await asyncio.gather(
            *(
                b.create(ContainerSpec(f"{b.name_prefix}_{i}_guest_p", "python:3.11", 128))
                for i in range(6)
            )
        )
        assert [(await c.init(init_body(ECHO_PY), 30)).status for c in cs] == [200] * 6
        for i, c in enumerate(cs):
            ports = (await b.engine.inspect(c.id))["NetworkSettings"]["Ports"]["8080/tcp"]
            assert [p["HostIp"] for p in ports] == ["127.0.0.1"]
            assert c.address == ("127.0.0.1", int(ports[0]["HostPort"]))
            assert result(await run(c, {"name": str(i)})) == {"greeting": f"Hello {i}"}
    finally:
        await b.close()


CPU_PROBE = py("""
    import os
    def read(*paths):
        for p in paths:
            try:
                return open(p).read().split()
            except OSError:
                pass
    def main(a):
        v1 = read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')
        quota = (v1[0], read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')[0]) if v1 else None
        return {'cores': sorted(os.sched_getaffinity(0)),
                'quota': list(quota or read('/sys/fs/cgroup/cpu.max') or [])}
    """)


async def test_one_cpu_per_call_cpuset_and_quota(make: Maker, backend: DockerBackend, svc) -> None:
    c = await make(CPU_PROBE)
    cores = sorted(os.sched_getaffinity(0))
    for core in cores[:2]:
        await c.assign_cores(frozenset({core}))
        if svc.engine == "docker":  # Docker's own update endpoint, cpuset and quota
            assert backend.engine.cpu_method == "update+quota"
            hc = (await backend.engine.inspect(c.id))["HostConfig"]
            assert (hc["CpusetCpus"], hc["CpuQuota"]) == (str(core), 100000)
        if backend.engine.cpu_method == "none":
            pytest.skip("this engine cannot update CPU limits")
        got = result(await run(c))
        assert got["cores"] == [core]
        if backend.engine.cpu_method.endswith("+quota"):
            assert got["quota"] == ["100000", "100000"]
    await c.assign_cores(frozenset(cores))
    got = result(await run(c))
    assert got["cores"] == cores
    if backend.engine.cpu_method.endswith("+quota"):
        assert got["quota"] == [str(100000 * len(cores)), "100000"]


TMP_PROBE = py("""
    import os, tempfile
    def main(a):
        with open('/tmp/shared-name.txt', 'a') as f:
            f.write(a['me'])
        with open('relative.txt', 'a') as f:
            f.write(a['me'])
        return {'tmp': open('/tmp/shared-name.txt').read(), 'cwd': os.getcwd(),
                'relative': open('relative.txt').read(), 'tempdir': tempfile.gettempdir()}
    """)


async def test_own_tmp_and_working_directory_per_container(make: Maker) -> None:
    a, b = await make(TMP_PROBE), await make(TMP_PROBE)
    ra, rb = result(await run(a, {"me": "a"})), result(await run(b, {"me": "b"}))
    assert ra == {"tmp": "a", "cwd": "/action", "relative": "a", "tempdir": "/tmp"}
    assert rb == {"tmp": "b", "cwd": "/action", "relative": "b", "tempdir": "/tmp"}
    assert result(await run(a, {"me": "a"}))["tmp"] == "aa"


async def test_blackbox_images_and_pull_failures(backend: DockerBackend) -> None:
    assert backend.supports("blackbox") and backend.supports("python:3.11")
    with pytest.raises(ValueError):
        await backend.create(ContainerSpec(f"{backend.name_prefix}_1_guest_bb", "blackbox", 128))
    # A present image is used without pulling (here: a runtime image standing in for one).
    spec = ContainerSpec(f"{backend.name_prefix}_2_guest_bb", "blackbox", 128, image=PYTHON_IMAGE)
    c = await backend.create(spec)
    assert (await c.init(init_body(ECHO_PY), 30)).status == 200
    assert result(await run(c, {"name": "box"})) == {"greeting": "Hello box"}
    # Missing: for latest (or no tag) a failed pull is fatal with the reference's message ...
    # (no tag is the same case: image_tag() is None)
    missing = f"localhost/ow-missing-{uuid.uuid4().hex[:8]}"
    assert image_tag(missing) is None and image_tag(f"{missing}:latest") == "latest"
    spec = ContainerSpec(
        f"{backend.name_prefix}_3_guest_bb", "blackbox", 128, image=f"{missing}:latest"
    )
    with pytest.raises(ImagePullError) as err:
        await backend.create(spec)
    assert str(err.value) == f"Failed to pull container image '{missing}:latest'."
    # ... for another tag only when no local copy exists either (as the reference, whose
    # `docker run` then fails): the action's problem, not the node's.
    spec = ContainerSpec(
        f"{backend.name_prefix}_4_guest_bb", "blackbox", 128, image=f"{missing}:v1"
    )
    with pytest.raises(ImagePullError) as err:
        await backend.create(spec)
    assert str(err.value) == f"Failed to pull container image '{missing}:v1'."


async def test_runtime_that_exits_at_boot_fails_init_fast(
    backend: DockerBackend, svc, caplog: pytest.LogCaptureFixture
) -> None:
    # busybox's /bin/sh exits at once without a terminal: nothing will ever listen on 8080.
    spec = ContainerSpec(
        f"{backend.name_prefix}_1_guest_sh", "blackbox", 128, image=svc.busybox_image
    )
    c = await backend.create(spec)
    t0 = time.monotonic()
    with (
        caplog.at_level(logging.WARNING, "containers.docker.backend"),
        pytest.raises(ContainerGone),
    ):
        await c.init(init_body(ECHO_PY), 30)
    assert time.monotonic() - t0 < 5
    why = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"{c.name} declared gone during /init" in m and "exited (0)" in m for m in why)


CHATTY = py("""
    import sys, time
    def main(a):
        for i in range(a['n']):
            print('out', a['tag'], i)
            print('err', a['tag'], i, file=sys.stderr)
        time.sleep(a.get('sleep', 0))
        print('last', a['tag'])
        return {}
    """)


async def test_logs_since_the_last_read_across_activations_and_seconds(
    log_backend: DockerBackend,
) -> None:
    c = await Maker(log_backend)(CHATTY)
    assert c.log_source == log_backend.log_source
    # Three activations before any read (one of them spans a second boundary), then three
    # reads: each gets its own activation's lines, in order, and nothing twice.
    for tag, sleep in (("a", 0), ("b", 1.1), ("c", 0)):
        assert (await run(c, {"n": 3, "tag": tag, "sleep": sleep})).status == 200
    for tag in "abc":
        lines, complete = await c.read_logs(1 << 20, True)
        assert complete
        out = [ln.text for ln in lines if ln.stream == "stdout"]
        err = [ln.text for ln in lines if ln.stream == "stderr"]
        assert out == [f"out {tag} {i}\n" for i in range(3)] + [f"last {tag}\n"]
        assert err == [f"err {tag} {i}\n" for i in range(3)]
        assert all(len(ln.time) == 30 and ln.time.endswith("Z") for ln in lines)
    lines, complete = await c.read_logs(1 << 20, False)
    assert (lines, complete) == ([], True)
    t0 = time.monotonic()
    lines, complete = await asyncio.wait_for(c._log.read(1 << 20, True, idle_timeout_s=0.3), 5)
    assert (lines, complete) == ([], False) and time.monotonic() - t0 < 2


LOG_SCENARIOS = [
    (contract.test_logs_are_cut_per_activation, {}),
    (contract.test_log_limit_skips_the_rest, {}),
    (contract.test_exception_is_an_error_result_and_traceback_goes_to_stderr, {}),
    (contract.test_init_failure_is_502_with_logs, {"kind": "python:3.11"}),
    (contract.test_init_failure_is_502_with_logs, {"kind": "nodejs:20"}),
    (contract.test_node_logs, {}),
]


@pytest.mark.parametrize(
    ("scenario", "kw"), LOG_SCENARIOS, ids=[f"{f.__name__}{kw}" for f, kw in LOG_SCENARIOS]
)
async def test_log_scenarios_through_the_logs_endpoint(
    engine_host: str, svc, scenario: Any, kw: dict[str, str]
) -> None:
    if "node" in scenario.__name__ + str(kw) and NODE is None:
        pytest.skip("node is not installed")
    b = new_backend(engine_host, svc.container_label, log_source="api")
    try:
        await scenario(Maker(b), **kw)
    finally:
        await b.close()


# -- leftovers ---------------------------------------------------------------------------------


async def bystander(engine: Engine, name: str, labels: dict[str, str], image: str) -> str:
    config = {
        "Image": image,
        "Cmd": ["sleep", "300"],
        "Labels": labels,
        "HostConfig": {"NetworkMode": "none"},
    }
    cid = await engine.create(config, name)
    await engine.start_container(cid)
    return cid


CHILD_SCRIPT = """
import asyncio, json, sys
sys.path.insert(0, {root!r})
from containers.backend import ContainerSpec
from containers.docker.backend import DockerBackend
from containers.docker.local import BINDS, local_images

async def main():
    b = DockerBackend({host!r}, {prefix!r}, images=local_images(), binds=BINDS,
                      labels={{{label!r}: "1"}}, reach={reach!r}, network={network!r})
    await b.start()
    ids = []
    for i, kind in enumerate(["python:3.11", "nodejs:20"]):
        c = await b.create(ContainerSpec({prefix!r} + "_%d_guest_x" % i, kind, 128))
        ids.append(c.id)
    await b._containers[ids[0]].pause()  # a paused leftover too
    print(json.dumps(ids), flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def test_kill_9_of_the_invoker_then_remove_leftovers_removes_only_ours(
    engine_host: str, engine: Engine, svc
) -> None:
    prefix, label = new_docker_prefix(), svc.container_label
    script = CHILD_SCRIPT.format(
        root=str(ROOT),
        host=engine_host,
        prefix=prefix,
        label=label,
        reach="netns",
        network="none",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE
    )
    others: list[str] = []
    try:
        assert proc.stdout is not None
        ids = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        proc.kill()  # SIGKILL: no cleanup of any kind in the "invoker"
        await proc.wait()
        # Not ours: our label without our name prefix, our prefix without our label, and
        # another invoker's container.
        image = svc.busybox_image
        others = [
            await bystander(engine, f"x{prefix}_1", {label: "1", PREFIX_LABEL: prefix}, image),
            await bystander(engine, f"{prefix}_9_other", {label: "1"}, image),
            await bystander(
                engine, f"{prefix}0_1_x", {label: "1", PREFIX_LABEL: f"{prefix}0"}, image
            ),
        ]
        for cid in ids:  # the engine keeps them when the invoker dies
            assert (await engine.inspect(cid))["State"]["Status"] in ("running", "paused")
        b = new_backend(engine_host, label, prefix)
        await b.start()
        try:
            assert await b.remove_leftovers() == len(ids)
        finally:
            await b.close()
        for cid in ids:
            with pytest.raises(EngineError):
                await engine.inspect(cid)
        for cid in others:
            assert (await engine.inspect(cid))["State"]["Running"], "a bystander was removed"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for cid in others:
            await engine.remove(cid)


# -- the whole invoker -------------------------------------------------------------------------


async def test_python_action_end_to_end_through_the_invoker(
    kafka, couchdb, tmp_path: Path, engine_host: str, engine: Engine, svc
) -> None:
    unique = f"d{uuid.uuid4().hex[:8]}"
    prefix = f"wsk{unique}0"  # the invoker's container prefix for instance 0
    b = new_backend(engine_host, svc.container_label, prefix)
    async with running_invoker(
        kafka, couchdb, tmp_path, backend=b, unique_name=unique, pause_grace_s=1.0
    ) as (invoker, ctl):
        action, rev = await ctl.create_action("hello", PY_HELLO)
        aid = await ctl.invoke(action, rev, content={"name": "World"}, blocking=True)
        acks = await ctl.wait_completion(aid, timeout_s=60)
        assert acks[0]["response"]["response"]["result"] == {"greeting": "Hello World"}
        rec = await ctl.record(aid)
        assert rec["response"]["statusCode"] == 0
        assert any(line.endswith("stdout: hello stdout") for line in rec["logs"])
        assert any(line.endswith("stderr: hello stderr") for line in rec["logs"])
        ours = await engine.list(f"{PREFIX_LABEL}={prefix}")
        names = [n.lstrip("/") for c in ours for n in c["Names"]]
        assert any(n.endswith("_guest_hello") for n in names)
        assert all(n.startswith(prefix + "_") for n in names)
        # The pool pauses the idle container; the next call resumes it (a warm start).
        hello = next(c for c in ours if any(n.endswith("_guest_hello") for n in c["Names"]))
        for _ in range(100):
            if (await engine.inspect(hello["Id"]))["State"]["Paused"]:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the idle container was not paused")
        aid2 = await ctl.invoke(action, rev, content={"name": "again"}, blocking=True)
        acks2 = await ctl.wait_completion(aid2, timeout_s=60)
        assert acks2[0]["response"]["response"]["result"] == {"greeting": "Hello again"}
        assert len((await ctl.record(aid2))["logs"]) == 2
        assert invoker.pool.warm_starts >= 1
    assert await engine.list(f"{PREFIX_LABEL}={prefix}") == []


# -- pure parts of the log reader --------------------------------------------------------------


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def test_frames_split_anywhere_are_reassembled() -> None:
    data = frame(1, b"2024-05-29T16:26:40.5Z hi\n") + frame(2, b"2024-05-29T16:26:41Z err\n")
    for cut in range(len(data) + 1):
        d = FrameDecoder()
        got = list(d.feed(data[:cut])) + list(d.feed(data[cut:]))
        assert got == [
            ("stdout", b"2024-05-29T16:26:40.5Z hi\n"),
            ("stderr", b"2024-05-29T16:26:41Z err\n"),
        ]


def served(log: list[tuple[int, int, str]]):
    """An engine's logs endpoint over ``(stream, ns, text)`` entries in logged order: every
    entry stamped at or after ``since``, as Docker and Podman serve them."""

    @contextlib.asynccontextmanager
    async def open_logs(since: str | None, follow: bool):
        since_ns = 0 if since is None else int(since.split(".")[1])

        async def chunks():
            for stream, ns, text in log:
                if ns >= since_ns:
                    yield frame(stream, f"2024-05-29T16:26:40.{ns:09d}Z {text}".encode())

        yield chunks()

    return open_logs


async def test_entries_served_again_after_an_early_stamped_stderr_line_are_skipped() -> None:
    """The engine's log is in arrival order, its ``since`` by time: a stderr sentinel stamped
    before the end of a stdout burst but logged after it is the last entry read, so the next
    read's ``since`` serves the burst's tail again (seen as a flaky duplicate of an earlier
    activation's lines on dockerd). It is skipped, and nothing of the next call is lost."""
    sentinel = SENTINEL + "\n"
    log = [  # (stream, ns, text), in the order the engine logged them
        *((1, 100 + i, f"line {i}\n") for i in range(5)),
        (1, 106, sentinel),
        (2, 102, sentinel),  # stamped while stdout's burst was still being read
        (1, 200, "next\n"),
        (1, 201, sentinel),
        (2, 202, sentinel),
    ]

    reader = EngineLog(served(log))
    first, complete = await reader.read(1 << 20, True, idle_timeout_s=1)
    assert complete and [ln.text for ln in first] == [f"line {i}\n" for i in range(5)]
    second, complete = await reader.read(1 << 20, True, idle_timeout_s=1)
    assert complete and [ln.text for ln in second] == ["next\n"]


async def test_next_calls_stderr_stamped_before_its_stdout_already_read_is_not_lost() -> None:
    """A read that ends at a late-logged stderr sentinel has already read (and carried) the
    next call's first stdout line; that call's first stderr line, stamped before it but
    logged after the sentinel, belongs to the next read (seen in CI as a lost ``err b 0``
    when the cursor was one timestamp for both streams)."""
    sentinel = SENTINEL + "\n"
    log = [  # (stream, ns, text), in the order the engine logged them
        (1, 100, "out a\n"),
        (1, 101, sentinel),
        (1, 110, "out b\n"),  # the next call's, read before stderr's sentinel arrived
        (2, 102, sentinel),
        (2, 108, "err b\n"),  # stamped before "out b", logged after it
        (1, 120, sentinel),
        (2, 121, sentinel),
    ]
    reader = EngineLog(served(log))
    first, complete = await reader.read(1 << 20, True, idle_timeout_s=1)
    assert complete and [ln.text for ln in first] == ["out a\n"]
    second, complete = await reader.read(1 << 20, True, idle_timeout_s=1)
    assert complete and sorted(ln.text for ln in second) == ["err b\n", "out b\n"]


def test_timestamps_are_normalised_to_nanoseconds_utc() -> None:
    ns = epoch_ns("2024-05-29T16:26:40.590123456Z")
    assert ns is not None and iso_ns(ns) == "2024-05-29T16:26:40.590123456Z"
    assert iso_ns(epoch_ns("2024-05-29T16:26:40Z") or 0) == "2024-05-29T16:26:40.000000000Z"
    assert iso_ns(epoch_ns("2024-05-29T18:26:40.5+02:00") or 0) == (
        "2024-05-29T16:26:40.500000000Z"
    )
    assert since_param(ns) == "1717000000.590123456"
    assert epoch_ns("garbage") is None


def test_json_lines_match_the_zygotes_and_split_a_glued_sentinel() -> None:
    t = "2024-05-29T16:26:40.000000000Z"
    assert list(json_lines(t, "stdout", 'a "q"\n')) == [
        b'{"log":"a \\"q\\"\\n","stream":"stdout","time":"' + t.encode() + b'"}\n'
    ]
    glued = list(json_lines(t, "stdout", "no newlineXXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n"))
    assert [json.loads(x)["log"] for x in glued] == [
        "no newline",
        "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n",
    ]


def test_k8s_file_lines_become_json_file_lines() -> None:
    stamp = b"2026-11-29T16:09:25.849292304+00:00"
    full = json.loads(k8s_to_json(stamp + b" stdout F hello world"))
    assert full == {
        "log": "hello world\n",
        "stream": "stdout",
        "time": "2026-11-29T16:09:25.849292304Z",
    }
    assert json.loads(k8s_to_json(stamp + b" stderr P no newline"))["log"] == "no newline"
    assert json.loads(k8s_to_json(stamp + b" stdout F"))["log"] == "\n"
    assert k8s_to_json(b"garbage") == b"" and k8s_to_json(stamp + b" stdin F x") == b""


def test_docker_times_are_normalised() -> None:
    line = LogLine("2024-05-29T16:26:40.59012345Z", "stdout", "x\n", 70)
    assert normalised(line) == LogLine("2024-05-29T16:26:40.590123450Z", "stdout", "x\n", 70)
    same = LogLine("2024-05-29T16:26:40.590123456Z", "stderr", "y\n", 70)
    assert normalised(same) is same


def test_cursor_keeps_each_streams_latest_stamp_and_counts_the_entries_there() -> None:
    c = Cursor()
    c.advance(1, "stdout")
    c.advance(3, "stdout")
    assert c.since_ns is None  # stderr not read yet: all of it is unread
    c.advance(2, "stderr")  # stamped before the stdout burst's tail, logged after it
    assert (c.since_ns, c.marks) == (2, {"stdout": (3, 1), "stderr": (2, 1)})
    c.advance(3, "stdout")
    c.advance(2, "stderr")
    c.advance(1, "stderr")  # a clock stepping back leaves the mark
    assert c.marks == {"stdout": (3, 2), "stderr": (2, 2)}


# -- what Podman lacked, and the stock invoker's networking -------------------------------------

SLOW_START_S = 3
SLOW_ENTRY = f"sleep {SLOW_START_S}; exec /usr/bin/python3 -I -B /ow/docker_entry.py python"
SLOW_DOCKERFILE = f'FROM {PYTHON_IMAGE}\nENTRYPOINT ["/bin/sh", "-c", "{SLOW_ENTRY}"]\n'


@pytest.fixture
async def slow_image(engine: Engine) -> AsyncIterator[str]:
    """The python runtime image, its runtime listening only 3 s after the container
    started (a runtime booting on a loaded node), built through the engine's API."""
    tag = f"localhost/ow-test-slow-python:{uuid.uuid4().hex[:8]}"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        data = SLOW_DOCKERFILE.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    await engine.docker.images.build(fileobj=context, encoding="application/x-tar", tag=tag)
    yield tag
    await engine.docker.images.delete(tag, force=True)


async def first_bytes(port: int, timeout_s: float = 5) -> bytes:
    """What a fresh connection to 127.0.0.1:port answers to a request before it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        return await asyncio.wait_for(reader.read(100), timeout_s)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


@pytest.mark.docker_only
async def test_cold_starts_behind_the_userland_proxy_wait_for_a_slow_runtime(
    engine_host: str, engine: Engine, svc, slow_image: str, bridge_network: str
) -> None:
    """The defect of issue 15: with a published port, Docker's userland proxy accepts for a
    runtime that does not listen yet and then resets the connection. /init took that for
    a dead container (ContainerGone at once, "The action did not initialize and exited
    unexpectedly", the container killed while starting); it must wait as for a refusal."""
    b = new_backend(
        engine_host,
        svc.container_label,
        reach="publish",
        network=bridge_network,
        images={"python:3.11": slow_image},
    )
    await b.start()
    try:
        specs = [
            ContainerSpec(f"{b.name_prefix}_{i}_guest_slow", "python:3.11", 128) for i in range(4)
        ]
        first = await b.create(specs[0])
        # Right after the start the proxy answers for the runtime: accepted, then closed
        # with not a byte (the runtime sleeps its first 3 s).
        assert await first_bytes(first.port) == b""
        cs = [first, *await asyncio.gather(*(b.create(spec) for spec in specs[1:]))]
        t0 = time.monotonic()
        answers = await asyncio.gather(*(c.init(init_body(ECHO_PY), 30) for c in cs))
        assert [a.status for a in answers] == [200] * len(cs)
        assert time.monotonic() - t0 < SLOW_START_S + 10
        for i, c in enumerate(cs):
            assert result(await run(c, {"name": str(i)})) == {"greeting": f"Hello {i}"}
            assert (await engine.inspect(c.id))["State"]["Running"]
    finally:
        await b.close()


@pytest.mark.docker_only
async def test_a_burst_of_slow_cold_starts_through_the_invoker_with_the_openwhisk_policy(
    kafka, couchdb, tmp_path: Path, engine_host: str, svc, slow_image: str, bridge_network: str
) -> None:
    """The issue's setting end to end: the stock-like policy, cold starts at once, ports
    published through the userland proxy, runtimes slow to listen: every call succeeds."""
    unique = f"d{uuid.uuid4().hex[:8]}"
    prefix = f"wsk{unique}0"
    b = new_backend(
        engine_host,
        svc.container_label,
        prefix,
        reach="publish",
        network=bridge_network,
        images={**local_images(), "python:3.11": slow_image},
    )
    async with running_invoker(
        kafka,
        couchdb,
        tmp_path,
        backend=b,
        unique_name=unique,
        policy="openwhisk",
        action_cores=(0, 1),
        user_memory_mb=2048,
    ) as (invoker, ctl):
        actions = [await ctl.create_action(f"slow{i}", PY_HELLO) for i in range(6)]
        aids = await asyncio.gather(
            *(
                ctl.invoke(action, rev, content={"name": str(i)}, blocking=True)
                for i, (action, rev) in enumerate(actions)
            )
        )
        for i, aid in enumerate(aids):
            acks = await ctl.wait_completion(aid, timeout_s=120)
            response = acks[0]["response"]["response"]
            assert response["result"] == {"greeting": f"Hello {i}"}, response
        assert invoker.pool.cold_starts >= len(actions)


@pytest.mark.docker_only
async def test_pause_freezes_and_resume_thaws_through_the_freezer(
    make: Maker, engine: Engine
) -> None:
    """Docker pauses with the cgroup freezer: a paused runtime accepts nothing it answers,
    the engine reports it paused, and after resume the same container answers again."""
    c = await make(ECHO_PY)
    assert result(await run(c, {"name": "before"})) == {"greeting": "Hello before"}
    await c.pause()
    state = (await engine.inspect(c.id))["State"]
    assert state["Paused"] and state["Status"] == "paused"
    freezer = Path(f"/sys/fs/cgroup/freezer/docker/{c.id}/freezer.state")
    if freezer.exists():  # cgroup v1, cgroupfs driver (the project's machines)
        assert freezer.read_text().strip() == "FROZEN"
    client = RuntimeClient(*c.address, make_socket=c.socket_factory)
    with pytest.raises(TimeoutError):
        await client.post_run(b'{"value": {}}', 0.5)
    client.close()
    await c.resume()
    assert not (await engine.inspect(c.id))["State"]["Paused"]
    assert result(await run(c, {"name": "after"})) == {"greeting": "Hello after"}


# -- pure parts: runtime connections and the create request ------------------------------------


async def test_no_answer_is_told_from_a_dropped_answer() -> None:
    """A connection closed before any byte (what a proxy in front of a runtime that does not
    listen yet does) is NoAnswer, which /init may retry; one closed mid-answer is not."""

    async def serve(reply: bytes) -> tuple[asyncio.Server, int]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(10)
            writer.write(reply)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return server, server.sockets[0].getsockname()[1]

    silent, port = await serve(b"")
    partial, port2 = await serve(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    try:
        with pytest.raises(NoAnswer):
            await RuntimeClient("127.0.0.1", port).post_init(b"{}", 2)
        with pytest.raises(ContainerGone) as err:
            await RuntimeClient("127.0.0.1", port2).post_init(b"{}", 2)
        assert not isinstance(err.value, NoAnswer)
    finally:
        for server in (silent, partial):
            server.close()


def test_create_request_per_reach_mode() -> None:
    """netns (default): the network (none: no network) and the runtime on the container's
    loopback; publish: 8080 on 127.0.0.1; host: the host's network and a loopback port in the
    runtime's environment; address (the stock invoker's): the network, nothing published.
    Every mode: no-new-privileges, a private IPC namespace and a sized /dev/shm."""
    spec = ContainerSpec("wsk0_1_guest_x", "python:3.11", 256, env={"__OW_API_HOST": "h"})
    netns = DockerBackend("unix:///x", "wsk0", network="none").container_config("img", spec)
    assert netns["HostConfig"]["NetworkMode"] == "none"
    assert netns["Env"] == ["__OW_API_HOST=h", f"{LISTEN_ENV}=127.0.0.1:8080"]
    assert "PortBindings" not in netns["HostConfig"] and "ExposedPorts" not in netns
    small = DockerBackend("unix:///x", "wsk0", pids_limit=64, shm_size_mb=8)
    hc = small.container_config("img", spec)["HostConfig"]
    assert (hc["PidsLimit"], hc["ShmSize"], hc["IpcMode"]) == (64, 8 << 20, "private")
    assert hc["SecurityOpt"] == ["no-new-privileges"] and hc["NetworkMode"] == "bridge"
    publish = DockerBackend("unix:///x", "wsk0", reach="publish").container_config("img", spec)
    assert publish["HostConfig"]["PortBindings"] == {
        "8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": ""}]
    }
    assert publish["HostConfig"]["NetworkMode"] == "bridge"
    host = DockerBackend("unix:///x", "wsk0", reach="host").container_config("img", spec, 41234)
    assert host["HostConfig"]["NetworkMode"] == "host" and "PortBindings" not in host["HostConfig"]
    assert host["Env"] == ["__OW_API_HOST=h", f"{LISTEN_ENV}=127.0.0.1:41234"]
    assert "ExposedPorts" not in host
    b = DockerBackend("unix:///x", "wsk0", reach="address", network="openwhisk")
    address = b.container_config("img", spec)
    assert address["HostConfig"]["NetworkMode"] == "openwhisk"
    assert "PortBindings" not in address["HostConfig"] and address["ExposedPorts"]
    info = {"NetworkSettings": {"Networks": {"openwhisk": {"IPAddress": "172.18.0.5"}}}}
    assert b._address(info) == ("172.18.0.5", 8080)
    with pytest.raises(ValueError):
        DockerBackend("unix:///x", "wsk0", reach="address", network=None)
    with pytest.raises(ValueError):
        DockerBackend("unix:///x", "wsk0", reach="bridge")


def test_a_sentinel_glued_to_an_unterminated_line_is_split_off() -> None:
    """Docker's json-file ends entries at newlines only: ``no newline`` + the sentinel
    arrive as one entry, which must become the two lines the zygote writes."""
    t = "2026-12-01T11:00:00.1Z"
    glued = json.dumps(
        {"log": "no newlineXXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n", "stream": "stdout", "time": t}
    ).encode()
    lines = split_glued_sentinel(glued).splitlines()
    assert [json.loads(x)["log"] for x in lines] == [
        "no newline",
        "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n",
    ]
    plain = b'{"log":"hi\\n","stream":"stdout","time":"' + t.encode() + b'"}'
    assert split_glued_sentinel(plain) == plain + b"\n"
