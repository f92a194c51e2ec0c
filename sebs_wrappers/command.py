"""``ow-invoker sebs``: package, store, deploy, verify and run SeBS benchmarks locally.

ow-invoker sebs list
ow-invoker sebs store start            # moto S3 + file server on loopback, left running
ow-invoker sebs deploy [BENCH ...]     # zips + inputs + actions, then one checked call each
ow-invoker sebs verify [BENCH ...]
ow-invoker sebs run-local [BENCH ...]  # through the wrapper's main(args), no platform
ow-invoker sebs store stop
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from whisk.argtypes import positive_int

HELP = "package SeBS benchmarks as OpenWhisk actions, deploy and verify them"
DEFAULT_STATE = Path(".state/sebs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from whisk.client import default_apihost, default_auth

    sub = parser.add_subparsers(dest="sebs_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser, api: bool = False) -> None:
        p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE, help="%(default)s")
        if api:
            p.add_argument("--apihost", default=default_apihost())
            p.add_argument("--auth", default=default_auth(), help="uuid:key (default: guest)")

    p = sub.add_parser("list", help="benchmarks, limits and missing dependencies")
    p.set_defaults(_sebs=_list)

    p = sub.add_parser("package", help="build the action zips")
    p.add_argument("benchmarks", nargs="*", help="ids, numbers or action names (default: all)")
    p.add_argument("--out", type=Path, default=DEFAULT_STATE / "zips")
    p.set_defaults(_sebs=_package)

    p = sub.add_parser("store", help="start/stop the loopback object store and file server")
    p.add_argument("op", choices=("start", "stop", "status"))
    common(p)
    p.set_defaults(_sebs=_store)

    p = sub.add_parser("deploy", help="create the actions (and upload their inputs), then verify")
    p.add_argument("benchmarks", nargs="*")
    common(p, api=True)
    p.add_argument(
        "--kind",
        default="python:3.11",
        help="action kind, as the runtimes manifest names it (default %(default)s)",
    )
    p.add_argument("--docker", default=None, help="blackbox image instead of a kind (stock OW)")
    p.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="[BENCH=]SIZE",
        help="SeBS input size (test|small|large), for all or one benchmark; repeatable",
    )
    p.add_argument("--memory-cap", type=positive_int, default=None, help="clamp action memory (MB)")
    p.add_argument(
        "--timeout-ms", type=positive_int, default=None, help="override every action timeout"
    )
    p.add_argument("--no-verify", action="store_true")
    p.set_defaults(_sebs=_deploy)

    p = sub.add_parser("verify", help="invoke each deployed action once and check its output")
    p.add_argument("benchmarks", nargs="*")
    common(p, api=True)
    p.set_defaults(_sebs=_verify)

    p = sub.add_parser("run-local", help="run benchmarks through the wrapper locally")
    p.add_argument("benchmarks", nargs="*")
    common(p)
    p.add_argument(
        "--repeat", type=positive_int, default=2, help="calls per benchmark (first is cold)"
    )
    p.add_argument("--size", default=None, help="SeBS input size for all")
    p.set_defaults(_sebs=_run_local)


def main(args: argparse.Namespace) -> int:
    return int(args._sebs(args) or 0)


def _services_file(state_dir: Path) -> Path:
    return state_dir / "services.json"


def _list(args: argparse.Namespace) -> int:
    from sebs_wrappers import catalog

    print(f"{'benchmark':24} {'action':28} {'MB':>5} {'timeout':>8} {'size':6} missing")
    for b in catalog.BENCHMARKS.values():
        missing = ",".join(catalog.missing_requirements(b)) or "-"
        print(
            f"{b.id:24} {b.action_name:28} {b.memory_mb:5} {b.timeout_ms // 1000:7}s "
            f"{b.size:6} {missing}"
        )
    return 0


def _package(args: argparse.Namespace) -> int:
    from sebs_wrappers import catalog, packaging

    for pkg in packaging.build_all(catalog.resolve(args.benchmarks), args.out):
        print(f"{pkg.path} {pkg.size / 1024:.0f} KiB ({len(pkg.entries)} files)")
    return 0


def ensure_services(state_dir: Path, start: bool = True):
    """The store recorded in ``state_dir`` if alive, else a newly started, detached one."""
    from sebs_wrappers.objstore import LocalServices, saved_alive

    services = saved_alive(_services_file(state_dir))
    if services is not None or not start:
        return services
    services = LocalServices(state_dir / "data" / "files", state_dir / "logs").start()
    services.save(_services_file(state_dir))
    print(
        f"started object store {services.storage.endpoint} and file server {services.files_url} "
        f"(stop with: ow-invoker sebs store stop --state-dir {state_dir})"
    )
    return services


def _store(args: argparse.Namespace) -> int:
    from sebs_wrappers.objstore import saved_alive, stop_saved

    state = _services_file(args.state_dir)
    if args.op == "start":
        running = saved_alive(state)
        if running:
            print(f"already running: {running.storage.endpoint} {running.files_url}")
        else:
            ensure_services(args.state_dir)
        return 0
    if args.op == "stop":
        print("stopped" if stop_saved(state) else "not running")
        return 0
    running = saved_alive(state)
    print(f"running: {running.storage.endpoint} {running.files_url}" if running else "not running")
    return 0 if running else 1


def _parse_sizes(values: list[str]) -> dict[str, str]:
    sizes: dict[str, str] = {}
    for v in values:
        key, _, size = v.rpartition("=")
        sizes[key or "*"] = size
    return sizes


def _print_checks(checks) -> int:
    for c in checks:
        print(f"{'ok  ' if c.ok else 'FAIL'} {c.action:28} {c.seconds:6.2f}s {c.detail}")
    failed = sum(not c.ok for c in checks)
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _deploy(args: argparse.Namespace) -> int:
    from sebs_wrappers import catalog, deploy
    from whisk.client import OpenWhisk

    benches = catalog.resolve(args.benchmarks)
    services = ensure_services(args.state_dir, start=any(b.needs_storage for b in benches))
    opts = deploy.DeployOptions(
        kind=args.kind,
        image=args.docker,
        sizes=_parse_sizes(args.size),
        memory_cap_mb=args.memory_cap,
        timeout_ms=args.timeout_ms,
    )

    async def run() -> int:
        async with OpenWhisk(args.apihost, args.auth) as ow:
            dep = await deploy.deploy(benches, ow, services, args.state_dir, opts)
            if args.no_verify:
                return 0
            names = [b.action_name for b in benches]
            return _print_checks(await deploy.verify(dep, ow, names, services))

    return asyncio.run(run())


def _verify(args: argparse.Namespace) -> int:
    from sebs_wrappers import deploy
    from whisk.client import OpenWhisk

    manifest = args.state_dir / "deployment.json"
    if not manifest.exists():
        print(f"no deployment in {args.state_dir}; run: ow-invoker sebs deploy")
        return 2
    dep = deploy.Deployment.load(manifest)
    services = ensure_services(args.state_dir, start=False)

    async def run() -> int:
        async with OpenWhisk(args.apihost, args.auth) as ow:
            names = deploy.resolve_deployed(dep, args.benchmarks)
            return _print_checks(await deploy.verify(dep, ow, names, services))

    return asyncio.run(run())


def _run_local(args: argparse.Namespace) -> int:
    import json
    import time

    from sebs_wrappers import catalog, deploy, inputs, localrun, packaging
    from sebs_wrappers.objstore import LocalServices

    benches = catalog.resolve(args.benchmarks)
    services = ensure_services(args.state_dir, start=False)
    temporary = None
    if services is None:
        temporary = LocalServices(args.state_dir / "data" / "files", args.state_dir / "logs")
        services = temporary.start()
    failed = 0
    try:
        for bench in benches:
            pkg = packaging.build(bench, args.state_dir / "zips")
            prep = inputs.prepare(bench, services, args.state_dir / "data", args.size)
            call = {**prep.params, **services.storage.action_params()}
            t0 = time.monotonic()
            results = localrun.run_zip(pkg.path, [dict(call) for _ in range(args.repeat)])
            elapsed = time.monotonic() - t0
            for r in results:
                ok, detail = deploy.check_reply(bench.action_name, 200, r)
                failed += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {bench.id:24} {detail}")
            print(
                f"     {bench.id:24} {elapsed:.2f}s total; "
                f"result {json.dumps(results[-1]['result'])[:100]}"
            )
    finally:
        if temporary:
            temporary.stop()
    return 1 if failed else 0
