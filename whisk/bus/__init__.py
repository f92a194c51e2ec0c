"""Message buses: Kafka (aiokafka) for deployments, an in-process bus for the embedded mode."""

from whisk.bus.base import Bus, Consumer, MessageTooLarge, Producer, Record

__all__ = ["Bus", "Consumer", "MessageTooLarge", "Producer", "Record"]
