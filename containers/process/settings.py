"""The process backend's settings (``--backend process``): one frozen, self-checking
dataclass, read by the invoker through :mod:`whisk.settings` as ``process`` in
:class:`invoker.config.InvokerConfig`. Their flags, variables and keys predate the group and
keep their own names (``--sandbox``, ``OW_INVOKER_ACTION_NETWORK``, ``action_user``)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from whisk.settings import setting

SANDBOXES = ("namespaces", "none")
NETWORKS = ("outbound", "none")  # sandboxed actions: NAT'ed outbound connections, or none


@dataclass(frozen=True)
class ProcessSettings:
    sandbox: str = setting(
        "namespaces",
        help="isolation: namespaces (each container in its own pid, mount, network, IPC, UTS "
        "and cgroup namespaces, a uid of its own, seccomp; needs root) or none (unsafe: "
        "actions see the host's processes, files and loopback)",
    )
    action_network: str = setting(
        "outbound",
        help="sandboxed actions' network: outbound (NAT through slirp4netns, the host's "
        "loopback out of reach) or none",
    )
    sandbox_host_ports: tuple[int, ...] = setting(
        factory=tuple,
        help="ports of the host's loopback that sandboxed actions may reach at 127.0.0.1, "
        "e.g. a local object store (none by default)",
    )
    action_network_deny: tuple[str, ...] = setting(
        factory=tuple,
        help="IPv4 prefixes a.b.c.d/n,... sandboxed actions may not reach, e.g. the cluster's "
        "private ranges (the node's own addresses and 169.254.0.0/16 always)",
    )
    action_network_allow: tuple[str, ...] = setting(
        factory=tuple,
        help="IPv4 prefixes sandboxed actions may reach even so: the longest matching prefix "
        "decides, an allowed one at equal length",
    )
    action_user: str | None = setting(
        None,
        help="with --sandbox none: run actions as this user, e.g. nobody (the invoker as root)",
    )

    def __post_init__(self) -> None:
        if self.sandbox not in SANDBOXES:
            raise ValueError(f"sandbox: namespaces or none, not {self.sandbox!r}")
        if self.action_network not in NETWORKS:
            raise ValueError(f"action_network: outbound or none, not {self.action_network!r}")
        for prefix in (*self.action_network_deny, *self.action_network_allow):
            try:
                ipaddress.IPv4Network(prefix, strict=False)
            except ValueError:
                raise ValueError(f"action network prefix {prefix!r}: not a.b.c.d/n") from None
        if self.action_user is not None:
            import pwd

            try:
                pwd.getpwnam(self.action_user)
            except KeyError:
                raise ValueError(f"action user {self.action_user!r} does not exist") from None

    @property
    def sandboxed(self) -> bool:
        return self.sandbox != "none"
