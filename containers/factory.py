"""Choosing the container backend from configuration (the composition root's one switch)."""

from __future__ import annotations

from pathlib import Path

from containers.backend import ContainerBackend


def make_backend(
    kind: str,
    *,
    state_dir: str | Path,
    name_prefix: str,
    docker_host: str | None = None,
    docker_binds: tuple[str, ...] = (),
    docker_reach: str = "netns",
    docker_network: str = "bridge",
    docker_shm_size_mb: int = 64,
    docker_dns: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] = ((), (), ()),
    action_user: str | None = None,
    sandbox: str = "namespaces",
    action_network: str = "outbound",
    pids_limit: int = 1024,
    sandbox_host_ports: tuple[int, ...] = (),
    action_network_deny: tuple[str, ...] = (),
    action_network_allow: tuple[str, ...] = (),
) -> ContainerBackend:
    if kind == "process":
        from containers.process.backend import ProcessBackend

        return ProcessBackend(
            state_dir=Path(state_dir) / "containers",
            name_prefix=name_prefix,
            user=action_user,
            sandbox=sandbox != "none",
            network=action_network,
            pids_limit=pids_limit,
            host_ports=sandbox_host_ports,
            network_deny=action_network_deny,
            network_allow=action_network_allow,
        )
    if kind == "docker":
        from containers.docker.backend import DockerBackend

        # Images come with each ContainerSpec, from the invoker's runtime manifest.
        return DockerBackend(
            docker_host=docker_host,
            name_prefix=name_prefix,
            binds=docker_binds,
            reach=docker_reach,
            network=docker_network,
            pids_limit=pids_limit,
            shm_size_mb=docker_shm_size_mb,
            dns=docker_dns,
        )
    raise ValueError(f"unknown container backend {kind!r}: choose process or docker")
