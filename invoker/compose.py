"""Building an invoker from configuration: the one place that picks the backends."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from containers.backend import BackendContext
from containers.registry import make_backend
from invoker.config import InvokerConfig
from invoker.metrics import InvokerMetrics
from invoker.service import Invoker
from whisk.bus import Bus
from whisk.clock import Clock
from whisk.manifest import Manifest
from whisk.store import Store

if TYPE_CHECKING:
    from invoker.fpc.presence import Presence


def runtime_manifest(cfg: InvokerConfig) -> Manifest:
    """The stock manifest when configured (``RUNTIMES_MANIFEST``: JSON or a path), its
    runtime images from ``runtimes_registry`` when one is given."""
    manifest = Manifest.from_setting(cfg.runtimes_manifest) if cfg.runtimes_manifest else Manifest()
    return manifest.with_registry(cfg.runtimes_registry)


def build_invoker(
    cfg: InvokerConfig,
    *,
    bus: Bus,
    store: Store,
    clock: Clock,
    manifest: Manifest | None = None,
    presence: Presence | None = None,
) -> Invoker:
    """The container backend named by ``cfg.backend`` (from :mod:`containers.registry`, with
    its settings ``cfg.backend_settings``), the runtime manifest (stock file when
    configured), and the GPU pool when ``cfg.gpu`` is set (``--gpu-devices``). ``presence``:
    the scheduler mode's (``cfg.mode == "fpc"``); none publishes nothing."""
    if manifest is None:
        manifest = runtime_manifest(cfg)
    if cfg.runtime_images:
        manifest = manifest.with_images(dict(i.split("=", 1) for i in cfg.runtime_images))
    context = BackendContext(Path(cfg.state_dir), cfg.container_prefix, cfg.pids_limit)
    backend = make_backend(cfg.backend, cfg.backend_settings, context)
    metrics = InvokerMetrics()
    gpu_pool = None
    if cfg.gpu is not None:
        from invoker.gpu import make_gpu_pool

        gpu_pool = make_gpu_pool(cfg, metrics.registry)
    return Invoker(
        cfg,
        bus=bus,
        store=store,
        backend=backend,
        clock=clock,
        manifest=manifest,
        metrics=metrics,
        gpu_pool=gpu_pool,
        presence=presence,
    )
