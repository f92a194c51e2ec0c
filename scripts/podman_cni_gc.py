"""Removes what Podman 4's CNI plugins left behind for containers that no longer exist
(standard library only; run as root by ``scripts/services.sh start podman``).

    python3 scripts/podman_cni_gc.py

A container removed while its network was still being set up or torn down can leave its
port-forwarding rules in iptables' nat table and its address in the host-local IPAM store.
Such a rule shadows the same host port for every later container: Podman picks published
ports at random, so now and then a new container's port is forwarded to the dead one's
address, and connections to it hang or fail with EHOSTUNREACH until the deadline (seen in
CI as "the runtime ... accepted no connection in time"). Every rule CNI writes names its
container in a comment (``id: "<64 hex>"``); the rules and chains of ids Podman no longer
knows are deleted, nothing else. Exit 0 (with what was removed on stderr) or 1 on an error.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

IPAM_DIR = Path("/var/lib/cni/networks")
RULE_ID = re.compile(r'id: \\?"([0-9a-f]{64})\\?"')


def known_containers() -> set[str]:
    out = subprocess.run(
        ["podman", "ps", "-aq", "--no-trunc"], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def stale_rules(rules: list[str], known: set[str]) -> tuple[list[list[str]], set[str]]:
    """The ``-A`` rules of unknown containers, as ``-D`` arguments, and the per-container
    chains they jump to (``CNI-<hash>``, ``CNI-DN-<hash>``; never the shared ones)."""
    deletes: list[list[str]] = []
    chains: set[str] = set()
    for line in rules:
        found = RULE_ID.search(line)
        if not line.startswith("-A ") or not found or found.group(1) in known:
            continue
        args = shlex.split(line)
        deletes.append(["-D", *args[1:]])
        target = args[args.index("-j") + 1] if "-j" in args else ""
        if target.startswith("CNI-") and not target.startswith("CNI-HOSTPORT-"):
            chains.add(target)
    return deletes, chains


def iptables(*args: str) -> None:
    subprocess.run(["iptables", "-w", "-t", "nat", *args], check=True, capture_output=True)


def main() -> int:
    try:
        # What exists is read after the rules and leases: a container created in between
        # has none in them, so nothing of a live container can be taken for stale.
        rules = subprocess.run(
            ["iptables", "-w", "-t", "nat", "-S"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        leases = list(IPAM_DIR.glob("*/*.*.*.*"))
        known = known_containers()
        deletes, chains = stale_rules(rules, known)
        # Rules inside the stale chains go with them; the jumps into them first.
        for args in deletes:
            if args[1] not in chains:
                iptables(*args)
        for chain in sorted(chains):
            iptables("-F", chain)
        for chain in sorted(chains):
            iptables("-X", chain)
        released = 0
        for lease in leases:
            owner = lease.read_text().split()[:1]
            if owner and owner[0] not in known:
                lease.unlink()
                released += 1
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or ""
        print(f"podman_cni_gc: {e} {detail}".strip(), file=sys.stderr)
        return 1
    if chains or released:
        print(
            f"podman_cni_gc: removed {len(chains)} stale CNI chains and {released} addresses "
            "of containers that no longer exist",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
