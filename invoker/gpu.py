"""How the invoker uses the GPU pool: which actions are GPU actions, what it needs of a pool,
and building the pool from the invoker's configuration.

An action is a GPU action when it carries the annotation ``gpu`` with a true value
(``wsk action create infer infer.zip --kind python:3.11 -a gpu true``). Its CPU-side code
runs in an ordinary container pinned to one action core, which it holds like any call (its
pre- and post-processing are CPU work). Its calls queue apart from the others, in receipt
order: its model loads and inferences go to the pool's scheduler, which orders the device work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gpu.pool import GpuPool
    from invoker.config import InvokerConfig
    from whisk.protocol import Action


class GpuPoolHandle(Protocol):
    """The GPU pool as the invoker uses it (:class:`gpu.pool.GpuPool` is one): started and
    stopped with the node, its address logged and handed to GPU actions. A test can pass a
    stand-in without torch."""

    @property
    def address(self) -> str:
        """Where actions reach the pool (``unix:/path`` or ``tcp:HOST:PORT``), once started."""
        ...

    @property
    def note(self) -> str:
        """What the pool found at start (devices), for the log."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def action_env(self) -> dict[str, str]:
        """Extra ``/init`` environment for a GPU action (the pool's address)."""
        ...

    def socket_path(self) -> str | None:
        """The pool's Unix socket, shared into containers (None for a TCP address)."""
        ...


def is_gpu_action(action: Action) -> bool:
    return action.annotation("gpu") in (True, "true", "True", 1)


def make_gpu_pool(config: InvokerConfig, registry: Any = None) -> GpuPool:
    """The pool ``config.gpu`` describes (``--gpu-devices`` and the other ``--gpu-*``
    settings), its metrics in ``registry``; torch is imported here, lazily."""
    from gpu.pool import GpuPool

    if config.gpu is None:
        raise ValueError("no GPU pool configured: set --gpu-devices")
    return GpuPool(config.gpu, registry=registry)
