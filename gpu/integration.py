"""How the invoker uses the GPU pool: which actions are GPU actions, and building the pool
from the invoker's configuration.

An action is a GPU action when it carries the annotation ``gpu`` with a true value
(``wsk action create infer infer.zip --kind python:3.11 -a gpu true``). Its CPU-side code
runs in an ordinary container, but it does not queue for (or hold) an exclusive core: its
model loads and inferences go to the pool's scheduler, which is where it waits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpu.pool import GpuPool
    from invoker.config import InvokerConfig
    from invoker.protocol import Action


def is_gpu_action(action: Action) -> bool:
    return action.annotation("gpu") in (True, "true", "True", 1)


def make_gpu_pool(config: InvokerConfig, registry: Any = None) -> GpuPool:
    """The pool described by ``--gpu-devices`` and friends (torch is imported here, lazily)."""
    from gpu.config import GpuConfig
    from gpu.pool import GpuPool

    return GpuPool(
        GpuConfig(
            devices=config.gpu_devices or "auto",
            memory_mb=config.gpu_memory_mb,
            policy=config.gpu_policy,
            o3_limit=config.gpu_o3_limit,
        ),
        registry=registry,
    )
