"""The one place that knows OpenWhisk's wire formats.

Everything outside this package works on the typed values defined here. Bad input stops
here with a :class:`ProtocolError` that carries whatever could still be read (so the invoker
can answer with a whisk-error ack whenever an activation id is known).
"""

from whisk.protocol.actions import (
    Action,
    ActionLimits,
    action_from_document,
    decode_attachment,
)
from whisk.protocol.errors import Partial, ProtocolError
from whisk.protocol.json import dumps, loads
from whisk.protocol.messages import (
    ActivationMessage,
    Identity,
    InvokerInstance,
    QualifiedName,
    combined_ack,
    completion_ack,
    parse_activation,
    ping_message,
    result_ack,
)
from whisk.protocol.records import (
    ActivationRecord,
    ActivationResponse,
    StatusCode,
    action_record,
    activation_document,
    fallback_record,
    kaas_record,
    sequence_record,
    trigger_record,
)

__all__ = [
    "Action",
    "ActionLimits",
    "ActivationMessage",
    "ActivationRecord",
    "ActivationResponse",
    "Identity",
    "InvokerInstance",
    "Partial",
    "ProtocolError",
    "QualifiedName",
    "StatusCode",
    "action_from_document",
    "action_record",
    "activation_document",
    "combined_ack",
    "completion_ack",
    "decode_attachment",
    "dumps",
    "fallback_record",
    "kaas_record",
    "loads",
    "parse_activation",
    "ping_message",
    "result_ack",
    "sequence_record",
    "trigger_record",
]
