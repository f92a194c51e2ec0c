"""A soak run: ``ow-invoker run`` held at a steady mixed load for a chosen time, its resources
sampled every few seconds, and a verdict on whether any of them grows without bound.

The load (:data:`MIX`) is what a node sees over a day, compressed: short calls on warm
containers, CPU-bound ones, application errors, calls past their time limit (the container
replaced), results over the payload limit, and calls spread over many actions whose
containers do not all fit in the user memory at their limits (the stock accounting,
``--keep-alive limit``), so cold starts and evictions never stop. The
controller stub publishes it open loop and counts the answers; the records are counted in
the database at the end.

Sampled from outside the invoker (``/proc``, the cgroup filesystem, its state directory) and
from its ``/metrics``: resident memory, open file descriptors, threads, event-loop tasks, its
descendant processes, containers (the pool's and their directories on disk), container
cgroups, spooled records. A resource *grows without bound* when its floor rises: the
least-squares trend of its lowest value in each :data:`FLOOR_WINDOW_S` after the warm-up adds
more than its allowance (:data:`ALLOWED_GROWTH`) over the measured window. A leak raises the
floor (one descriptor per hundred calls adds hundreds in minutes); a bounded resource that
only wanders (containers being replaced, 8 to 15 directories and back within seconds) raises
its peaks, not its floor, wherever in the window the peaks fall.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import re
import statistics
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from containers.cgroups import parse_mountinfo, parse_proc_cgroup
from harness.controller import ControllerStub, CouchAddress, KafkaAddress, controller, make_config
from harness.processes import InvokerProcess
from whisk.clock import SystemClock
from whisk.supervisor import spawn

CLOCK = SystemClock()

GAUGES = (
    "rss_mb",
    "fds",
    "threads",
    "tasks",
    "processes",
    "containers",
    "container_dirs",
    "cgroups",
    "spooled",
)
# The floor's window: each one's lowest sample is a point of the fitted trend. Long enough
# that the churn of the soak's mix (a cold start every fraction of a second) comes back to
# its floor within it; short enough for several points in the CI run's four minutes.
FLOOR_WINDOW_S = 30.0
# The most a resource's fitted floor trend may add over the measured window (after the warm-up).
ALLOWED_GROWTH: dict[str, float] = {
    "rss_mb": 24.0,
    "fds": 8.0,
    # asyncio's default executor (DNS lookups of new connections, file work) starts its
    # workers lazily, up to min(32, CPUs + 4): it may reach that bound within the window.
    "threads": float(min(32, (os.cpu_count() or 1) + 4)),
    "tasks": 16.0,
    "processes": 4.0,
    "containers": 2.0,
    "container_dirs": 2.0,
    "cgroups": 2.0,
    "spooled": 5.0,
}


@dataclass(frozen=True)
class Kind:
    """One kind of call in the mix: its action(s), code and share of the calls."""

    name: str
    code: str
    share: float
    actions: int = 1  # > 1: spread over this many actions (cold starts, evictions)
    timeout_ms: int = 10_000


def _py(body: str) -> str:
    return "def main(args):\n" + "".join(f"    {line}\n" for line in body.splitlines())


MIX = (
    Kind("quick", _py("import time\ntime.sleep(0.005)\nreturn {'ok': True}"), 0.55),
    Kind("cpu", _py("n = 0\nfor i in range(300000):\n    n += i\nreturn {'n': n}"), 0.10),
    Kind("fails", _py("raise ValueError('soak: an application error')"), 0.05),
    Kind("slow", _py("import time\ntime.sleep(5)\nreturn {}"), 0.02, timeout_ms=1000),
    Kind("big", _py("return {'x': 'x' * 1_200_000}"), 0.03),  # over the 1 MB result limit
    Kind("many", _py("return {'ok': True}"), 0.25, actions=24),
)


@dataclass
class Soak:
    """What one run saw: the samples and the calls' outcome."""

    samples: list[dict[str, float]] = field(default_factory=list)  # each with "t" (s)
    sent: int = 0
    answered_once: int = 0
    answered_twice: int = 0
    unanswered: int = 0
    recorded: int = 0
    statuses: dict[str, int] = field(default_factory=dict)  # finished calls by status
    starts: dict[str, int] = field(default_factory=dict)  # how calls got their container
    warmup_s: float = 0.0

    def trends(self) -> dict[str, tuple[float, float]]:
        """``gauge -> (growth the fitted floor trend adds over the measured window,
        allowance)``; empty with fewer than three floor windows."""
        after = [s for s in self.samples if s["t"] >= self.warmup_s]
        windows: dict[int, list[dict[str, float]]] = {}
        for s in after:
            windows.setdefault(int((s["t"] - after[0]["t"]) // FLOOR_WINDOW_S), []).append(s)
        out: dict[str, tuple[float, float]] = {}
        if len(windows) < 3:
            return out
        span = after[-1]["t"] - after[0]["t"]
        for g in GAUGES:
            floors = [min(w, key=lambda s: s[g]) for w in windows.values()]
            ts, values = [s["t"] for s in floors], [s[g] for s in floors]
            slope = 0.0 if len(set(values)) == 1 else statistics.linear_regression(ts, values)[0]
            out[g] = (slope * span, ALLOWED_GROWTH[g])
        return out

    def unbounded(self) -> list[str]:
        return [g for g, (grew, allowed) in self.trends().items() if grew > allowed]

    def healthy(self) -> bool:
        """Nothing grew without bound; every call answered once and recorded."""
        return (
            not self.unbounded() and self.answered_once == self.sent and self.recorded == self.sent
        )

    def report(self) -> str:
        lines = [
            f"calls sent {self.sent}: answered once {self.answered_once}, twice or more "
            f"{self.answered_twice}, never {self.unanswered}; records {self.recorded}",
            "statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())),
            "container starts: " + ", ".join(f"{k} {v}" for k, v in sorted(self.starts.items())),
            f"{'resource':<15}{'first':>10}{'last':>10}{'min':>10}{'max':>10}"
            f"{'floor adds':>12}{'allowed':>9}",
        ]
        after = [s for s in self.samples if s["t"] >= self.warmup_s] or self.samples
        for g, (grew, allowed) in self.trends().items():
            values = [s[g] for s in after]
            lines.append(
                f"{g:<15}{values[0]:>10.1f}{values[-1]:>10.1f}{min(values):>10.1f}"
                f"{max(values):>10.1f}{grew:>12.2f}{allowed:>9.1f}"
                + ("  UNBOUNDED" if grew > allowed else "")
            )
        return "\n".join(lines)

    def plot(self, path: Path) -> None:
        """One panel per resource, the warm-up shaded (needs matplotlib: the experiments
        extra)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(3, 3, figsize=(12, 8), sharex=True)
        minutes = [s["t"] / 60 for s in self.samples]
        for ax, g in zip(axes.flat, GAUGES, strict=True):
            ax.plot(minutes, [s[g] for s in self.samples], lw=1)
            ax.axvspan(0, self.warmup_s / 60, color="0.9")
            ax.set_title(g, fontsize=10)
        for ax in axes[-1]:
            ax.set_xlabel("minutes")
        fig.suptitle(f"ow-invoker run, soak: {self.sent} calls")
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)


class Sampler:
    """Reads the invoker's resources from outside it, and its own gauges from /metrics."""

    def __init__(self, proc: InvokerProcess) -> None:
        assert proc.proc is not None
        self.pid = proc.proc.pid
        self.metrics_url = f"http://127.0.0.1:{proc.admin_port}/metrics"
        self.state = Path(proc.config.state_dir)
        self.prefix = proc.config.container_prefix + "_"
        self.cgroup_dir = _memory_cgroup_dir(self.pid)

    def sample(self) -> dict[str, float]:
        status = _proc_status(self.pid)
        metrics = _scrape(self.metrics_url)
        return {
            "rss_mb": status["VmRSS"] / 1024,
            "fds": float(len(os.listdir(f"/proc/{self.pid}/fd"))),
            "threads": status["Threads"],
            "tasks": metrics.get("invoker_event_loop_tasks", 0.0),
            "processes": float(sum(1 for _ in _descendants(self.pid))),
            "containers": metrics.get("invoker_containers", 0.0),
            "container_dirs": float(_container_dirs(self.state)),
            "cgroups": float(self._cgroups()),
            "spooled": metrics.get("invoker_spooled_records", 0.0),
        }

    def _cgroups(self) -> int:
        if self.cgroup_dir is None:
            return 0
        try:
            return sum(1 for e in os.scandir(self.cgroup_dir) if e.name.startswith(self.prefix))
        except OSError:
            return 0


def _container_dirs(root: Path) -> int:
    """Directories holding a ``container.json`` under ``root`` (os.walk passes over those
    removed while it walks)."""
    return sum(1 for _, _, files in os.walk(root) if "container.json" in files)


def _proc_status(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            out[key] = float(value.split()[0])
    return out


def _descendants(pid: int) -> Iterator[int]:
    """Every process below ``pid`` (containers in pid namespaces of their own included)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        yield p
        todo.extend(children.get(p, []))


def _memory_cgroup_dir(pid: int) -> Path | None:
    """Where the process backend makes container cgroups: under the invoker's own memory
    cgroup (v1), else its unified one (v2)."""
    own = parse_proc_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
    mounts = parse_mountinfo(Path(f"/proc/{pid}/mountinfo").read_text())
    for controller_name in ("memory", ""):
        if controller_name in own and controller_name in mounts:
            mount, root = mounts[controller_name]
            path = own[controller_name]
            if root != "/" and path.startswith(root):
                path = path[len(root) :]
            return Path(mount) / path.lstrip("/")
    return None


def _scrape(url: str) -> dict[str, float]:
    """Prometheus text → metric name → the sum of its series."""
    return {name: sum(series.values()) for name, series in _series(url).items()}


def _series(url: str) -> dict[str, dict[str, float]]:
    """Prometheus text → metric name → its series (by their labels' text)."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name_labels, _, value = line.rpartition(" ")
            name, _, labels = name_labels.partition("{")
            out.setdefault(name, {})[labels.rstrip("}")] = float(value)
    return out


def _by_label(series: dict[str, float], label: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for labels, value in series.items():
        found = re.search(rf'{label}="([^"]*)"', labels)
        if found:
            out[found.group(1)] = out.get(found.group(1), 0) + int(value)
    return out


async def run_soak(
    kafka: KafkaAddress,
    couchdb: CouchAddress,
    tmp: Path,
    *,
    minutes: float,
    rate: float = 20.0,
    sample_s: float = 5.0,
    warmup_s: float = 60.0,
    cores: int = 2,
    seed: int = 1,
) -> Soak:
    """Run the invoker under :data:`MIX` at ``rate`` calls per second for ``minutes``,
    sampling every ``sample_s``; the calls' outcome is counted after the load stops."""
    config = make_config(
        tmp, action_cores=tuple(range(cores)), user_memory_mb=2048, policy="fc", pause_grace_s=1
    )
    tmp.mkdir(parents=True, exist_ok=True)
    proc = InvokerProcess(config, kafka.bootstrap, couchdb, tmp / "invoker.log")
    # The stock accounting: kept at their footprints, the mix's actions would all stay warm
    # (a few MB each), and the churn of cold starts and evictions this run is for would end.
    proc.extra_args += ["--keep-alive", "limit"]
    result = Soak(warmup_s=warmup_s)
    rng = random.Random(seed)
    try:
        async with controller(kafka, couchdb, config) as stub:
            targets = await _create_actions(stub)
            proc.start()
            first = await stub.invoke(*targets["quick"][0], blocking=False)
            await stub.wait_completion(first, timeout_s=90)
            sampler = Sampler(proc)
            start = CLOCK.now()
            aids = [first]
            kinds = [k.name for k in MIX]
            weights = [k.share for k in MIX]

            async def sample_every() -> None:
                while True:
                    values = await _sample(sampler)
                    result.samples.append({"t": CLOCK.now() - start, **values})
                    await asyncio.sleep(sample_s)

            sampling = spawn(sample_every(), name="soak-sampler")
            try:
                for i in itertools.count():
                    due = start + i / rate
                    if due >= start + minutes * 60:
                        break
                    await asyncio.sleep(max(0.0, due - CLOCK.now()))
                    kind = rng.choices(kinds, weights)[0]
                    action, rev = rng.choice(targets[kind])
                    aids.append(await stub.invoke(action, rev, blocking=False))
                await _answered(stub, aids, timeout_s=120)
                if sampling.done():  # it ends only by failing: the run has no figures
                    raise RuntimeError("the soak's sampler failed") from sampling.exception()
            finally:
                sampling.cancel()
                await asyncio.gather(sampling, return_exceptions=True)
            _count_answers(result, stub, aids)
            final = await asyncio.to_thread(_series, sampler.metrics_url)
            result.statuses = _by_label(final.get("invoker_activations_total", {}), "status")
            result.starts = _by_label(final.get("invoker_container_starts_total", {}), "start")
            result.recorded = await _records(stub, config.activations_db, len(aids))
        if proc.terminate() != 0:
            raise RuntimeError(f"the invoker did not stop cleanly:\n{proc.log()[-3000:]}")
        return result
    finally:
        proc.stop()


async def _sample(sampler: Sampler, tries: int = 3) -> dict[str, float]:
    """One sample; one that meets a file removed under it (a container going) or a slow
    scrape is taken again, a few times, before the error ends the run."""
    for _ in range(tries - 1):
        try:
            return await asyncio.to_thread(sampler.sample)
        except OSError:
            await asyncio.sleep(0.5)
    return await asyncio.to_thread(sampler.sample)


async def _create_actions(stub: ControllerStub) -> dict[str, list[tuple[Any, str]]]:
    targets: dict[str, list[tuple[Any, str]]] = {}
    for k in MIX:
        for n in range(k.actions):
            name = k.name if k.actions == 1 else f"{k.name}-{n}"
            made = await stub.create_action(
                name, k.code.encode(), memory_mb=256, timeout_ms=k.timeout_ms
            )
            targets.setdefault(k.name, []).append(made)
    return targets


async def _answered(stub: ControllerStub, aids: list[str], timeout_s: float) -> None:
    """Until every call has its completion, or ``timeout_s`` after the load stopped."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            for aid in aids:
                await stub.wait_completion(aid, timeout_s)


def _completions(stub: ControllerStub, aid: str) -> int:
    return sum(1 for a in stub.acks.get(aid, []) if "instance" in a)


def _count_answers(result: Soak, stub: ControllerStub, aids: list[str]) -> None:
    result.sent = len(aids)
    for aid in aids:
        n = _completions(stub, aid)
        result.answered_once += n == 1
        result.answered_twice += n > 1
        result.unanswered += n == 0


async def _records(stub: ControllerStub, db: str, wanted: int) -> int:
    """The activation records in the database, once the invoker has written them all (or
    after 60 s)."""
    deadline = CLOCK.now() + 60
    while True:
        count = await stub.store.doc_count(db)
        if count >= wanted or CLOCK.now() > deadline:
            return count
        await asyncio.sleep(1.0)


def write(result: Soak, out: Path) -> None:
    """The samples (JSON lines), the report and the plot, under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "samples.jsonl", "w") as f:
        for s in result.samples:
            f.write(json.dumps(s) + "\n")
    (out / "report.txt").write_text(result.report() + "\n")
    result.plot(out / "soak.png")
