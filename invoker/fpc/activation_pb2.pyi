from google.protobuf import wrappers_pb2 as _wrappers_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FetchRequest(_message.Message):
    __slots__ = ("transactionId", "invocationNamespace", "fqn", "rev", "containerId", "warmed", "lastDuration", "alive")
    TRANSACTIONID_FIELD_NUMBER: _ClassVar[int]
    INVOCATIONNAMESPACE_FIELD_NUMBER: _ClassVar[int]
    FQN_FIELD_NUMBER: _ClassVar[int]
    REV_FIELD_NUMBER: _ClassVar[int]
    CONTAINERID_FIELD_NUMBER: _ClassVar[int]
    WARMED_FIELD_NUMBER: _ClassVar[int]
    LASTDURATION_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    transactionId: str
    invocationNamespace: str
    fqn: str
    rev: str
    containerId: str
    warmed: bool
    lastDuration: _wrappers_pb2.Int64Value
    alive: bool
    def __init__(self, transactionId: _Optional[str] = ..., invocationNamespace: _Optional[str] = ..., fqn: _Optional[str] = ..., rev: _Optional[str] = ..., containerId: _Optional[str] = ..., warmed: _Optional[bool] = ..., lastDuration: _Optional[_Union[_wrappers_pb2.Int64Value, _Mapping]] = ..., alive: _Optional[bool] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("activationMessage",)
    ACTIVATIONMESSAGE_FIELD_NUMBER: _ClassVar[int]
    activationMessage: str
    def __init__(self, activationMessage: _Optional[str] = ...) -> None: ...

class RescheduleRequest(_message.Message):
    __slots__ = ("invocationNamespace", "fqn", "rev", "activationMessage")
    INVOCATIONNAMESPACE_FIELD_NUMBER: _ClassVar[int]
    FQN_FIELD_NUMBER: _ClassVar[int]
    REV_FIELD_NUMBER: _ClassVar[int]
    ACTIVATIONMESSAGE_FIELD_NUMBER: _ClassVar[int]
    invocationNamespace: str
    fqn: str
    rev: str
    activationMessage: str
    def __init__(self, invocationNamespace: _Optional[str] = ..., fqn: _Optional[str] = ..., rev: _Optional[str] = ..., activationMessage: _Optional[str] = ...) -> None: ...

class RescheduleResponse(_message.Message):
    __slots__ = ("isRescheduled",)
    ISRESCHEDULED_FIELD_NUMBER: _ClassVar[int]
    isRescheduled: bool
    def __init__(self, isRescheduled: _Optional[bool] = ...) -> None: ...
