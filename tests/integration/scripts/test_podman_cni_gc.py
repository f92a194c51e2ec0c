"""scripts/podman_cni_gc.py: the port-forwarding rules and addresses CNI left for removed
containers go, those of containers Podman still knows stay (the cause of CI's "accepted no
connection in time" on Podman: a stale rule forwarding a new container's port to nowhere)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("podman_cni_gc", ROOT / "scripts/podman_cni_gc.py")
assert _spec and _spec.loader
gc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gc)

LIVE, DEAD = "a" * 64, "b" * 64


def rule(chain: str, cid: str, target: str, extra: str = "") -> str:
    return (
        f'-A {chain} {extra}-m comment --comment "name: \\"podman\\" id: \\"{cid}\\"" -j {target}'
    )


def test_only_unknown_containers_rules_and_their_own_chains_are_stale() -> None:
    rules = [
        "-N CNI-HOSTPORT-DNAT",
        '-A POSTROUTING -m comment --comment "CNI portfwd" -j CNI-HOSTPORT-MASQ',
        rule("POSTROUTING", LIVE, "CNI-live", "-s 10.88.0.2/32 "),
        rule("POSTROUTING", DEAD, "CNI-dead", "-s 10.88.0.3/32 "),
        rule("CNI-dead", DEAD, "MASQUERADE", "! -d 224.0.0.0/4 "),
        rule("CNI-HOSTPORT-DNAT", DEAD, "CNI-DN-dead", "-p tcp -m multiport --dports 41973 "),
        rule("CNI-DN-dead", DEAD, "CNI-HOSTPORT-SETMARK"),
    ]
    deletes, chains = gc.stale_rules(rules, {LIVE})
    assert chains == {"CNI-dead", "CNI-DN-dead"}
    assert [d[:2] for d in deletes] == [
        ["-D", "POSTROUTING"],
        ["-D", "CNI-dead"],
        ["-D", "CNI-HOSTPORT-DNAT"],
        ["-D", "CNI-DN-dead"],
    ]
    assert f'name: "podman" id: "{DEAD}"' in deletes[0]  # the comment as iptables wants it


def nat(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", "-w", "-t", "nat", *args], capture_output=True, text=True)


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("iptables") or not shutil.which("podman"),
    reason="needs root, iptables and podman",
)
def test_the_script_removes_a_dead_containers_chain_and_address(tmp_path: Path) -> None:
    """A rule set as CNI writes it for a container Podman has never heard of, on a source
    address no interface has: the script deletes the jump, the chain and the lease."""
    chain = f"CNI-owtest{os.getpid()}"
    jump = ["POSTROUTING", "-s", "10.255.254.1/32", "-m", "comment", "--comment"]
    jump += [f'name: "podman" id: "{DEAD}"', "-j", chain]
    lease_dir = gc.IPAM_DIR / f"owtest{os.getpid()}"
    assert nat("-N", chain).returncode == 0
    try:
        assert nat("-A", chain, "-j", "RETURN").returncode == 0
        assert nat("-A", *jump).returncode == 0
        lease_dir.mkdir(parents=True)
        (lease_dir / "10.255.254.1").write_text(f"{DEAD}\r\neth0")
        (lease_dir / "last_reserved_ip.0").write_text("10.255.254.1")
        done = subprocess.run(
            [sys.executable, str(ROOT / "scripts/podman_cni_gc.py")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "stale CNI chains" in done.stderr
        assert nat("-C", *jump).returncode != 0
        assert nat("-S", chain).returncode != 0  # the chain is gone
        assert sorted(p.name for p in lease_dir.iterdir()) == ["last_reserved_ip.0"]
    finally:
        nat("-D", *jump)
        nat("-F", chain)
        nat("-X", chain)
        shutil.rmtree(lease_dir, ignore_errors=True)
