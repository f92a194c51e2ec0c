"""How the invoker uses the GPU pool: which actions are GPU actions, what it needs of a pool,
and building the pool from the invoker's configuration.

An action is a GPU action when it carries the annotation ``gpu`` with a true value
(``wsk action create infer infer.zip --kind python:3.11 -a gpu true``). Its CPU-side code
runs in an ordinary container pinned to one action core, which it holds like any call (its
pre- and post-processing are CPU work). Its calls queue apart from the others, in receipt
order: its model loads and inferences go to the pool's scheduler, which orders the device work.

An action of kind ``kaas`` (``wsk action create knn --kind kaas knn.json``) has no container:
its code is a kTask graph (``gpu.kaas``), run by the pool's device executors with the
invocation's parameters binding it to data (:func:`run_ktask`), keys scoped to the caller's
namespace. Its answer reads as a
container's would: the reply is the result; the request's errors (a missing key, a failing
kernel, bad parameters) are application errors, a graph that does not parse, a dead worker
or the time limit developer errors, the pool's own failures system errors.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from gpu.kaas.action import KIND as KAAS
from gpu.kaas.action import validate
from gpu.kaas.calls import WorkerError
from gpu.kaas.spec import KTaskError
from whisk.protocol import Action, ActivationResponse, StatusCode, dumps
from whisk.protocol.runtime import interpret_run, timeout_message

if TYPE_CHECKING:
    from gpu.pool import GpuPool
    from invoker.config import InvokerConfig

log = logging.getLogger(__name__)
NO_POOL = "This invoker has no GPU pool to run kaas actions (start it with --gpu-devices)."


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

    async def ktask(
        self, code: str, params: Mapping[str, Any], *, function: str, namespace: str
    ) -> dict[str, Any]:
        """Run a ``kaas`` action's kTask; KTaskError for the request's faults."""
        ...


def is_gpu_action(action: Action) -> bool:
    return action.annotation("gpu") in (True, "true", "True", 1)


def is_kaas_action(action: Action) -> bool:
    return action.kind == KAAS


async def run_ktask(
    pool: GpuPoolHandle | None,
    action: Action,
    params: Mapping[str, Any],
    *,
    namespace: str,
    max_payload: int,
) -> tuple[ActivationResponse, bool]:
    """Run a ``kaas`` action's call on the pool: (the activation's response, timed out).
    ``namespace``: the caller's, from the activation message (authenticated by the
    controller): the kTask's keys are that tenant's (``gpu.kaas.action``), so that a shared
    action invoked by bob works on bob's data, never its owner's."""
    if pool is None:
        return ActivationResponse.error(StatusCode.APPLICATION_ERROR, NO_POOL), False
    code = action.code or ""
    try:
        validate(code)
    except KTaskError as e:  # stored past a front that checks it: as an /init failure
        return _answer(502, f"The kTask of this kaas action is not valid: {e}", max_payload), False
    timeout_ms = action.limits.timeout_ms
    try:  # a kTask started on a device runs to its end there (the pool releases its pins)
        async with asyncio.timeout(timeout_ms / 1000):
            reply = await pool.ktask(code, params, function=action.docid, namespace=namespace)
    except TimeoutError:
        message = timeout_message(timeout_ms)
        return ActivationResponse.error(StatusCode.DEVELOPER_ERROR, message), True
    except KTaskError as e:
        return _answer(200, str(e), max_payload), False
    except WorkerError as e:
        return _answer(502, f"The GPU worker failed running this kTask: {e}", max_payload), False
    except Exception as e:
        log.exception("kTask of %s failed in the GPU pool", action.docid)
        message = f"The GPU pool failed: {e.__class__.__name__}"
        return ActivationResponse.error(StatusCode.WHISK_ERROR, message), False
    return interpret_run(200, dumps(reply), max_payload), False


def _answer(status: int, error: str, max_payload: int) -> ActivationResponse:
    """An error as a container's ``/run`` would give it: 200 → application, else developer."""
    return interpret_run(status, dumps({"error": error}), max_payload)


def make_gpu_pool(config: InvokerConfig, registry: Any = None) -> GpuPool:
    """The pool ``config.gpu`` describes (``--gpu-devices`` and the other ``--gpu-*``
    settings), its metrics in ``registry``; torch is imported here, lazily."""
    from gpu.pool import GpuPool

    if config.gpu is None:
        raise ValueError("no GPU pool configured: set --gpu-devices")
    return GpuPool(config.gpu, registry=registry)
