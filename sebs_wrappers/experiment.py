"""``ow-invoker experiment``: the call-scheduling paper's protocol on SeBS functions.

For each policy: start ``ow-invoker standalone --policy P`` (fresh port and state dir), deploy
the functions, check each once, warm containers (``cores`` concurrent calls per function), measure
idle medians (one call at a time), then replay the same seeded uniform call sequences for every
intensity and repetition and join the client timings with the activation records. At the end:
CSV/JSON results, plots and a Markdown report (``sebs_wrappers.report``). A policy label
``P+preempt@N`` runs P with ``--preempt`` on N action cores (``sebs_wrappers.labels``); the
calls are made for ``--cores`` whatever a platform's cores, so ``fc@1 openwhisk@2`` compares
two platforms on the same load.

``--short`` is a configuration that ends in a few minutes on 2 cores (CI); the defaults are the
full configuration documented in docs/experiments.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sebs_wrappers.labels import CORES, PREEMPT, parse_label, with_preempt
from whisk.argtypes import (
    input_dir,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
)

if TYPE_CHECKING:
    from sebs_wrappers.analysis import CallRow
    from sebs_wrappers.catalog import Benchmark
    from sebs_wrappers.deploy import Deployment
    from sebs_wrappers.inputs import PreparedInput
    from sebs_wrappers.objstore import Services
    from sebs_wrappers.platform import Platform
    from sebs_wrappers.progress import ExperimentProgress
    from whisk.client import OpenWhisk

Lateness = dict[tuple, dict[str, float]]

HELP = "run the node-level scheduling experiment (SeBS functions x policies) and write a report"

DEFAULT_POLICIES = ("openwhisk", "fifo", "sept", "eect", "rect", "fc")


@dataclass
class ExperimentConfig:
    functions: list[str]
    policies: list[str]
    intensities: list[float]
    repetitions: int = 5
    window_s: float = 60.0
    cores: int = 2
    user_memory_mb: int = 12288
    action_timeout_ms: int = 300_000
    seed: int = 1
    idle_samples: int = 10
    warm_rounds: int = 2
    cooldown_s: float = 2.0
    out_dir: Path = Path("results/experiment")
    apihost: str | None = None
    auth: str = ""
    driver: str = "python"
    sizes: dict[str, str] = field(default_factory=dict)
    short: bool = False
    resume: bool = False
    kind: str = "python:3.11"  # a kind of the stock runtimes manifest

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["out_dir"] = str(self.out_dir)
        d.pop("auth")
        return d


SHORT = {
    "intensities": [120.0],
    "repetitions": 1,
    "window_s": 15.0,
    "idle_samples": 3,
    "warm_rounds": 1,
    "cooldown_s": 1.0,
    "user_memory_mb": 4096,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from whisk.client import default_auth

    a = parser.add_argument
    a("--short", action="store_true", help="CI configuration: 3 fast functions, I=120, 15 s, 1 rep")
    a("--functions", nargs="+", help="benchmarks (ids or numbers; default: all 11)")
    a(
        "--policies",
        nargs="+",
        help=f"default: {' '.join(DEFAULT_POLICIES)}; a label POLICY[{PREEMPT}][{CORES}N] "
        f"runs POLICY ({PREEMPT}: with --preempt; {CORES}N: on N action cores instead of "
        f"--cores), on the same calls (e.g. sept sept{PREEMPT}, or fc{CORES}1 openwhisk{CORES}2)",
    )
    a(
        "--intensities",
        nargs="+",
        type=positive_float,
        help="calls per core per minute (default 30 60 90 120)",
    )
    a("--repetitions", type=positive_int, help="call sequences per intensity (default 5)")
    a(
        "--window",
        type=positive_float,
        dest="window_s",
        help="seconds the calls spread over (default 60)",
    )
    a(
        "--cores",
        type=positive_int,
        help="cores the load is made for (calls = I x cores x window / 60), and the action "
        f"cores of every platform whose label has no {CORES}N (default 2)",
    )
    a("--user-memory", type=positive_int, dest="user_memory_mb", help="container memory pool, MB")
    a("--action-timeout-ms", type=positive_int, help="raised action time limit (default 300000)")
    a("--seed", type=int, help="base seed of the call sequences (default 1)")
    a(
        "--idle-samples",
        type=positive_int,
        help="one-at-a-time calls per function for p (default 10)",
    )
    a(
        "--warm-rounds",
        type=nonnegative_int,
        help="rounds of `cores` concurrent warm-up calls (default 2)",
    )
    a("--cooldown", type=nonnegative_float, dest="cooldown_s", help="pause between runs, s")
    a("--size", action="append", default=[], metavar="[BENCH=]SIZE", help="SeBS input sizes")
    a("--out", type=Path, dest="out_dir", help="output directory (default results/experiment)")
    a("--apihost", help="use this running OpenWhisk instead of starting standalone per policy")
    a("--auth", default=default_auth(), help="uuid:key (default: guest)")
    a("--driver", choices=("python", "gatling"), default="python", help="load generator")
    a(
        "--kind",
        default="python:3.11",
        help="action kind for the functions, as the deployment's runtimes manifest names it "
        "(default %(default)s; the stock manifest has python:3.10 and python:3.11)",
    )
    a("--resume", action="store_true", help="keep the policies already measured in --out")
    a(
        "--preempt",
        action="store_true",
        help=f"run every policy with --preempt (labels POLICY{PREEMPT}; docs/policies.md)",
    )
    a(
        "--report-only",
        type=input_dir,
        metavar="DIR",
        help="re-analyse DIR's calls.csv and idle.csv",
    )


def check_label(label: str) -> None:
    """Refuse a label whose platform could not start, before hours of measuring."""
    from policies import POLICY_NAMES

    name = parse_label(label).policy
    if name not in POLICY_NAMES:
        raise ValueError(
            f"policy label {label!r}: unknown policy {name!r}; choose one of "
            + ", ".join(POLICY_NAMES)
        )


def platform_cores(cfg: ExperimentConfig, label: str) -> int:
    """Action cores of the platform a label names: its own ``@N``, else ``--cores``."""
    cores = parse_label(label).cores
    return cfg.cores if cores is None else cores


def make_platform(cfg: ExperimentConfig, label: str, services: Services | None = None) -> Platform:
    """The ``ow-invoker standalone`` a label asks for (not started): its policy, with
    ``--preempt`` or not, on its own action cores; its sandboxed actions may reach the
    local object store and file server."""
    from sebs_wrappers.platform import Platform

    parsed = parse_label(label)
    return Platform(
        parsed.policy,
        extra_args=("--preempt",) if parsed.preempt else (),
        host_ports=services.host_ports() if services is not None else (),
        cores=platform_cores(cfg, label),
        user_memory_mb=cfg.user_memory_mb,
        state_dir=cfg.out_dir / "state" / f"platform-{label}",
        log=cfg.out_dir / "logs" / f"platform-{label}.log",
    )


def config_from_args(args: argparse.Namespace) -> ExperimentConfig:
    from sebs_wrappers import catalog

    base: dict[str, Any] = {
        "functions": list(catalog.SHORT_BENCHMARKS if args.short else catalog.DEFAULT_BENCHMARKS),
        "policies": list(DEFAULT_POLICIES),
        "intensities": [30.0, 60.0, 90.0, 120.0],
    }
    if args.short:
        base.update(SHORT)
        base["out_dir"] = Path("results/experiment-short")
    for name in (
        "repetitions",
        "window_s",
        "cores",
        "user_memory_mb",
        "action_timeout_ms",
        "seed",
        "idle_samples",
        "warm_rounds",
        "cooldown_s",
        "out_dir",
        "intensities",
        "policies",
    ):
        value = getattr(args, name, None)
        if value is not None:
            base[name] = value
    if args.functions:
        base["functions"] = [b.id for b in catalog.resolve(args.functions)]
    if args.apihost:
        base["apihost"] = args.apihost
        if not args.policies:
            base["policies"] = ["external"]
    else:
        for label in base["policies"]:
            check_label(label)
        if getattr(args, "preempt", False):
            base["policies"] = [with_preempt(p) for p in base["policies"]]
    sizes: dict[str, str] = {}
    for v in args.size:
        key, _, size = v.rpartition("=")
        sizes[key or "*"] = size
    return ExperimentConfig(
        auth=args.auth,
        driver=args.driver,
        sizes=sizes,
        short=args.short,
        resume=args.resume,
        kind=args.kind,
        **base,
    )


def main(args: argparse.Namespace) -> int:
    from sebs_wrappers import results

    if args.report_only:
        for name in ("calls.csv", "idle.csv"):
            if not (args.report_only / name).is_file():
                raise ValueError(f"{args.report_only}: no {name} to analyse")
        path = results.write_outputs(args.report_only)
        print(f"report: {path}")
        return 0
    cfg = config_from_args(args)
    from sebs_wrappers import plots

    if not plots.available():  # said now, not after hours of measuring
        print(f"note: {plots.MISSING}", file=sys.stderr)
    path = asyncio.run(run(cfg))
    print(f"report: {path}")
    return 0


# --- the protocol --------------------------------------------------------------------------


async def run(cfg: ExperimentConfig) -> Path:
    """Run every policy, then analyse and report; returns the report path."""
    from sebs_wrappers import catalog, results
    from sebs_wrappers.objstore import LocalServices
    from sebs_wrappers.progress import ExperimentProgress
    from sebs_wrappers.scenario import call_count

    out = cfg.out_dir
    out.mkdir(parents=True, exist_ok=True)
    rows: list[CallRow] = []
    idle: dict[str, dict[str, list[float]]] = {}
    lateness: Lateness = {}
    if cfg.resume and (out / "calls.csv").exists():
        # raw files are saved after each completed policy, so a policy found there is whole
        rows, idle, lateness = results.load_raw(out)
    todo = [p for p in cfg.policies if p not in {r.policy for r in rows}]
    (out / "config.json").write_text(json.dumps(cfg.to_json(), indent=1))
    benches = catalog.resolve(cfg.functions)
    total = (
        len(todo)
        * cfg.repetitions
        * sum(call_count(i, cfg.cores, cfg.window_s) for i in cfg.intensities)
    )
    state = out / "state"
    services_cm = LocalServices(state / "data" / "files", out / "logs")
    needs_store = any(b.needs_storage for b in benches)
    prepared: dict[str, PreparedInput] = {}
    with ExperimentProgress(total, out / "experiment.log") as progress:
        if len(todo) < len(cfg.policies):
            done = [p for p in cfg.policies if p not in todo]
            progress.log(f"resuming: keeping the measurements of {', '.join(done)}")
        services = services_cm.start() if needs_store and todo else None
        try:
            for policy in todo:
                policy_rows, policy_idle, policy_late = await run_policy(
                    cfg, policy, benches, services, prepared, progress
                )
                rows += policy_rows
                idle[policy] = policy_idle
                lateness.update(policy_late)
                results.save_raw(out, rows, idle, lateness)
        finally:
            if services is not None:
                services_cm.stop()
    return results.write_outputs(out)


async def run_policy(
    cfg: ExperimentConfig,
    policy: str,
    benches: list[Benchmark],
    services: Services | None,
    prepared: dict[str, PreparedInput],
    progress: ExperimentProgress,
) -> tuple[list[CallRow], dict[str, list[float]], Lateness]:
    """One policy: platform up, deploy, warm, idle medians, all runs, platform down."""
    from sebs_wrappers import deploy
    from whisk.client import OpenWhisk

    out = cfg.out_dir
    platform = None
    apihost = cfg.apihost
    cores = platform_cores(cfg, policy)
    if apihost is None:
        platform = make_platform(cfg, policy, services)
        progress.log(
            f"[{policy}] starting standalone on port {platform.port}, {cores} action core(s)"
        )
        await platform.start(cfg.auth)
        apihost = platform.apihost
    rows: list[CallRow] = []
    lateness: Lateness = {}
    try:
        async with OpenWhisk(apihost, cfg.auth) as ow:
            opts = deploy.DeployOptions(
                kind=cfg.kind, sizes=cfg.sizes, timeout_ms=cfg.action_timeout_ms
            )
            dep = await deploy.deploy(
                benches,
                ow,
                services,
                out / "state",
                opts,
                log=lambda m: progress.log(f"[{policy}] {m}"),
                prepared=prepared,
            )
            await ow.wait_invokers()
            checks = await deploy.verify(dep, ow, None, services)
            bad = [c for c in checks if not c.ok]
            if bad:
                raise RuntimeError(
                    f"[{policy}] verification failed: "
                    + "; ".join(f"{c.action}: {c.detail}" for c in bad)
                )
            progress.log(f"[{policy}] verified {len(checks)} actions; warming up")
            await warm_up(ow, dep, cores, cfg.warm_rounds)
            idle = await measure_idle(ow, dep, cfg.idle_samples)
            progress.log(
                f"[{policy}] idle medians: "
                + ", ".join(f"{a}={1e3 * statistics.median(v):.1f}ms" for a, v in idle.items())
            )
            for intensity in cfg.intensities:
                for rep in range(cfg.repetitions):
                    run_rows, late = await run_once(
                        cfg, policy, intensity, rep, dep, ow, services, progress
                    )
                    rows += run_rows
                    lateness[(policy, intensity, rep)] = late
                    await asyncio.sleep(cfg.cooldown_s)
    finally:
        if platform is not None:
            platform.stop()
    return rows, idle, lateness


async def warm_up(ow: OpenWhisk, dep: Deployment, cores: int, rounds: int) -> None:
    """Leave up to ``cores`` warm containers per function before anything is measured."""
    for _ in range(rounds):
        for name, action in dep.actions.items():
            await asyncio.gather(*(ow.invoke(name, action.params) for _ in range(cores)))


async def measure_idle(ow: OpenWhisk, dep: Deployment, samples: int) -> dict[str, list[float]]:
    """Client response times of warm calls made one at a time (the paper's idle medians)."""
    out: dict[str, list[float]] = {}
    for name, action in dep.actions.items():
        times = []
        for _ in range(samples):
            t0 = time.monotonic()
            reply = await ow.invoke(name, action.params)
            if reply.status == 200:
                times.append(time.monotonic() - t0)
        out[name] = times
    return out


async def run_once(
    cfg: ExperimentConfig,
    policy: str,
    intensity: float,
    rep: int,
    dep: Deployment,
    ow: OpenWhisk,
    services: Services | None,
    progress: ExperimentProgress,
) -> tuple[list[CallRow], dict[str, float]]:
    """Replay one call sequence and join its timings with the activation records."""
    from gatling import runner as gatling_runner
    from gatling.replay import ReplayResult, replay
    from gatling.scenario import write_scenario, write_timings
    from sebs_wrappers import results
    from sebs_wrappers.scenario import uniform_calls

    tag = f"i{intensity:g}-r{rep}"
    actions = sorted(dep.actions)
    calls = uniform_calls(  # made for --cores, whatever cores this platform has
        actions,
        {a: dep.actions[a].params for a in actions},
        intensity=intensity,
        cores=cfg.cores,
        window_s=cfg.window_s,
        seed=cfg.seed,
        repetition=rep,
    )
    scenario_path = cfg.out_dir / "scenarios" / f"{tag}.jsonl"
    write_scenario(scenario_path, calls)
    if services is not None:
        for action in dep.actions.values():
            for prefix in action.outputs:
                await asyncio.to_thread(services.storage.delete_prefix, prefix + "/")
    run_dir = cfg.out_dir / "runs" / policy / tag
    progress.phase(f"{policy} I={intensity:g} rep {rep + 1}/{cfg.repetitions}: {len(calls)} calls")
    if cfg.driver == "gatling":
        timings = await asyncio.to_thread(
            gatling_runner.run,
            scenario_path,
            run_dir / "timings.csv",
            ow.apihost,
            cfg.auth,
            log=run_dir / "gatling.log",
        )
        res = ReplayResult(
            timings=timings, epoch_start_s=timings[0].epoch_start_s if timings else 0
        )
        progress.advance(len(timings))
    else:
        res = await replay(calls, ow, on_done=lambda _t: progress.advance(1))
        write_timings(run_dir / "timings.csv", res.timings)
    records = await results.collect_records(ow, res)
    results.save_records(run_dir / "records.jsonl", records)
    late = res.lateness()
    progress.log(f"[{policy}] {tag}: {res.summary()}")
    return results.join(policy, intensity, rep, res.timings, records), late
