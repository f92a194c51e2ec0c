"""Who may call the API: basic-auth keys mapped to OpenWhisk identities.

Two sources. The configured ones: the stock deployment's well-known keys for ``guest`` and
``whisk.system`` (``ansible/files/auth.guest`` / ``auth.whisk.system``) unless a deployment
gives its own (``--auth-file``, ``OW_FRONT_AUTH``, ``--auth NAMESPACE=UUID:KEY``). And the
subjects database, as the stock controller reads it: the documents ``ow-invoker admin user
create`` writes (``{subject, namespaces: [{name, uuid, key}], blocked?}``, a namespace's
limits in ``<namespace>/limits``), re-read every second by :meth:`Identities.refresh`, so a
user added, blocked or deleted there is honoured by a running front without a restart.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whisk.protocol.controller import GUEST, GUEST_KEY, GUEST_UUID
from whisk.protocol.messages import Identity
from whisk.store import Store, StoreError

MAX_SUBJECTS = 100_000  # subject and limits documents read per refresh

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
RIGHTS = ("READ", "PUT", "DELETE", "ACTIVATE")
log = logging.getLogger(__name__)


def basic_auth(auth: str) -> str:
    """The ``Authorization`` header value for a ``UUID:KEY`` (or ``user:password``)."""
    return "Basic " + base64.b64encode(auth.encode()).decode()


def identity(namespace: str, auth: str) -> Identity:
    uuid, sep, key = auth.partition(":")
    if not sep or not uuid or not key:
        raise ValueError("an auth key must look like UUID:KEY")
    return Identity(namespace, namespace, uuid, {"api_key": auth}, RIGHTS)


def read_auth_file(path: str | Path) -> list[str]:
    """The ``NAMESPACE=UUID:KEY`` lines of an auth file (blank lines and ``#`` comments
    skipped)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ValueError(f"cannot read the auth file {path}: {e.strerror or e}") from None
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def subject_identities(
    subjects: list[dict[str, Any]], limits: dict[str, dict[str, Any]]
) -> dict[str, Identity]:
    """Key -> identity of every namespace of every unblocked subject document (what the
    stock ``subjects.v2.0.0/identities`` view lists), with the namespace's own limits."""
    out: dict[str, Identity] = {}
    for doc in subjects:
        if doc.get("blocked") or not isinstance(doc.get("namespaces"), list):
            continue
        subject = str(doc.get("subject") or doc.get("_id"))
        for ns in doc["namespaces"]:
            name, uuid, key = (ns.get(k) if isinstance(ns, dict) else None for k in NS_FIELDS)
            if not (isinstance(name, str) and isinstance(uuid, str) and isinstance(key, str)):
                continue
            auth = f"{uuid}:{key}"
            out[auth] = Identity(
                subject, name, uuid, {"api_key": auth}, RIGHTS, dict(limits.get(name, {}))
            )
    return out


NS_FIELDS = ("name", "uuid", "key")
LIMITS_SUFFIX = "/limits"


@dataclass
class Identities:
    """``by_key``: every key the front accepts now (the configured ones, then the stored)."""

    by_key: dict[str, Identity]
    configured: dict[str, Identity] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.configured = dict(self.configured or self.by_key)

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

    async def refresh(self, store: Store, subjects_db: str) -> None:
        """Re-read the subjects database: the configured keys, then the stored ones (a
        stored key never replaces a configured one)."""
        docs = await store.find(subjects_db, {}, limit=MAX_SUBJECTS)
        limits = {
            d["_id"][: -len(LIMITS_SUFFIX)]: {
                k: v for k, v in d.items() if not k.startswith("_") and v is not None
            }
            for d in docs
            if str(d.get("_id", "")).endswith(LIMITS_SUFFIX)
        }
        subjects = [d for d in docs if "namespaces" in d]
        merged = dict(self.configured)
        for key, who in subject_identities(subjects, limits).items():
            merged.setdefault(key, who)
        self.by_key = merged

    async def keep_fresh(self, store: Store, subjects_db: str, every_s: float = 1.0) -> None:
        """Refresh every ``every_s`` until cancelled; a store that fails leaves the last
        keys in force (logged once until it answers again)."""
        failing = False
        while True:
            await asyncio.sleep(every_s)
            try:
                await self.refresh(store, subjects_db)
            except StoreError as e:
                if not failing:
                    log.warning("cannot read the subjects database %s: %s", subjects_db, e)
                failing = True
            else:
                failing = False

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
        # A hash lookup, not a scan: the subjects database may hold many keys. Its timing
        # tells nothing of a key's characters (strings are compared only on a hash match).
        return self.by_key.get(given)
