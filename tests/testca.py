"""A certificate authority made by a test, with the ``openssl`` program: a CA, a server
certificate for 127.0.0.1 / localhost and a client certificate, as PEM files and as the
PKCS12 keystore the stock deployments copy (``openwhisk-keystore.p12``)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "openwhisk"  # the stock keystores' password (ansible group_vars)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class CertAuthority:
    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    def cert(self, name: str) -> Path:
        return self.dir / f"{name}.pem"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}-key.pem"

    def bundle(self, name: str) -> Path:
        """Key and certificate in one PEM file (Kafka's and our PEM keystore)."""
        return self.dir / f"{name}-bundle.pem"

    def p12(self, name: str) -> Path:
        return self.dir / f"{name}.p12"


def make_ca(directory: Path, names: tuple[str, ...] = ("server", "client")) -> CertAuthority:
    """A fresh CA in ``directory`` and one signed certificate per name (each valid for
    127.0.0.1 and localhost, for serving and for client authentication)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertAuthority(directory)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=ow-invoker test CA", "-keyout", "ca-key.pem", "-out", "ca.pem",
        cwd=directory,
    )  # fmt: skip
    ext = directory / "ext.cnf"
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n"
    )
    for name in names:
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", f"{name}-key.pem", "-out", f"{name}.csr", cwd=directory,
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", f"{name}.pem",
            cwd=directory,
        )  # fmt: skip
        ca.bundle(name).write_bytes(ca.key(name).read_bytes() + ca.cert(name).read_bytes())
        _openssl(
            "pkcs12", "-export", "-in", f"{name}.pem", "-inkey", f"{name}-key.pem",
            "-certfile", "ca.pem", "-passout", f"pass:{PASSWORD}", "-out", f"{name}.p12",
            cwd=directory,
        )  # fmt: skip
    return ca
