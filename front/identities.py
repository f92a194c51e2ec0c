"""Who may call the API: basic-auth keys mapped to OpenWhisk identities.

The defaults are the stock deployment's well-known keys for ``guest`` and ``whisk.system``
(``ansible/files/auth.guest`` / ``auth.whisk.system``); a deployment sets its own with
``--auth NAMESPACE=UUID:KEY`` (repeatable).
"""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass

from whisk.protocol.controller import GUEST, GUEST_KEY, GUEST_UUID
from whisk.protocol.messages import Identity

SYSTEM_UUID = "789c46b1-71f6-4ed5-8c54-816aa4f8c502"
SYSTEM_KEY = "abczO3xZCLrMN6v2BKK1dXYFpXlPkccOFqm12CdAsMgRU4VrNZ9lyGVCGuMDGIwP"
SYSTEM = Identity(
    subject="whisk.system",
    namespace="whisk.system",
    namespace_uuid=SYSTEM_UUID,
    authkey={"api_key": f"{SYSTEM_UUID}:{SYSTEM_KEY}"},
    rights=("READ", "PUT", "DELETE", "ACTIVATE"),
)
GUEST_AUTH = f"{GUEST_UUID}:{GUEST_KEY}"


def basic_auth(auth: str) -> str:
    """The ``Authorization`` header value for a ``UUID:KEY`` (or ``user:password``)."""
    return "Basic " + base64.b64encode(auth.encode()).decode()


def identity(namespace: str, auth: str) -> Identity:
    uuid, sep, key = auth.partition(":")
    if not sep or not uuid or not key:
        raise ValueError("an auth key must look like UUID:KEY")
    return Identity(
        namespace, namespace, uuid, {"api_key": auth}, ("READ", "PUT", "DELETE", "ACTIVATE")
    )


@dataclass
class Identities:
    by_key: dict[str, Identity]

    @classmethod
    def defaults(cls) -> Identities:
        return cls({i.authkey["api_key"]: i for i in (GUEST, SYSTEM)})

    @classmethod
    def parse(cls, specs: list[str]) -> Identities:
        """``NAMESPACE=UUID:KEY`` entries; none means the stock defaults."""
        if not specs:
            return cls.defaults()
        out = {}
        for spec in specs:
            ns, sep, auth = spec.partition("=")
            if not sep:
                raise ValueError(f"bad --auth {spec!r}: expected NAMESPACE=UUID:KEY")
            out[auth] = identity(ns, auth)
        return cls(out)

    def owner(self, namespace: str) -> Identity | None:
        """The identity of the namespace called ``namespace``: web actions run as it."""
        return next((i for i in self.by_key.values() if i.namespace == namespace), None)

    def owner_by_uuid(self, namespace_uuid: str) -> Identity | None:
        """The identity whose namespace has this uuid (the API gateway's URLs carry it)."""
        return next((i for i in self.by_key.values() if i.namespace_uuid == namespace_uuid), None)

    def authenticate(self, header: str | None) -> Identity | None:
        if not header:
            return None
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            given = base64.b64decode(encoded, validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            return None
        for key, who in self.by_key.items():
            if hmac.compare_digest(given.encode(), key.encode()):
                return who
        return None
