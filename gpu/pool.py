"""``GpuPool``: the co-located GPU model-cache pool an invoker owns.

Composition root of the live pool: devices (NVML or virtual), one worker process per device,
the loader process, the host tier, the scheduler chosen by config, the dispatcher, the
Prometheus metrics and the socket server that actions reach through ``__OW_GPU_POOL``; and
for kTasks (``gpu.kaas``) the data layer, the constant cache and their driver, whose calls
go to the same device workers.

    pool = GpuPool(GpuConfig(devices="virtual:2", memory_mb=512), registry=registry)
    await pool.start()
    env = pool.action_env()      # {"__OW_GPU_POOL": "unix:/dev/shm/owgpu-…/pool.sock"}
    ...
    await pool.stop()
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import shutil
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from gpu.cache import CacheView
from gpu.config import GpuConfig
from gpu.device_workers import DeviceWorkers, UnknownModel, WorkerProcess
from gpu.devices import DeviceSpec, Nvml, discover
from gpu.dispatcher import Dispatcher, InferenceResult, JobResult, WorkerCrashed
from gpu.estimates import DeviceTypePrior, Estimator
from gpu.hosttier import HostModel, HostTier, RegistrationError
from gpu.kaas.action import invocation
from gpu.kaas.constants import ConstantCache
from gpu.kaas.driver import KaasDriver
from gpu.kaas.ktask_queue import KDevice
from gpu.kaas.spec import KTaskError, TensorSpec
from gpu.kaas.store import DataStore, StoredObject
from gpu.metrics import PoolMetrics
from gpu.policies import make_scheduler
from gpu.protocol import parse_address
from gpu.scheduler import DeviceSlot, Dispatch, GpuScheduler, Request
from gpu.server import OPERATOR, PoolServer
from gpu.stats import PoolStats
from whisk.clock import Clock, SystemClock

log = logging.getLogger(__name__)

ENV_VAR = "__OW_GPU_POOL"


def _used(cache: CacheView, device: int) -> float:
    """Bytes of models resident on one device, for its gauge."""
    return float(cache.devices[device].used)


# A kernel of the caller's own CUDA source runs in the device's shared executor, where device
# pointers reach every tenant's constants and buffers: no sandbox separates them on the GPU.
CUDA_SOURCE_REFUSED = (
    "this kTask has a kernel of its own CUDA source, which this GPU pool does not run: such a "
    "kernel runs in the executor every tenant shares and could read or write their device "
    "memory; use built-in kernels, or ask the node's operator (--gpu-kaas-cuda-source, for "
    "trusted tenants only)"
)


class GpuPool:
    def __init__(
        self,
        config: GpuConfig | None = None,
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock | None = None,
        devices: Sequence[DeviceSpec] | None = None,
    ) -> None:
        self.config = config or GpuConfig()
        self.registry = registry
        self.clock = clock or SystemClock()
        self._given_devices = list(devices) if devices is not None else None
        self.devices: list[DeviceSpec] = []
        self.note = ""
        self._address = ""
        self._dir: Path | None = None
        self._nvml: Nvml | None = None
        self.loader: WorkerProcess | None = None
        self.backend: DeviceWorkers | None = None
        self.host: HostTier
        self.scheduler: GpuScheduler
        self.dispatcher: Dispatcher
        self.stats: PoolStats
        self.metrics: PoolMetrics | None = None
        self._server: PoolServer | None = None
        self._data_server: PoolServer | None = None
        self._data_address = ""
        self._started = False
        self.kaas: KaasDriver
        self._inline = itertools.count(1)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        max_payload = cfg.max_payload_mb << 20
        if self._given_devices is not None:
            self.devices, self.note = self._given_devices, "given devices"
        else:
            self._nvml = Nvml()
            self.devices, self.note = discover(cfg, self._nvml)
        log.info("GPU pool: %s, policy %s", self.note, cfg.policy)
        shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
        self._dir = Path(tempfile.mkdtemp(prefix="owgpu-", dir=cfg.state_dir or shm))
        slots = [DeviceSlot(d.index, d.memory_bytes, d.dtype) for d in self.devices]
        estimator = Estimator()
        self.scheduler = make_scheduler(
            cfg.policy,
            slots,
            self.clock,
            estimator=estimator,
            o3_limit=cfg.o3_limit,
            affinity_penalty=cfg.affinity_penalty,
        )
        cache = self.scheduler.cache
        self.loader = WorkerProcess("loader", ["--role", "loader"], max_payload=max_payload)
        self.host = HostTier(
            self._dir,
            cfg.host_memory_mb << 20,
            self._ingest,
            is_resident=lambda k: bool(cache.holders(k)),
            check_size=cache.check_fits,
            on_evict=self._host_evicted,
        )
        self.backend = DeviceWorkers(
            self.devices,
            self.host,
            threads=cfg.worker_threads,
            max_payload=max_payload,
            clock=self.clock,
            on_restart=self._worker_restarted,
        )
        try:
            _, infos = await asyncio.gather(self.loader.start(), self.backend.start())
        except BaseException:
            await self._teardown()
            raise
        for dtype in {d.dtype for d in self.devices}:
            mine = [i for d, i in zip(self.devices, infos, strict=True) if d.dtype == dtype]
            estimator.priors[dtype] = DeviceTypePrior(
                statistics.median(i["copy_bw"] for i in mine),
                statistics.median(i["compute_bw"] for i in mine),
            )
        self.stats = PoolStats(len(self.devices), start=self.clock.now())
        if self.registry is not None:
            self.metrics = PoolMetrics(self.registry, len(self.devices))
            self.metrics.bind(
                lambda: float(self.scheduler.pending),
                lambda: float(len(cache.holders(self._most_popular()))),
                [functools.partial(_used, cache, i) for i in range(len(self.devices))],
                [self._nvml_util(d) for d in self.devices if d.kind == "cuda"],
            )
        self.dispatcher = Dispatcher(
            self.scheduler,
            self.backend,
            self.clock,
            stats=self.stats,
            max_retries=cfg.max_retries,
            on_event=self._on_event,
        )
        self._start_kaas([i["copy_bw"] for i in infos])
        address = cfg.address or f"unix:{self._dir / 'pool.sock'}"
        self._server = PoolServer(self, address, max_payload)
        operator = self._dir / "operator"  # never shared into a sandbox, unlike pool.sock
        operator.mkdir(mode=0o700)
        operator.chmod(0o700)  # whatever the umask
        self._data_server = PoolServer(
            self, f"unix:{operator / 'data.sock'}", max_payload, role=OPERATOR, mode=0o600
        )
        try:
            self._address = await self._server.start()
            self._data_address = await self._data_server.start()
        except BaseException:
            await self._teardown()
            raise
        self._started = True

    async def stop(self) -> None:
        """Fail waiting requests, stop the server and every worker, delete the host tier."""
        if not self._started and self._dir is None:
            return
        self._started = False
        for server in (self._server, self._data_server):
            if server is not None:
                await server.stop()
        self._server = self._data_server = None
        if hasattr(self, "dispatcher"):
            await self.dispatcher.close()
        if hasattr(self, "kaas"):
            await self.kaas.close()
        await self._teardown()

    async def _teardown(self) -> None:
        if self.backend is not None:
            await self.backend.stop()
        if self.loader is not None:
            await self.loader.stop()
        if hasattr(self, "host"):
            self.host.close()
        if hasattr(self, "kaas"):
            self.kaas.store.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if self._nvml is not None:
            self._nvml.close()

    async def __aenter__(self) -> GpuPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- what the invoker needs -----------------------------------------------------------

    @property
    def address(self) -> str:
        """``unix:/path`` or ``tcp:127.0.0.1:PORT``, valid after ``start``."""
        return self._address

    @property
    def data_address(self) -> str:
        """The operator's socket for the kTask data layer (``unix:/path``, valid after
        ``start``): a 0600 socket in a 0700 directory of the pool's state directory, which no
        sandbox gets (they get ``address``, which refuses data ops). Keys on it are absolute:
        alice's kaas actions read ``graph/A`` where the operator put ``alice/graph/A``."""
        return self._data_address

    def action_env(self) -> dict[str, str]:
        """Extra init environment for an action marked ``gpu``."""
        return {ENV_VAR: self._address}

    def socket_path(self) -> str | None:
        """The Unix socket to bind-mount into a container (None for a TCP address)."""
        kind, target = parse_address(self._address)
        return str(target) if kind == "unix" else None

    # -- operations (the server calls these; tests and benchmarks may too) ---------------

    @property
    def policy(self) -> str:
        return self.config.policy

    @property
    def device_count(self) -> int:
        return len(self.devices)

    def lookup(self, key: str) -> HostModel | None:
        return self.host.get(key)

    async def register(self, key: str, data: bytes) -> HostModel:
        return await self.host.register(key, data)

    async def infer(
        self,
        key: str,
        payload: bytes,
        *,
        batch: int = 1,
        function: str = "",
        namespace: str = "",
    ) -> InferenceResult:
        m = self.host.get(key)
        if m is None:
            raise UnknownModel(f"model {key[:12]} is not registered (send its bytes)")
        client = namespace if self.config.fair_share_by == "namespace" else function
        req = Request(key, m.size, max(1, batch), client, self.clock.now(), payload=payload)
        res = await self.dispatcher.submit(req)
        if self.metrics is not None:
            self.metrics.on_latency(res.hit, res.latency_s)
        return res

    # -- kTasks (gpu.kaas): the data layer by key, and runs --------------------------------

    def put(self, key: str, data: bytes, spec: TensorSpec) -> StoredObject:
        """Store ``data`` under ``key`` (its next version); kTasks waiting for it may start."""
        o = self.kaas.store.put(key, data, spec)
        self.kaas.pump()
        return o

    def get(self, key: str) -> tuple[StoredObject, bytes]:
        """The key's current version and bytes (KTaskError when it holds nothing)."""
        return self.kaas.store.read(key)

    def delete(self, key: str) -> None:
        self.kaas.store.delete(key)

    async def ktask(
        self,
        code: str | Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        namespace: str,
        function: str = "",
    ) -> dict[str, Any]:
        """Run a kTask (a ``kaas`` action's code, bound by its invocation's parameters,
        ``gpu.kaas.action``) for ``namespace``, the caller's (trusted: the invoker's, never
        a sandbox's word), and return the reply: outputs by key and version. Every key is
        stored under the namespace (``namespace/key``); the reply and errors name keys as
        the caller wrote them. Raises ``KTaskError`` for the request's errors,
        ``WorkerError`` for the pool's."""
        n = next(self._inline)
        inv = invocation(
            code,
            params,
            namespace=namespace,
            private=lambda key: f"{key}~inline{n}",
            device_memory=max(d.memory_bytes for d in self.devices),
            max_wait_s=self.config.kaas_max_wait_s,
        )
        if inv.task.needs_cuda and not self.config.kaas_cuda_source:
            raise KTaskError(CUDA_SOURCE_REFUSED)
        client = namespace if self.config.fair_share_by == "namespace" else function
        put: list[str] = []
        try:
            for key, spec, data in inv.inline:
                put.append(self.kaas.store.put(key, data, spec).key)
            done = await self.kaas.run(
                inv.task, client, fetch=inv.fetch, input_timeout_s=inv.wait_s
            )
        except KTaskError as e:
            raise KTaskError(inv.message(str(e))) from None
        finally:
            for key in put:
                self.kaas.store.delete(key)
        return inv.reply(done.reply())

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policy": self.config.policy,
            "note": self.note,
            "devices": [
                {
                    "index": d.index,
                    "name": d.name,
                    "capacity": d.memory_bytes,
                    "used": self.scheduler.cache.devices[d.index].used,
                    "resident": self.scheduler.cache.devices[d.index].lru(),
                    "busy": self.scheduler.state[d.index].busy,
                    "pid": self.backend.workers[d.index].pid if self.backend else None,
                    "restarts": self.backend.restarts[d.index] if self.backend else 0,
                }
                for d in self.devices
            ],
            "host_models": len(self.host),
            "host_bytes": self.host.used,
            "pending": self.scheduler.pending,
        }
        out.update(self.stats.summary(self.clock.now()))
        if hasattr(self, "kaas"):
            k = self.kaas
            out["kaas"] = {
                "keys": len(k.store),
                "bytes": k.store.used,
                "evictions": k.store.evictions,
                "waiting": len(k.queue),
                "runs": k.runs,
                "failed": k.failures,
                "constants": [k.constants.resident(d.index) for d in self.devices],
                "constant_hits": k.constants.hits,
                "constant_misses": k.constants.misses,
            }
        return out

    # -- internals -------------------------------------------------------------------------

    def _start_kaas(self, copy_bw: list[float]) -> None:
        assert self._dir is not None
        directory = self._dir / "kaas"
        directory.mkdir()
        cfg = self.config
        budgets = [min(cfg.kaas_constant_mb << 20, d.memory_bytes) for d in self.devices]
        observer = self.metrics.on_kaas_constant if self.metrics is not None else None
        self.kaas = KaasDriver(
            [
                KDevice(d.index, b, d.kind == "cuda")
                for d, b in zip(self.devices, budgets, strict=True)
            ],
            DataStore(directory, cfg.kaas_store_mb << 20),
            ConstantCache(budgets, clock=self.clock, observer=observer),
            self._send_ktask,
            self.clock,
            copy_bytes_per_s=statistics.median(copy_bw) if copy_bw else 1e9,
            input_timeout_s=cfg.kaas_max_wait_s,
        )

    async def _send_ktask(self, device: int, header: dict[str, Any]) -> dict[str, Any]:
        assert self.backend is not None
        try:
            return await self.backend.ktask(device, header)
        except WorkerCrashed:
            if not self.scheduler.state[device].busy:  # its models went with the worker
                self.scheduler.cache.clear_device(device, self.clock.now())
            if self.metrics is not None:
                self.metrics.failures.labels("worker_crash").inc()
            raise

    async def _ingest(self, spec: dict[str, Any]) -> dict[str, Any]:
        assert self.loader is not None
        try:
            h, _ = await self.loader.call(spec)
        except WorkerCrashed as e:
            await self.loader.start()
            raise RegistrationError(f"the model loader crashed on this file: {e}") from e
        return h

    async def _host_evicted(self, key: str) -> None:
        if self.metrics is not None:
            self.metrics.evictions.labels("host").inc()
        if self.backend is not None and any(d.kind == "cuda" for d in self.devices):
            await self.backend.forget(key)

    def _worker_restarted(self, device: int, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.restarts.labels(str(device), reason).inc()

    def _on_event(self, kind: str, d: Dispatch, res: JobResult | None) -> None:
        if self.metrics is not None:
            self.metrics.on_event(kind, d, res)
            if kind == "crash":
                self.metrics.failures.labels("worker_crash").inc()

    def _most_popular(self) -> str:
        top = self.stats.requests_per_model.most_common(1)
        return top[0][0] if top else ""

    def _nvml_util(self, d: DeviceSpec) -> Any:
        nvml = self._nvml

        def read() -> float:
            if nvml is None or not nvml.available:
                return float("nan")
            try:
                return nvml.utilization(d.index)[0]
            except Exception:
                return float("nan")

        return read
