"""How the Kafka clients authenticate: TLS and SASL, as the stock components' ``whisk.kafka
.common`` settings ask (``security.protocol``, trust and key stores, ``sasl.mechanism``),
turned into aiokafka's ``ssl_context`` and ``sasl_*`` options.

PEM files only: Java's JKS stores cannot be read here, and PKCS12 would need a dependency
for one conversion an operator does once (``openssl pkcs12``, ``keytool -exportcert -rfc``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whisk.settings import setting

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# What aiokafka speaks without a Kerberos library or a token provider of the operator's.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def require_pem(path: str, what: str) -> None:
    """A clear line for a store that is not PEM (a JKS or PKCS12 file, as ansible copies)."""
    try:
        head = Path(path).read_bytes()[:65536]
    except OSError as e:
        raise ValueError(f"{what} {path}: {e.strerror or e}") from None
    if b"-----BEGIN " not in head:
        raise ValueError(
            f"{what} {path} is not a PEM file (a JKS or PKCS12 store?): ow-invoker reads PEM "
            "only; convert it once (keytool -exportcert -rfc, openssl pkcs12 -nodes)"
        )


@dataclass(frozen=True)
class KafkaSecurity:
    protocol: str = setting(
        "PLAINTEXT", help="Kafka security.protocol: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
    )
    cafile: str | None = setting(None, help="PEM file of the CAs that sign brokers' certificates")
    certfile: str | None = setting(
        None, help="PEM file with this client's certificate chain (and its key, unless keyfile)"
    )
    keyfile: str | None = setting(None, help="PEM file of this client's private key")
    key_password: str | None = setting(
        None, help="password of an encrypted private key", secret=True
    )
    check_hostname: bool = setting(
        False,
        help="check the brokers' host names against their certificates (the stock default, "
        'ssl.endpoint.identification.algorithm="", does not)',
    )
    sasl_mechanism: str | None = setting(None, help="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    sasl_username: str | None = setting(None, help="SASL user")
    sasl_password: str | None = setting(None, help="SASL password", secret=True)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"Kafka security protocol {self.protocol!r}: one of {PROTOCOLS}")
        if self.tls:
            for path, what in ((self.cafile, "Kafka CA file"), (self.certfile, "Kafka cert")):
                if path:
                    require_pem(path, what)
            if self.keyfile and not self.certfile:
                raise ValueError("a Kafka client key file needs its certificate (certfile)")
        if self.sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ValueError(
                    f"Kafka SASL mechanism {self.sasl_mechanism!r}: ow-invoker speaks "
                    f"{', '.join(SASL_MECHANISMS)}"
                )
            if not self.sasl_username or self.sasl_password is None:
                raise ValueError(f"Kafka {self.protocol} needs a SASL user and password")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def ssl_context(self) -> ssl.SSLContext:
        """Verifies the brokers against ``cafile`` (the system's CAs without one)."""
        context = ssl.create_default_context(cafile=self.cafile)
        context.check_hostname = self.check_hostname
        if self.certfile:
            context.load_cert_chain(self.certfile, self.keyfile, self.key_password)
        return context

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for every aiokafka client (consumer, producer, admin)."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            options["ssl_context"] = self.ssl_context()
        if self.sasl:
            options.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=self.sasl_password,
            )
        return options
