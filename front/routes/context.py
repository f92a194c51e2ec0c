"""What every collection's routes share: the caller's identity, the namespace in the path,
the stores, the resolver and the activator."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from front.activator import Activator
from front.controller import Controller
from front.entities import Limits
from front.entitystore import Entities
from front.http import BadRequest
from front.identities import Identities
from front.names import resolve_namespace, valid_name
from front.resolve import Resolver
from whisk.protocol.messages import Identity
from whisk.store import Store


class Unauthorized(BadRequest):
    def __init__(self) -> None:
        super().__init__("The supplied authentication is invalid.", 401)


@dataclass
class Context:
    controller: Controller
    store: Store
    identities: Identities
    entities: Entities
    resolver: Resolver
    activator: Activator
    kinds: set[str]
    kind_defaults: dict[str, str]
    limits: Limits
    blocking_wait_s: float

    @property
    def activations_db(self) -> str:
        return self.controller.activations_db

    def now_ms(self) -> int:
        return self.controller.clock.epoch_ms()

    def caller(self, request: web.Request) -> Identity:
        who = self.identities.authenticate(request.headers.get("Authorization"))
        if who is None:
            raise Unauthorized()
        return who

    def namespace(self, request: web.Request, who: Identity) -> str:
        """The ``{ns}`` of the path, ``_`` meaning the caller's own."""
        return valid_name(resolve_namespace(request.match_info["ns"], who.namespace), "namespace")

    def own_namespace(self, request: web.Request, who: Identity) -> str:
        """The ``{ns}`` of the path, which must be the caller's (writes, private reads)."""
        ns = self.namespace(request, who)
        self.resolver.require_owner(who, ns)
        return ns

    def own_entity(self, request: web.Request) -> tuple[Identity, str]:
        """(caller, ``ns/name`` docid) of a ``…/{collection}/{name}`` path in the caller's
        own namespace."""
        who = self.caller(request)
        ns = self.own_namespace(request, who)
        return who, f"{ns}/{valid_name(request.match_info['name'])}"
