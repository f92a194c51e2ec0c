"""Deploy SeBS benchmarks to an OpenWhisk API and check each one's output once.

A deployment is remembered in ``<state dir>/deployment.json``: the API host, the object store,
and per action the event to invoke it with. ``verify``, the replayer and the experiment runner
read it, so everything after ``deploy`` needs no knowledge of SeBS.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sebs_wrappers import catalog, inputs, packaging
from sebs_wrappers.catalog import Benchmark
from sebs_wrappers.objstore import Services, StorageEndpoint
from whisk.client import OpenWhisk

UNUSED_STORAGE = StorageEndpoint("127.0.0.1:9")  # for deployments of storage-free benchmarks
WRAPPER_KEYS = ("begin", "end", "results_time", "is_cold", "result", "request_id")


@dataclass
class DeployedAction:
    benchmark: str
    params: dict[str, Any]
    memory_mb: int
    timeout_ms: int
    size: str
    outputs: list[str] = field(default_factory=list)


@dataclass
class Deployment:
    apihost: str
    storage: dict[str, Any] | None
    actions: dict[str, DeployedAction] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=1, sort_keys=True))

    @classmethod
    def load(cls, path: Path) -> Deployment:
        data = json.loads(path.read_text())
        actions = {k: DeployedAction(**v) for k, v in data.pop("actions").items()}
        return cls(actions=actions, **data)


@dataclass(frozen=True)
class DeployOptions:
    kind: str = "python:3.11"  # a stock manifest kind (a stock controller refuses python:3)
    image: str | None = None
    sizes: dict[str, str] = field(default_factory=dict)
    memory_cap_mb: int | None = None
    timeout_ms: int | None = None
    data_opts: dict[str, int] = field(default_factory=dict)


def size_for(bench: Benchmark, opts: DeployOptions) -> str:
    for key in (bench.id, bench.number, bench.action_name):
        if key in opts.sizes:
            return opts.sizes[key]
    return opts.sizes.get("*", bench.size)


async def deploy(
    benches: list[Benchmark],
    ow: OpenWhisk,
    services: Services | None,
    state_dir: Path,
    opts: DeployOptions = DeployOptions(),
    log: Any = print,
    prepared: dict[str, inputs.PreparedInput] | None = None,
) -> Deployment:
    """Package, upload inputs, create actions; returns (and saves) the deployment.

    ``prepared`` caches uploaded inputs by benchmark id, so deploying the same benchmarks to a
    series of platforms sharing one object store uploads each input once.
    """
    zips = state_dir / "zips"
    data_root = state_dir / "data"
    deployment = Deployment(
        apihost=ow.apihost, storage=asdict(services.storage) if services else None
    )
    manifest = state_dir / "deployment.json"
    if manifest.exists():
        old = Deployment.load(manifest)
        if old.apihost == ow.apihost:
            deployment.actions.update(old.actions)
    for bench in benches:
        if bench.needs_storage and services is None:
            raise RuntimeError(f"{bench.id} needs the object store (sebs store start)")
        size = size_for(bench, opts)
        pkg = packaging.build(bench, zips)
        prep = prepared.get(bench.id) if prepared is not None else None
        if prep is None:
            prep = await asyncio.to_thread(
                inputs.prepare, bench, services, data_root, size, **opts.data_opts
            )
            if prepared is not None:
                prepared[bench.id] = prep
        memory = (
            bench.memory_mb
            if opts.memory_cap_mb is None
            else min(bench.memory_mb, opts.memory_cap_mb)
        )
        timeout = opts.timeout_ms or bench.timeout_ms
        # the wrapper reads the three MINIO_STORAGE_* parameters on every call, storage or not
        defaults = (services.storage if services else UNUSED_STORAGE).action_params()
        await ow.put_action(
            bench.action_name,
            pkg.path.read_bytes(),
            kind=opts.kind,
            image=opts.image,
            memory_mb=memory,
            timeout_ms=timeout,
            parameters=defaults,
        )
        deployment.actions[bench.action_name] = DeployedAction(
            bench.id, prep.params, memory, timeout, size, list(prep.output_prefixes)
        )
        log(f"deployed {bench.action_name} ({pkg.size / 1024:.0f} KiB, {memory} MB, {timeout} ms)")
    deployment.save(manifest)
    return deployment


@dataclass
class Check:
    action: str
    ok: bool
    seconds: float
    detail: str
    result: dict[str, Any] | None = None


def check_reply(action: str, status: int, body: Any) -> tuple[bool, str]:
    """Is this a successful SeBS wrapper reply (activation record or bare result)?"""
    if status >= 400 or not isinstance(body, dict):
        return False, f"HTTP {status}: {str(body)[:200]}"
    result = body.get("response", {}).get("result") if "response" in body else body
    if "response" in body and not body["response"].get("success", False):
        return False, f"activation failed: {str(result)[:300]}"
    if not isinstance(result, dict):
        return False, f"result is not an object: {str(result)[:200]}"
    missing = [k for k in WRAPPER_KEYS if k not in result]
    if isinstance(result.get("result"), str) and result["result"].startswith("Error"):
        return False, result["result"][:300]
    if missing:
        return False, f"wrapper reply lacks {missing}: {str(result)[:200]}"
    inner = result["result"]
    if not isinstance(inner, dict) or "result" not in inner:
        return False, f"benchmark result missing: {str(inner)[:200]}"
    return True, f"{result['results_time'] / 1e3:.1f} ms, cold={result['is_cold']}"


def check_output(action: DeployedAction, result: dict[str, Any], services: Services | None) -> str:
    """Benchmark-specific check: outputs written to the store must exist there."""
    inner = result.get("result", {}).get("result")
    if not (isinstance(inner, dict) and "key" in inner and services):
        return ""
    stat = services.storage.client().stat_object(
        inner.get("bucket", services.storage.bucket), inner["key"]
    )
    return f"; wrote {inner['key']} ({stat.size} bytes)"


async def verify(
    deployment: Deployment,
    ow: OpenWhisk,
    names: list[str] | None = None,
    services: Services | None = None,
) -> list[Check]:
    """Invoke each deployed action once (blocking) and check its reply and outputs."""
    checks: list[Check] = []
    for name, action in deployment.actions.items():
        if names and name not in names:
            continue
        t0 = time.monotonic()
        reply = await ow.invoke(name, action.params, result=False)
        body = reply.body
        if reply.status == 202 and reply.activation_id:
            body = await ow.wait_activation(reply.activation_id, timeout_s=action.timeout_ms / 1e3)
        ok, detail = check_reply(name, reply.status if body is None else 200, body)
        result = body.get("response", {}).get("result") if isinstance(body, dict) else None
        if ok and result is not None:
            try:
                detail += await asyncio.to_thread(check_output, action, result, services)
            except Exception as e:  # the store said no: the output is not there
                ok, detail = False, f"output check failed: {e}"
        checks.append(Check(name, ok, time.monotonic() - t0, detail, result))
    return checks


def resolve_deployed(deployment: Deployment, names: list[str] | None) -> list[str]:
    if not names:
        return list(deployment.actions)
    return [b.action_name for b in catalog.resolve(names)]
