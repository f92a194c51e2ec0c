"""What a controller writes: action documents and ActivationMessages.

Used by our controller-compatible front, the simulator's load source, the tests and the
benchmarks, so they all produce exactly the stock controller's formats.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid
from typing import Any

from whisk.protocol.actions import DEFAULT_LOGS_MB, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_MS
from whisk.protocol.messages import ActivationMessage, Identity, QualifiedName

GUEST_UUID = "23bc46b1-71f6-4ed5-8c54-816aa4f8c502"
GUEST_KEY = "123zO3xZCLrMN6v2BKK1dXYFpXlPkccOFqm12CdAsMgRU4VrNZ9lyGVCGuMDGIwP"
GUEST = Identity(
    subject="guest",
    namespace="guest",
    namespace_uuid=GUEST_UUID,
    authkey={"api_key": f"{GUEST_UUID}:{GUEST_KEY}"},
    rights=("READ", "PUT", "DELETE", "ACTIVATE"),
    limits={},
)
MAX_INLINE_BYTES = 16 * 1024  # whisk.db.max-inline-size: smaller code goes in a mem: name


def new_activation_id() -> str:
    return uuid.uuid4().hex


def new_transid(start_ms: int) -> list[Any]:
    return [secrets.token_urlsafe(24)[:32], start_ms]


def activation_message(
    action: QualifiedName,
    revision: str | None,
    *,
    start_ms: int,
    user: Identity = GUEST,
    blocking: bool = True,
    content: Any = None,
    controller: str = "0",
    activation_id: str | None = None,
    transid: list[Any] | None = None,
    init_args: tuple[str, ...] = (),
    cause: str | None = None,
) -> ActivationMessage:
    return ActivationMessage(
        transid=transid or new_transid(start_ms),
        action=action,
        revision=revision,
        user=user,
        activation_id=activation_id or new_activation_id(),
        controller=controller,
        blocking=blocking,
        content=content,
        init_args=init_args,
        cause=cause,
    )


def code_attachment(data: bytes, binary: bool) -> dict[str, Any]:
    """The ``exec.code`` reference the controller writes; small code inline as ``mem:``."""
    digest = "sha256-" + hashlib.sha256(data).hexdigest()
    content_type = "application/octet-stream" if binary else "text/plain; charset=UTF-8"
    ref = {"attachmentType": content_type, "length": len(data), "digest": digest}
    if len(data) < MAX_INLINE_BYTES:
        ref["attachmentName"] = "mem:" + base64.urlsafe_b64encode(data).decode()
    else:
        ref["attachmentName"] = f"couch:{uuid.uuid4()}"
    return ref


def action_document(
    namespace: str,
    name: str,
    *,
    kind: str,
    code: bytes | None = None,
    binary: bool = False,
    main: str | None = None,
    image: str | None = None,
    components: list[str] | None = None,
    package: str | None = None,
    parameters: list[dict[str, Any]] | None = None,
    annotations: list[dict[str, Any]] | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    memory_mb: int = DEFAULT_MEMORY_MB,
    logs_mb: int = DEFAULT_LOGS_MB,
    concurrency: int = 1,
    version: str = "0.0.1",
    publish: bool = False,
    updated_ms: int = 0,
) -> dict[str, Any]:
    """An action document as the controller stores it. When the code is too large for a
    ``mem:`` name, ``exec.code.attachmentName`` is ``couch:<uuid>`` and the caller must store
    the bytes as that attachment. A sequence (``kind`` ``sequence``) has ``components``, its
    actions' fully qualified names, also kept in an ``_actions`` parameter as stock keeps them."""
    path = f"{namespace}/{package}" if package else namespace
    exec_: dict[str, Any] = {"kind": kind, "binary": binary}
    if components is not None:
        exec_ = {"kind": kind, "components": components}
        parameters = [{"key": "_actions", "value": components}]
    if code is not None:
        exec_["code"] = code_attachment(code, binary)
    if main:
        exec_["main"] = main
    if image:
        exec_["image"] = image
    return {
        "_id": f"{path}/{name}",
        "entityType": "action",
        "updated": updated_ms,
        "namespace": path,
        "name": name,
        "version": version,
        "publish": publish,
        "exec": exec_,
        "parameters": parameters or [],
        "limits": {
            "timeout": timeout_ms,
            "memory": memory_mb,
            "logs": logs_mb,
            "concurrency": concurrency,
        },
        "annotations": annotations
        if annotations is not None
        else [{"key": "provide-api-key", "value": False}, {"key": "exec", "value": kind}],
    }
