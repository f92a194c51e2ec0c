"""Running sequences, as the stock controller does: each component is an activation of its
own (through the invokers' queues, so the scheduling policy sees it), run blocking one after
the other; a component's result is the next one's input; the first error ends the sequence.

The sequence's own activation record holds the last response, the components' activation
ids as ``logs``, the sum of their durations, and the ``topmost``/``causedBy`` annotations;
inner sequences are activations too (``cause`` = the enclosing sequence). At most
``max_length`` atomic actions run per topmost sequence, nested sequences counted inside.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

from front.http import BadRequest
from front.names import parse_name
from front.resolve import ResolvedAction, Resolver
from whisk.clock import Clock
from whisk.protocol.controller import new_activation_id
from whisk.protocol.messages import Identity
from whisk.protocol.records import (
    ActivationRecord,
    ActivationResponse,
    StatusCode,
    activation_document,
    sequence_record,
)
from whisk.supervisor import Supervisor

log = logging.getLogger(__name__)

TOO_LONG = "Too many actions in the sequence."
COMPONENT_MISSING = "Sequence component does not exist."
FAILED = "Sequence failed."
# Beyond its own time limit, how long a component's result is awaited (stock: 1 minute).
COMPONENT_GRACE_S = 60.0


class Primitive(Protocol):
    """Invokes one non-sequence action blocking; (activation id, record or None on timeout)."""

    def __call__(
        self,
        who: Identity,
        action: ResolvedAction,
        payload: Any,
        *,
        wait_s: float,
        cause: str,
        transid: list[Any],
    ) -> Awaitable[tuple[str, ActivationRecord | None]]: ...


class RecordSink(Protocol):
    async def write(self, doc: dict[str, Any]) -> None: ...


@dataclass
class Accounting:
    """What a running sequence has so far (stock's SequenceAccounting)."""

    count: int  # atomic actions run since the topmost sequence started
    response: ActivationResponse  # the last response, without its size
    logs: list[str] = field(default_factory=list)
    duration_ms: int = 0
    max_memory_mb: int | None = None
    failed: bool = False

    def fail(self, code: StatusCode, message: str, aid: str | None = None) -> None:
        if aid is not None:
            self.logs.append(aid)
        self.response = ActivationResponse.error(code, message)
        self.failed = True

    def add(self, record: ActivationRecord, count: int, max_length: int) -> None:
        """A component finished: its response is the sequence's now; an ``error`` field in
        its result, or going over ``max_length``, ends the sequence."""
        self.count = count
        self.logs.append(record.activation_id)
        self.duration_ms += record.duration_ms
        limits = record.annotation("limits")
        if isinstance(limits, dict) and isinstance(limits.get("memory"), int):
            self.max_memory_mb = max(self.max_memory_mb or 0, limits["memory"])
        result = record.response.result
        response = ActivationResponse(record.response.status_code, result)
        if count > max_length:
            response = ActivationResponse.error(StatusCode.APPLICATION_ERROR, TOO_LONG)
        self.response = response
        self.failed = count > max_length or (isinstance(result, dict) and "error" in result)

    @property
    def next_input(self) -> Any:
        """A component's input: the previous result when it is an object or array."""
        result = self.response.result
        return result if isinstance(result, dict | list) else None


class SequenceRunner:
    def __init__(
        self,
        resolver: Resolver,
        primitive: Primitive,
        records: RecordSink,
        clock: Clock,
        supervisor: Supervisor,
        max_length: int = 50,
    ) -> None:
        self.resolver = resolver
        self.primitive = primitive
        self.records = records
        self.clock = clock
        self.supervisor = supervisor
        self.max_length = max_length

    async def invoke(
        self,
        who: Identity,
        seq: ResolvedAction,
        payload: Any,
        *,
        blocking: bool,
        wait_s: float,
        transid: list[Any],
    ) -> tuple[str, ActivationRecord | None]:
        """Start a topmost sequence; for a blocking call wait up to ``wait_s`` for its
        record. The sequence runs to its end either way, in a task of its own."""
        aid = new_activation_id()
        task = self.supervisor.spawn(
            self._run(who, seq, payload, aid, None, 0, transid), name=f"sequence {aid}"
        )
        if not blocking:
            return aid, None
        try:
            async with asyncio.timeout(wait_s):
                record, _ = await asyncio.shield(task)
                return aid, record
        except TimeoutError:
            return aid, None

    async def _run(
        self,
        who: Identity,
        seq: ResolvedAction,
        payload: Any,
        aid: str,
        cause: str | None,
        count: int,
        transid: list[Any],
    ) -> tuple[ActivationRecord, int]:
        """Run ``seq``'s components; store and return its record, and the atomic count."""
        start_ms = self.clock.epoch_ms()
        acc = Accounting(count, ActivationResponse(StatusCode.SUCCESS, payload))
        for component in seq.components:
            if acc.count >= self.max_length:
                acc.fail(StatusCode.APPLICATION_ERROR, TOO_LONG)
                break
            try:
                action = await self.resolver.action(
                    who, parse_name(component, who.namespace), cached=True
                )
            except BadRequest:  # gone, or no longer readable: stock says it does not exist
                acc.fail(StatusCode.APPLICATION_ERROR, COMPONENT_MISSING)
                break
            try:
                await self._step(who, action, acc, aid, transid)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("sequence %s: component %s failed to run", aid, component)
                acc.fail(StatusCode.WHISK_ERROR, FAILED)
            if acc.failed:
                break
        record = sequence_record(
            who,
            aid,
            path=seq.path,
            name=seq.doc["name"],
            version=seq.doc.get("version", "0.0.1"),
            binding=seq.binding,
            limits=seq.doc.get("limits", {}),
            response=acc.response,
            components=acc.logs,
            duration_ms=acc.duration_ms,
            max_memory_mb=acc.max_memory_mb,
            cause=cause,
            start_ms=start_ms,
            end_ms=self.clock.epoch_ms(),
            wait_time_ms=max(0, start_ms - int(transid[1])),
        )
        await self.records.write(activation_document(record, self.clock.epoch_ms()))
        return record, acc.count

    async def _step(
        self,
        who: Identity,
        action: ResolvedAction,
        acc: Accounting,
        aid: str,
        transid: list[Any],
    ) -> None:
        """Run one component (a nested sequence whole) and account for it."""
        if action.is_sequence:
            inner = new_activation_id()
            record, count = await self._run(
                who, action, acc.next_input, inner, aid, acc.count, transid
            )
        else:
            timeout_s = action.doc.get("limits", {}).get("timeout", 60_000) / 1000
            component, found = await self.primitive(
                who,
                action,
                acc.next_input,
                wait_s=timeout_s + COMPONENT_GRACE_S,
                cause=aid,
                transid=transid,
            )
            if found is None:
                message = (
                    f"Timeout reached when retrieving activation {component} "
                    "for sequence component."
                )
                acc.fail(StatusCode.WHISK_ERROR, message, component)
                return
            record, count = found, acc.count + 1
        acc.add(record, count, self.max_length)
