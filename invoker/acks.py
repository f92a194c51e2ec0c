"""Acknowledgements to ``completed<C>``: every parsed activation gets at least one.

A record (an :class:`~whisk.protocol.ActivationRecord`, serialized here once per ack) too
large for the topic is re-sent shrunk (the activation id instead of the record; the
controller then reads the record from the database). While the bus is unreachable sends
are retried with back-off, so an ack is never dropped; the caller's activation stays
unfinished (its offset uncommitted) until the ack is out.

Calls of :data:`HEALTH_CONTROLLER` get none: that is the scheduler mode's own health test
(invoker.fpc.health), whose ``completedhealth`` topic no controller reads.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from whisk.bus import MessageTooLarge, Producer
from whisk.protocol import ActivationRecord, combined_ack, completion_ack, dumps, result_ack

log = logging.getLogger(__name__)

HEALTH_CONTROLLER = "health"  # upstream's ControllerInstanceId("health")


class AckSender:
    def __init__(
        self,
        producer: Producer,
        instance: dict[str, Any],
        topic_prefix: str = "",
        bulk_producer: Producer | None = None,
        max_backoff_s: float = 5.0,
    ) -> None:
        self.producer = producer
        # Completions nobody waits on (the slot release) may ride a batching producer;
        # anything carrying a blocking caller's result goes out at once.
        self.bulk_producer = bulk_producer or producer
        self.instance = instance
        self.topic_prefix = topic_prefix
        self.max_backoff_s = max_backoff_s
        self.sent = 0
        self.shrunk = 0
        self.retrying = 0  # acks the bus refused and that wait to be re-sent: the node's health

    def topic(self, controller: str) -> str:
        return f"{self.topic_prefix}completed{controller}"

    async def _send(
        self,
        controller: str,
        ack: dict[str, Any],
        shrink: dict[str, Any] | None,
        urgent: bool = True,
    ) -> None:
        if controller == HEALTH_CONTROLLER:
            return
        topic = self.topic(controller)
        value = dumps(ack)
        producer = self.producer if urgent else self.bulk_producer
        backoff = 0.1
        failed = False
        try:
            while True:
                try:
                    await producer.send(topic, value)
                    self.sent += 1
                    return
                except MessageTooLarge:
                    if shrink is None:
                        raise
                    log.info(
                        "ack of %d bytes too large for %s; sending it shrunk", len(value), topic
                    )
                    value, shrink = dumps(shrink), None
                    self.shrunk += 1
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # the bus is away: keep the ack, retry
                    log.warning("ack to %s failed (%s); retrying in %.1fs", topic, e, backoff)
                    if not failed:
                        failed = True
                        self.retrying += 1
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self.max_backoff_s)
        finally:
            if failed:
                self.retrying -= 1

    async def result(self, controller: str, transid: Any, record: ActivationRecord) -> None:
        """ResultMessage for a blocking caller (logs still being collected)."""
        full = result_ack(transid, record.to_json())
        await self._send(controller, full, result_ack(transid, record.activation_id))

    async def completion(
        self, controller: str, transid: Any, activation_id: str, system_error: bool
    ) -> None:
        await self._send(
            controller,
            completion_ack(transid, activation_id, system_error, self.instance),
            None,
            urgent=False,
        )

    async def combined(
        self,
        controller: str,
        transid: Any,
        record: ActivationRecord,
        system_error: bool,
        shrunk: bool = False,
    ) -> None:
        """Result and completion in one message; ``shrunk`` sends only the activation id."""
        small = combined_ack(transid, record.activation_id, system_error, self.instance)
        if shrunk:
            full = small
        else:
            full = combined_ack(transid, record.to_json(), system_error, self.instance)
        await self._send(controller, full, None if shrunk else small, urgent=not shrunk)
