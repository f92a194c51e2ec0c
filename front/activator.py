"""Starting activations: a plain action goes to an invoker through the controller side of the
bus, a sequence to its runner, a trigger fire to the actions of its active rules.

Parameters reach an action merged as stock merges them: package < binding < action (see
:mod:`front.resolve`) < the invocation's payload; an action annotated ``final`` refuses a
payload that redefines a parameter it already has.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from front.controller import Controller
from front.entities import annotation, pair_values
from front.http import BadRequest
from front.names import parse_name
from front.resolve import ResolvedAction, Resolver
from front.sequences import RecordSink, SequenceRunner
from front.triggers import ACTIVE
from whisk.clock import Clock
from whisk.protocol.controller import new_activation_id, new_transid
from whisk.protocol.messages import Identity
from whisk.protocol.records import (
    ActivationRecord,
    StatusCode,
    activation_document,
    trigger_record,
)
from whisk.supervisor import Supervisor

log = logging.getLogger(__name__)

FINAL_PARAMETERS = (
    "Request defines parameters that are not allowed (e.g., reserved properties or already "
    "defined by admin)."
)
HEADERS = "__ow_headers"


def content(action: ResolvedAction, payload: Any) -> Any:
    """What the action receives: its merged parameters with an object payload laid over
    them; an array payload as it is."""
    if isinstance(payload, list):
        return payload
    params = pair_values(action.parameters)
    if isinstance(payload, dict):
        params.update(payload)
    return params


class Activator:
    def __init__(
        self,
        controller: Controller,
        resolver: Resolver,
        records: RecordSink,
        clock: Clock,
        supervisor: Supervisor,
        max_sequence_length: int = 50,
    ) -> None:
        self.controller = controller
        self.resolver = resolver
        self.records = records
        self.clock = clock
        self.supervisor = supervisor
        self.sequences = SequenceRunner(
            resolver, self.primitive, records, clock, supervisor, max_sequence_length
        )

    async def invoke(
        self,
        who: Identity,
        action: ResolvedAction,
        payload: dict[str, Any] | None,
        *,
        blocking: bool,
        wait_s: float,
    ) -> tuple[str, ActivationRecord | None]:
        """An invocation through the API: (activation id, record when it finished within
        ``wait_s`` of a blocking call)."""
        if payload and annotation(action.doc, "final", False) in (True, "true"):
            defined = set(pair_values(action.parameters))
            if defined.intersection(payload):
                raise BadRequest(FINAL_PARAMETERS)
        transid = new_transid(self.clock.epoch_ms())
        if action.is_sequence:
            return await self.sequences.invoke(
                who, action, payload, blocking=blocking, wait_s=wait_s, transid=transid
            )
        return await self.primitive(
            who, action, payload, wait_s=wait_s, blocking=blocking, transid=transid
        )

    async def primitive(
        self,
        who: Identity,
        action: ResolvedAction,
        payload: Any,
        *,
        wait_s: float,
        blocking: bool = True,
        cause: str | None = None,
        transid: list[Any] | None = None,
    ) -> tuple[str, ActivationRecord | None]:
        """One activation of a non-sequence action, published to an invoker."""
        doc = action.doc
        limits = doc.get("limits", {})
        return await self.controller.invoke(
            who,
            action.name,
            doc.get("_rev"),
            limits.get("memory", 256),
            limits.get("timeout", 60_000),
            content(action, payload),
            blocking=blocking,
            wait_s=wait_s,
            init_args=tuple(p["key"] for p in action.parameters if p.get("init")),
            cause=cause,
            transid=transid,
        )

    # -- triggers --

    async def fire(
        self,
        who: Identity,
        trigger: dict[str, Any],
        payload: dict[str, Any],
        headers: dict[str, str],
    ) -> str | None:
        """Fire ``trigger``: every active rule's action is invoked (non-blocking) with the
        trigger's parameters, the request's headers (``__ow_headers``) and the payload laid
        over them. Returns the trigger's activation id, or None when no rule is active (no
        record, as stock). The trigger's record, whose logs are the rules' results, is
        written once every rule's action was started."""
        rules: dict[str, Any] = trigger.get("rules") or {}
        if not any(link.get("status") == ACTIVE for link in rules.values()):
            return None
        aid = new_activation_id()
        args = pair_values(trigger.get("parameters", [])) | {HEADERS: headers} | payload
        start_ms = self.clock.epoch_ms()
        self.supervisor.spawn(
            self._fire(who, trigger, aid, args, payload, start_ms), name=f"trigger {aid}"
        )
        return aid

    async def _fire(
        self,
        who: Identity,
        trigger: dict[str, Any],
        aid: str,
        args: dict[str, Any],
        payload: dict[str, Any],
        start_ms: int,
    ) -> None:
        rules = sorted((trigger.get("rules") or {}).items())
        results = await asyncio.gather(*(self._run_rule(who, r, link, args) for r, link in rules))
        end_ms = self.clock.epoch_ms()
        record = trigger_record(
            who,
            aid,
            name=trigger["name"],
            version=trigger.get("version", "0.0.1"),
            payload=payload,
            rules=results,
            start_ms=start_ms,
            end_ms=end_ms,
        )
        await self.records.write(activation_document(record, end_ms))

    async def _run_rule(
        self, who: Identity, rule: str, link: dict[str, Any], args: dict[str, Any]
    ) -> dict[str, Any]:
        """Start one rule's action; the rule's entry in the trigger's logs."""
        target = link.get("action") or {}
        action_name = f"{target.get('path')}/{target.get('name')}"
        entry: dict[str, Any] = {"rule": rule, "action": action_name}
        if link.get("status") != ACTIVE:
            message = f"Rule '{rule}' is inactive, action '{action_name}' was not activated."
            return entry | _failed(StatusCode.APPLICATION_ERROR, message)
        try:
            action = await self.resolver.action(who, parse_name(target, who.namespace))
            aid, _ = await self.invoke(who, action, args, blocking=False, wait_s=0.0)
        except BadRequest as e:
            code = StatusCode.WHISK_ERROR if e.status >= 500 else StatusCode.APPLICATION_ERROR
            return entry | _failed(code, str(e))
        except Exception as e:
            log.warning("rule %s: starting %s failed: %s", rule, action_name, e)
            return entry | _failed(StatusCode.WHISK_ERROR, "There was an internal server error.")
        return entry | {"statusCode": int(StatusCode.SUCCESS), "success": True, "activationId": aid}


def _failed(code: StatusCode, message: str) -> dict[str, Any]:
    return {"statusCode": int(code), "success": False, "error": message}
