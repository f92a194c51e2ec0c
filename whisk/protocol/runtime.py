"""The action-container protocol: ``/init`` and ``/run`` bodies, and how responses map to
activation results (spec sections 3.3-3.5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whisk.protocol.actions import Action
from whisk.protocol.json import JSONDecodeError, dumps_str, loads
from whisk.protocol.messages import ActivationMessage
from whisk.protocol.records import ActivationResponse, StatusCode

MAX_PAYLOAD_BYTES = 1024 * 1024
SUPPORTED_ENCRYPTION = ("noop", "off", "")

ACTION_NOT_FOUND = "Action could not be found or may have been deleted."
ACTION_NOT_COMPATIBLE = "Action version is not compatible and cannot be invoked."
ACTION_NOT_FETCHED = "Action could not be fetched."
PROVISION_FAILED = "Failed to provision resources to run the action."
INIT_EXITED = "The action did not initialize and exited unexpectedly."
RUN_EXITED = "The action did not produce a valid response and exited unexpectedly."
MEMORY_EXHAUSTED = "The action exhausted its memory and was aborted."
INVALID_JSON = "The action did not produce a valid JSON or JSON Array response"


def timeout_message(timeout_ms: int, during_init: bool = False) -> str:
    suffix = " during initialization." if during_init else "."
    return f"The action exceeded its time limits of {timeout_ms} milliseconds{suffix}"


def _env_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return dumps_str(value)


def split_content(msg: ActivationMessage) -> tuple[Any, dict[str, str]]:
    """``content`` minus the ``initArgs`` (which become /init environment), and those args."""
    content = msg.content
    if content is None:
        return {}, {}
    if not isinstance(content, dict):
        return content, {}
    if not msg.init_args:
        return content, {}
    init_env = {k: _env_string(content[k]) for k in msg.init_args if k in content}
    value = {k: v for k, v in content.items() if k not in init_env}
    return value, init_env


def unsupported_encryption(msg: ActivationMessage) -> str | None:
    """Parameters encrypted with a scheme this invoker holds no key for."""
    for name, scheme in msg.locked_args.items():
        if scheme.lower() not in SUPPORTED_ENCRYPTION:
            return (
                f"Parameter {name!r} is encrypted with {scheme!r}, "
                "which this invoker cannot decrypt."
            )
    return None


def _context(msg: ActivationMessage, action: Action, deadline_ms: int) -> dict[str, str | None]:
    ctx: dict[str, str | None] = {}
    if action.provide_api_key:
        for k, v in msg.user.authkey.items():
            ctx[k] = _env_string(v)
    ctx.update(
        namespace=msg.user.namespace,
        action_name=f"/{msg.action.path}/{msg.action.name}",
        action_version=msg.action.version or action.version,
        activation_id=msg.activation_id,
        transaction_id=msg.transaction_id,
        deadline=str(deadline_ms),
    )
    return ctx


def init_body(
    msg: ActivationMessage,
    action: Action,
    deadline_ms: int,
    platform_env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``platform_env``: extra variables the platform gives this action (e.g. the GPU pool's
    address for GPU actions)."""
    _, init_env = split_content(msg)
    env = {f"__OW_{k.upper()}": v or "" for k, v in _context(msg, action, deadline_ms).items()}
    env.update(init_env)
    env.update(platform_env or {})
    value: dict[str, Any] = {
        "name": action.name,
        "main": action.main or "main",
        "binary": action.binary,
        "env": env,
    }
    if action.code is not None:
        value["code"] = action.code
    return {"value": value}


def run_body(msg: ActivationMessage, action: Action, deadline_ms: int) -> dict[str, Any]:
    value, _ = split_content(msg)
    return {"value": value, **_context(msg, action, deadline_ms)}


def interpret_run(
    status: int, body: bytes, max_payload: int = MAX_PAYLOAD_BYTES, length: int | None = None
) -> ActivationResponse:
    """Map a ``/run`` HTTP response to the activation's result and status code. ``length``
    is the body's true size when the client kept only its first ``max_payload + 1`` bytes."""
    size = max(length or 0, len(body))
    if size > max_payload:
        truncated = body[:max_payload].decode("utf-8", "replace")
        return ActivationResponse.error(
            StatusCode.APPLICATION_ERROR,
            "The action produced a response that exceeded the allowed length: "
            f"{size} > {max_payload} bytes. The truncated response was: {truncated}",
            size,
        )
    text = body.decode("utf-8", "replace")
    size = len(text)
    try:
        parsed = loads(body) if body else None
    except (JSONDecodeError, UnicodeDecodeError):
        parsed = None
    if isinstance(parsed, dict):
        if "error" in parsed:
            code = StatusCode.APPLICATION_ERROR if status == 200 else StatusCode.DEVELOPER_ERROR
            return ActivationResponse.error(code, parsed["error"], size)
        if status == 200:
            return ActivationResponse(StatusCode.SUCCESS, parsed, size)
    elif isinstance(parsed, list) and status == 200:
        return ActivationResponse(StatusCode.SUCCESS, parsed, size)
    return ActivationResponse.error(StatusCode.DEVELOPER_ERROR, f"{INVALID_JSON}: {text}", size)


def interpret_init(status: int, body: bytes) -> ActivationResponse | None:
    """None when ``/init`` succeeded, else the developer-error response."""
    if status == 200:
        return None
    text = body.decode("utf-8", "replace")
    try:
        parsed = loads(body) if body else None
    except (JSONDecodeError, UnicodeDecodeError):
        parsed = None
    if isinstance(parsed, dict) and "error" in parsed:
        return ActivationResponse.error(StatusCode.DEVELOPER_ERROR, parsed["error"], len(text))
    message = "The action failed during initialization" + (f": {text}" if text else ".")
    return ActivationResponse.error(StatusCode.DEVELOPER_ERROR, message, len(text))
