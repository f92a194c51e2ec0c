"""The Docker backend: action containers through the Docker Engine API (dockerd, Podman).

``backend.py`` (:class:`~containers.docker.backend.DockerBackend` and its containers),
``engine.py`` (the Engine API calls, over ``aiodocker``), ``logs.py`` (reading a
container's log), ``netns.py`` (connections made inside a container's network namespace),
``local.py`` (the local stand-ins for the official runtime images), ``settings.py``
(:class:`DockerSettings`). The registry (:mod:`containers.registry`) knows the backend by its
settings type and :func:`make`, which loads the backend (and ``aiodocker``) only when it is
chosen.
"""

from __future__ import annotations

from containers.backend import BackendContext, ContainerBackend
from containers.docker.settings import DockerSettings

__all__ = ["DockerSettings", "make"]


def make(settings: DockerSettings, context: BackendContext) -> ContainerBackend:
    """The backend as the invoker runs it; images come with each ContainerSpec, from the
    invoker's runtime manifest."""
    from containers.docker.backend import DockerBackend

    return DockerBackend(
        docker_host=settings.host,
        name_prefix=context.name_prefix,
        binds=settings.binds,
        reach=settings.reach,
        network=settings.network,
        pids_limit=context.pids_limit,
        shm_size_mb=settings.shm_size_mb,
        dns=settings.dns,
    )
