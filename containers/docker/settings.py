"""The Docker backend's settings (``--backend docker``): one frozen, self-checking dataclass,
read by the invoker through :mod:`whisk.settings` as ``docker`` in
:class:`invoker.config.InvokerConfig`: ``--docker-<field>``, ``OW_INVOKER_DOCKER_<FIELD>``,
``docker_<field>`` (or a ``[docker]`` table)."""

from __future__ import annotations

from dataclasses import dataclass

from whisk.settings import setting

REACH_MODES = ("netns", "publish", "address", "host")


@dataclass(frozen=True)
class DockerSettings:
    host: str | None = setting(None, env=("DOCKER_HOST",), help="Docker Engine API address")
    binds: tuple[str, ...] = setting(
        factory=tuple, help="extra binds for action containers, e.g. /usr:/usr:ro"
    )
    reach: str = setting(
        "netns",
        help="how the invoker reaches runtimes: netns (the container's own loopback, from "
        "inside its network namespace; needs root and a local engine), publish (8080 on "
        "127.0.0.1), address (the container's IP on the network), host (the host's network, "
        "a loopback port each: test machines only)",
    )
    network: str = setting(
        "bridge", help="Docker network of action containers, none for no network"
    )
    shm_size_mb: int = setting(64, help="size of each container's /dev/shm in MB")
    dns_servers: tuple[str, ...] = setting(factory=tuple, help="DNS servers of action containers")
    dns_search: tuple[str, ...] = setting(
        factory=tuple, help="DNS search domains of action containers"
    )
    dns_options: tuple[str, ...] = setting(
        factory=tuple, help="resolver options of action containers"
    )

    def __post_init__(self) -> None:
        if self.reach not in REACH_MODES:
            raise ValueError(f"docker_reach: netns, publish, address or host, not {self.reach!r}")
        if self.shm_size_mb < 1:
            raise ValueError("docker_shm_size_mb must be positive")

    @property
    def dns(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """Servers, search domains and options, as the backend takes them."""
        return self.dns_servers, self.dns_search, self.dns_options
