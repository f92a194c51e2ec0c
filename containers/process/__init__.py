"""The process backend: action containers as local processes forked by a zygote.

``backend.py`` (:class:`~containers.process.backend.ProcessBackend` and its containers),
``claim.py`` (the host-wide claims of a name prefix and of a block of container uids),
``settings.py`` (:class:`ProcessSettings`). The registry (:mod:`containers.registry`) knows
the backend by its settings type and :func:`make`, which loads the backend only when it is
chosen.
"""

from __future__ import annotations

from containers.backend import BackendContext, ContainerBackend
from containers.process.settings import ProcessSettings

__all__ = ["ProcessSettings", "make"]


def make(settings: ProcessSettings, context: BackendContext) -> ContainerBackend:
    """The backend as the invoker runs it: its containers under ``<state_dir>/containers``."""
    from containers.process.backend import ProcessBackend

    return ProcessBackend(
        state_dir=context.state_dir / "containers",
        name_prefix=context.name_prefix,
        user=settings.action_user,
        sandbox=settings.sandboxed,
        network=settings.action_network,
        pids_limit=context.pids_limit,
        host_ports=settings.sandbox_host_ports,
        network_deny=settings.action_network_deny,
        network_allow=settings.action_network_allow,
    )
