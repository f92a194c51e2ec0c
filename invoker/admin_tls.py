"""The admin API over https, as the stock invoker serves it under ansible (whose default
``invoker.protocol`` is https): its key and certificate from the stock keystore, a PKCS12
file (``openwhisk-keystore.p12``) or PEM; with ``clientAuth`` a client must show a
certificate that the keystore holds, which is how the stock invoker's Java trust manager,
built from the same keystore, decides.

PKCS12 is read with the ``openssl`` program (Python's ``ssl`` reads PEM only), once at
start, into a PEM file in the private state directory.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from pathlib import Path

from invoker.config import InvokerConfig


def _pem(cfg: InvokerConfig, store: Path) -> Path:
    """``store`` if it is PEM, else its PKCS12 content as PEM in ``<state-dir>``."""
    data = store.read_bytes()
    if b"-----BEGIN " in data:
        return store
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ValueError(
            f"admin keystore {store} is PKCS12, which needs the openssl program: install "
            "openssl, or give a PEM file with the key and certificate"
        )
    out = Path(cfg.state_dir) / "admin-keystore.pem"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as sink:
        proc = subprocess.run(
            [openssl, "pkcs12", "-in", str(store), "-nodes", "-passin", "env:OW_KEYSTORE_PASS"],
            stdout=sink,
            stderr=subprocess.PIPE,
            env={"PATH": os.environ.get("PATH", ""), "OW_KEYSTORE_PASS": _password(cfg)},
            check=False,
        )
    if proc.returncode != 0:
        out.unlink(missing_ok=True)
        reason = proc.stderr.decode(errors="replace").strip().splitlines()[:1]
        raise ValueError(f"admin keystore {store}: openssl cannot read it: {' '.join(reason)}")
    return out


def _password(cfg: InvokerConfig) -> str:
    return cfg.admin_tls_keystore_password or ""


def admin_ssl_context(cfg: InvokerConfig) -> ssl.SSLContext | None:
    """None for plain http; raises ValueError with one line for a store it cannot use."""
    if not cfg.admin_tls_keystore:
        return None
    store = Path(cfg.admin_tls_keystore)
    try:
        pem = _pem(cfg, store)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(pem, password=_password(cfg) or None)
        if cfg.admin_tls_client_auth:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=str(pem))
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"admin keystore {store}: {e}") from None
    return context
