"""The container backends by name: the one list the invoker chooses from (``--backend``).

Each entry pairs a backend's settings type (a frozen dataclass of :func:`whisk.settings.setting`
fields, which :class:`invoker.config.InvokerConfig` holds as a field named after the backend)
with its factory, which loads the backend's code only when it is chosen. A new backend is a
subpackage of :mod:`containers` with its settings type and factory, and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from containers import docker, process
from containers.backend import BackendContext, ContainerBackend

S = TypeVar("S")


@dataclass(frozen=True)
class BackendType(Generic[S]):
    """A backend's settings type and how to make the backend from them."""

    settings: type[S]
    make: Callable[[S, BackendContext], ContainerBackend]


BACKENDS: dict[str, BackendType[Any]] = {
    "process": BackendType(process.ProcessSettings, process.make),
    "docker": BackendType(docker.DockerSettings, docker.make),
}


def backend_type(name: str) -> BackendType[Any]:
    """The entry of ``name``; an unknown name is a ValueError that lists the choices."""
    try:
        return BACKENDS[name]
    except KeyError:
        choices = ", ".join(sorted(BACKENDS))
        raise ValueError(f"unknown container backend {name!r}: choose {choices}") from None


def make_backend(name: str, settings: Any, context: BackendContext) -> ContainerBackend:
    """The backend ``name``, from its settings (of its entry's type) and the invoker's
    ``context``."""
    entry = backend_type(name)
    if not isinstance(settings, entry.settings):
        raise TypeError(
            f"backend {name!r} takes {entry.settings.__name__}, not {type(settings).__name__}"
        )
    return entry.make(settings, context)
