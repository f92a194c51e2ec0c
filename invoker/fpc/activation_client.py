"""A container's activation client: pulls its activations from the scheduler over gRPC.

In the scheduler mode each container has one (upstream's ``ActivationClientProxy``): it calls
``ActivationService.FetchActivation`` on the scheduler named by the creation message, the
scheduler holds the call open until an activation for the action's queue arrives (a long
poll), and the answer is an ActivationMessage or a reason there is none. Every call has a
deadline, so a scheduler that stops answering is an error here, never a hang.

The answer's JSON is upstream's ``ActivationResponse``: ``{"message": X}`` where X is the
ActivationMessage itself or a ``MemoryQueueError``: ``{"noActivationMessage": "...",
"type": "NoActivationMessage"}``, ``{"noMemoryQueue": ..., "type": "NoMemoryQueue"}`` or
``{"actionMisMatch": ..., "type": "ActionMismatch"}`` (openwhisk-protocol.md 1.8 shows X only).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import grpc
from google.protobuf.wrappers_pb2 import Int64Value

from invoker.fpc.activation_pb2 import (
    FetchRequest,
    FetchResponse,
    RescheduleRequest,
    RescheduleResponse,
)
from whisk.clock import Clock, SystemClock
from whisk.protocol import ActivationMessage, ProtocolError, QualifiedName, parse_activation
from whisk.protocol.json import JSONDecodeError, dumps, dumps_str, loads

log = logging.getLogger(__name__)

FETCH_METHOD = "/activation.ActivationService/FetchActivation"
RESCHEDULE_METHOD = "/activation.ActivationService/RescheduleActivation"

# The scheduler holds a fetch for at most its ask timeout (5 s in upstream's
# ActivationServiceImpl) and then answers NoActivationMessage; three times that leaves room
# for a loaded scheduler before a silent one counts as gone.
FETCH_DEADLINE_S = 15.0
# Reschedule and the closing fetch are answered at once.
CALL_DEADLINE_S = 5.0
_SHOWN = 200  # characters of a garbage answer quoted in errors and logs


class NoActivationKind(StrEnum):
    """Why a fetch brought no activation (upstream's ``MemoryQueueError`` types), and what
    the caller does: fetch again; look for the queue on another scheduler; close."""

    NO_ACTIVATION = "NoActivationMessage"
    NO_MEMORY_QUEUE = "NoMemoryQueue"
    ACTION_MISMATCH = "ActionMismatch"


_DETAIL_KEYS = {
    NoActivationKind.NO_ACTIVATION: "noActivationMessage",
    NoActivationKind.NO_MEMORY_QUEUE: "noMemoryQueue",
    NoActivationKind.ACTION_MISMATCH: "actionMisMatch",
}


@dataclass(frozen=True, slots=True)
class Activation:
    """An activation to run: parsed, and as received (``raw`` goes back on reschedule)."""

    message: ActivationMessage
    raw: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NoActivation:
    kind: NoActivationKind
    detail: str = ""


FetchResult = Activation | NoActivation


class SchedulerError(Exception):
    """A call to the scheduler at ``address`` (``host:port``) that brought no answer."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"scheduler {address}: {reason}")
        self.address = address
        self.reason = reason


class SchedulerUnreachable(SchedulerError):
    """Nothing answers at the address (refused, unresolvable, connection lost)."""


class SchedulerTimeout(SchedulerError):
    """The call outlived its deadline."""


class SchedulerCallFailed(SchedulerError):
    """The scheduler answered the call with a gRPC error status."""


class GarbageResponse(SchedulerError):
    """The answer is neither an ActivationMessage nor a known no-activation reason.
    ``protocol_error`` is set when it was an ActivationMessage that fails validation: its
    ``partial`` may still name the activation to answer with an error."""

    def __init__(
        self, address: str, reason: str, protocol_error: ProtocolError | None = None
    ) -> None:
        super().__init__(address, reason)
        self.protocol_error = protocol_error


def parse_fetch_response(text: str, address: str = "?") -> FetchResult:
    """Read a ``FetchResponse.activationMessage``; raises :class:`GarbageResponse`."""
    shown = text[:_SHOWN]
    try:
        outer = loads(text)
    except JSONDecodeError:
        raise GarbageResponse(address, f"answer is not JSON: {shown!r}") from None
    message = outer.get("message") if isinstance(outer, dict) else None
    if not isinstance(message, dict):
        raise GarbageResponse(address, f'answer is not {{"message": {{...}}}}: {shown!r}')
    if "type" in message:
        try:
            kind = NoActivationKind(message["type"])
        except ValueError:
            raise GarbageResponse(address, f"unknown answer type: {shown!r}") from None
        detail = message.get(_DETAIL_KEYS[kind], "")
        return NoActivation(kind, detail if isinstance(detail, str) else "")
    try:
        return Activation(parse_activation(dumps(message)), message)
    except ProtocolError as e:
        raise GarbageResponse(address, f"activation message is invalid: {e.reason}", e) from None


class ActivationClient:
    """One container's client of the scheduler's ActivationService at ``host:port``.

    Constructing it does no I/O; the channel opens on the first call (gRPC connects lazily)
    and :meth:`close` says goodbye to the scheduler, then closes it. Calls are sequential:
    a container fetches its next activation when it is done with the last."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        invocation_namespace: str,
        action: QualifiedName,
        revision: str | None,
        container_id: str,
        clock: Clock | None = None,
        fetch_deadline_s: float = FETCH_DEADLINE_S,
        call_deadline_s: float = CALL_DEADLINE_S,
    ) -> None:
        self.host, self.port = host, port
        self.address = f"{host}:{port}"
        self.invocation_namespace = invocation_namespace
        self.action = action
        self.revision = revision
        self.container_id = container_id
        self._clock = clock or SystemClock()
        self._fetch_deadline_s = fetch_deadline_s
        self._call_deadline_s = call_deadline_s
        self._fqn = dumps_str(action.to_json())  # FullyQualifiedEntityName JSON
        self._rev = dumps_str(revision)  # DocRevision JSON: the quoted revision (or null)
        self._channel: grpc.aio.Channel | None = None
        self._methods: tuple[Any, Any] | None = None
        self._closed = False

    def _stubs(self) -> tuple[Any, Any]:
        """The two methods' callables, on a channel opened at first use."""
        if self._closed:
            raise SchedulerError(self.address, "the activation client is closed")
        if self._methods is None:
            self._channel = grpc.aio.insecure_channel(self.address)  # HTTP/2 without TLS
            self._methods = (
                self._channel.unary_unary(
                    FETCH_METHOD,
                    request_serializer=FetchRequest.SerializeToString,
                    response_deserializer=FetchResponse.FromString,
                ),
                self._channel.unary_unary(
                    RESCHEDULE_METHOD,
                    request_serializer=RescheduleRequest.SerializeToString,
                    response_deserializer=RescheduleResponse.FromString,
                ),
            )
        return self._methods

    def fetch_request(
        self, *, warmed: bool, last_duration_ms: int | None, alive: bool = True
    ) -> FetchRequest:
        """The request as upstream's client builds it (also what the wire tests decode)."""
        return FetchRequest(
            transactionId=dumps_str([uuid.uuid4().hex, self._clock.epoch_ms()]),
            invocationNamespace=self.invocation_namespace,
            fqn=self._fqn,
            rev=self._rev,
            containerId=self.container_id,
            warmed=warmed,
            lastDuration=None if last_duration_ms is None else Int64Value(value=last_duration_ms),
            alive=alive,
        )

    async def connect(self, timeout_s: float) -> None:
        """Open the channel now and wait until it is ready: raises
        :class:`SchedulerUnreachable` as soon as a connection fails, or at the timeout (a
        creation is answered with an error rather than a container nobody can feed)."""
        self._stubs()
        assert self._channel is not None
        channel = self._channel
        try:
            async with asyncio.timeout(timeout_s):
                state = channel.get_state(try_to_connect=True)
                while state is not grpc.ChannelConnectivity.READY:
                    if state is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                        raise SchedulerUnreachable(self.address, "unreachable: connection failed")
                    await channel.wait_for_state_change(state)
                    state = channel.get_state()
        except TimeoutError:
            raise SchedulerUnreachable(
                self.address, f"no connection within {timeout_s:g} s"
            ) from None

    async def fetch(self, *, warmed: bool, last_duration_ms: int | None = None) -> FetchResult:
        """The next activation for this container, or why there is none. ``warmed``: the
        container has run an activation before; ``last_duration_ms``: how long the last one
        ran (the scheduler's duration estimate). Raises :class:`SchedulerError`."""
        fetch, _ = self._stubs()
        request = self.fetch_request(warmed=warmed, last_duration_ms=last_duration_ms)
        response = await self._call(fetch, request, self._fetch_deadline_s)
        try:
            return parse_fetch_response(response.activationMessage, self.address)
        except GarbageResponse as e:
            log.error("fetch for %s (container %s): %s", self.action.docid, self.container_id, e)
            raise

    async def reschedule(self, activation: Activation) -> bool:
        """Give an activation back to the scheduler (this container cannot run it); True
        when the scheduler queued it again."""
        _, reschedule = self._stubs()
        request = RescheduleRequest(
            invocationNamespace=self.invocation_namespace,
            fqn=self._fqn,
            rev=self._rev,
            activationMessage=dumps_str(activation.raw),
        )
        response = await self._call(reschedule, request, self._call_deadline_s)
        return bool(response.isRescheduled)

    async def close(self, goodbye: bool = True) -> None:
        """Tell the scheduler this container is gone (a last fetch with ``alive`` false, as
        upstream's client does; not with ``goodbye`` false: no container of ours stood
        behind it) and close the channel; idempotent, never raises."""
        if self._closed:
            return
        try:
            if goodbye:
                fetch, _ = self._stubs()
                request = self.fetch_request(warmed=False, last_duration_ms=None, alive=False)
                await self._call(fetch, request, self._call_deadline_s)
        except SchedulerError as e:
            log.warning("closing the activation client of container %s: %s", self.container_id, e)
        finally:
            self._closed = True
            if self._channel is not None:
                await self._channel.close()

    async def _call(self, method: Any, request: Any, deadline_s: float) -> Any:
        try:
            return await method(request, timeout=deadline_s)
        except grpc.aio.AioRpcError as e:
            raise _error(self.address, e, deadline_s) from None


def _error(address: str, e: grpc.aio.AioRpcError, deadline_s: float) -> SchedulerError:
    code, details = e.code(), e.details() or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        return SchedulerUnreachable(address, f"unreachable: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return SchedulerTimeout(address, f"no answer within {deadline_s:g} s")
    return SchedulerCallFailed(address, f"{code.name}: {details}")
