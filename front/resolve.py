"""Who may read what, and which action a name means.

Stock entitlement, read from the documents themselves: a subject has every right in its own
namespace; in another it may read a package that is published (``publish: true``), every
package of ``/whisk.system`` (readable by everyone), and read and invoke the actions in the
packages it may read. A binding may be read only by its owner, and only while the owner may
read the package it points at. Actions outside packages in another namespace stay private.

An action reached through a package or binding runs with the package's parameters, the
binding's laid over them, and the action's over both (then the invocation's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from front.entities import SEQUENCE, merge_pairs
from front.entitystore import Entities
from front.http import BadRequest, Forbidden, NotFound
from front.packages import binding_of
from whisk.protocol import QualifiedName
from whisk.protocol.messages import Identity

SYSTEM_NAMESPACE = "whisk.system"


@dataclass(frozen=True)
class ResolvedAction:
    doc: dict[str, Any]  # the action's document
    binding: str | None  # ``ns/binding`` when reached through a binding
    parameters: list[dict[str, Any]]  # package < binding < action

    @property
    def path(self) -> str:
        return str(self.doc["namespace"])

    @property
    def name(self) -> QualifiedName:
        """The action's own name (its real package), with version and binding: what an
        ActivationMessage carries."""
        return QualifiedName(
            self.path, self.doc["name"], self.doc.get("version", "0.0.1"), self.binding
        )

    @property
    def is_sequence(self) -> bool:
        return bool(self.doc.get("exec", {}).get("kind") == SEQUENCE)

    @property
    def components(self) -> list[str]:
        return list(self.doc.get("exec", {}).get("components", []))


class Resolver:
    def __init__(self, entities: Entities) -> None:
        self.entities = entities

    @staticmethod
    def require_owner(who: Identity, namespace: str) -> None:
        if namespace != who.namespace:
            raise Forbidden()

    async def package(self, who: Identity, docid: str, cached: bool = False) -> dict[str, Any]:
        """The package or binding ``ns/pkg`` if ``who`` may read it. What a non-owner may not
        read is 403 whether or not it exists, so names do not leak."""
        namespace = docid.split("/", 1)[0]
        owner = namespace == who.namespace
        doc = await self.entities.find(docid, cached)
        if doc is None or doc.get("entityType") != "package":
            if not owner:
                raise Forbidden(docid)
            if doc is None:
                raise NotFound()
            raise BadRequest("Resource by this name exists but is not in this collection.", 409)
        bound = binding_of(doc)
        if bound is not None:
            if not owner:
                raise Forbidden(docid)
            if bound == docid:
                raise BadRequest(f"Package binding '/{docid}' contains a circular reference.", 422)
            await self._bound_package(who, bound, cached)
        elif not (owner or doc.get("publish") or namespace == SYSTEM_NAMESPACE):
            raise Forbidden(docid)
        return doc

    async def _bound_package(self, who: Identity, docid: str, cached: bool) -> dict[str, Any]:
        """The package a binding points at: it must exist, be readable and not be a binding."""
        try:
            bound = await self.package(who, docid, cached)
        except NotFound:
            raise BadRequest("Binding references a package that does not exist.") from None
        if binding_of(bound) is not None:
            raise BadRequest("Cannot bind to another package binding.")
        return bound

    async def bindable(self, who: Identity, docid: str) -> dict[str, Any]:
        """The package a new binding may point at."""
        try:
            return await self._bound_package(who, docid, False)
        except BadRequest as e:
            if e.status == 409:
                raise BadRequest("Cannot bind to a resource that is not a package.", 409) from None
            raise

    async def unbound(
        self, who: Identity, pkg: dict[str, Any], cached: bool = False
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(the real package behind ``pkg``, the parameters ``pkg`` gives its actions)."""
        bound = binding_of(pkg)
        if bound is None:
            return pkg, pkg.get("parameters", [])
        real = await self._bound_package(who, bound, cached)
        return real, merge_pairs(real.get("parameters", []), pkg.get("parameters", []))

    async def action(
        self, who: Identity, name: QualifiedName, cached: bool = False
    ) -> ResolvedAction:
        """The action ``name`` means for ``who`` (through its package or binding), if ``who``
        may read and invoke it."""
        if name.package is None:
            if name.namespace != who.namespace:
                raise Forbidden(f"{name.path}/{name.name}")
            doc = await self.entities.get(name.docid, "action", cached)
            return ResolvedAction(doc, None, doc.get("parameters", []))
        pkg = await self.package(who, name.path, cached)
        real, params = await self.unbound(who, pkg, cached)
        doc = await self.entities.get(f"{real['_id']}/{name.name}", "action", cached)
        binding = name.path if real is not pkg else None
        return ResolvedAction(doc, binding, merge_pairs(params, doc.get("parameters", [])))
