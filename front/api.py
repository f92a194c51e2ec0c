"""The REST API of OpenWhisk's controller that ``wsk``, the ``openwhisk`` JS client and
deployment tools use: actions and sequences, packages and bindings, triggers and rules,
activations, namespaces and web actions. Status codes and error bodies as the stock
controller's (``{"error": ..., "code": <transaction id>}``); one module per collection in
:mod:`front.routes`."""

from __future__ import annotations

from aiohttp import web

from front.activator import Activator
from front.controller import Controller
from front.entities import Limits
from front.entitystore import Entities
from front.http import MAX_BODY, errors
from front.identities import Identities
from front.resolve import Resolver
from front.routes.actions import ActionRoutes
from front.routes.activations import ActivationRoutes
from front.routes.apis import ApiRoutes
from front.routes.context import Context
from front.routes.namespaces import NamespaceRoutes
from front.routes.packages import PackageRoutes
from front.routes.system import SystemRoutes
from front.routes.triggers import RuleRoutes, TriggerRoutes
from front.routes.web import WebRoutes
from front.sequences import RecordSink
from whisk.manifest import Manifest
from whisk.store import Store
from whisk.supervisor import Supervisor

NAMESPACE = "/api/v1/namespaces/{ns}"


class Api:
    def __init__(
        self,
        controller: Controller,
        store: Store,
        identities: Identities,
        manifest: Manifest,
        records: RecordSink,
        supervisor: Supervisor,
        limits: Limits = Limits(),
        blocking_wait_s: float = 60.0,
        sequence_max_length: int = 50,
    ) -> None:
        entities = Entities(store, controller.whisks_db, controller.clock)
        resolver = Resolver(entities)
        activator = Activator(
            controller, resolver, records, controller.clock, supervisor, sequence_max_length
        )
        self.ctx = Context(
            controller,
            store,
            identities,
            entities,
            resolver,
            activator,
            set(manifest.runtimes),
            manifest.defaults,
            limits,
            blocking_wait_s,
        )
        self.system = SystemRoutes(controller, manifest, limits, sequence_max_length)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[errors], client_max_size=MAX_BODY)
        ctx = self.ctx
        app.add_routes(self.system.routes())
        app.add_routes(NamespaceRoutes(ctx).routes(NAMESPACE))
        for collection in (
            ActionRoutes,
            PackageRoutes,
            TriggerRoutes,
            RuleRoutes,
            ActivationRoutes,
        ):
            app.add_routes(collection(ctx).routes(NAMESPACE))
        app.add_routes(WebRoutes(ctx).routes())
        app.add_routes(ApiRoutes(ctx).routes())  # wsk api: apimgmt and the gateway
        return app
