"""What every route of the REST API shares: error bodies as the stock controller writes them
(``{"error": ..., "code": <transaction id>}``), the error middleware, reading JSON bodies and
the list parameters (``limit``, ``skip``, ``count``)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from front.controller import NoInvokers
from whisk.protocol import dumps, loads
from whisk.protocol.json import JSONDecodeError
from whisk.store import StoreError

log = logging.getLogger(__name__)

TRANSID = web.RequestKey("transid", str)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

MAX_PAYLOAD = 1024 * 1024  # an invocation's body
MAX_BODY = 50 * 1024 * 1024  # any request: action code up to 48 MB, base64 included
MAX_LIST_LIMIT = 200
DEFAULT_LIST_LIMIT = 30
NOT_FOUND = "The requested resource does not exist."
CONFLICT = "Concurrent modification to resource detected."
WRONG_COLLECTION = "Resource by this name exists but is not in this collection."
FORBIDDEN = "The supplied authentication is not authorized to access this resource."


class BadRequest(ValueError):
    """A request the API refuses (HTTP 400, or ``status`` when given)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class NotFound(BadRequest):
    def __init__(self, message: str = NOT_FOUND) -> None:
        super().__init__(message, 404)


class Forbidden(BadRequest):
    def __init__(self, what: str | None = None) -> None:
        message = (
            f"The supplied authentication is not authorized to access '{what}'."
            if what
            else FORBIDDEN
        )
        super().__init__(message, 403)


def error(status: int, message: str, request: web.Request | None = None) -> web.Response:
    code = request.get(TRANSID) if request is not None else None
    return web.json_response(
        {"error": message, "code": code or secrets.token_hex(16)}, status=status
    )


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None):
    """orjson-encoded (the stdlib encoder is slow on large results)."""
    return web.Response(
        body=dumps(body), status=status, headers=headers, content_type="application/json"
    )


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure becomes the stock error body; nothing escapes as an aiohttp page."""
    request[TRANSID] = secrets.token_hex(16)
    try:
        return await handler(request)
    except BadRequest as e:
        return error(e.status, str(e), request)
    except web.HTTPRequestEntityTooLarge:
        return error(413, "The request content was too large.", request)
    except web.HTTPException as e:
        if e.status == 404:
            return error(404, NOT_FOUND, request)
        if e.status == 405:
            return error(405, "The requested method is not allowed.", request)
        raise
    except NoInvokers as e:  # "No invokers available." or, with schedulers, its own words
        return error(503, str(e), request)
    except StoreError as e:
        log.error("store error on %s %s: %s", request.method, request.path, e)
        return error(500, "The server encountered an unexpected error with the database.", request)
    except Exception:
        log.exception("internal error on %s %s", request.method, request.path)
        return error(500, "An internal error occurred.", request)


async def read_json(request: web.Request, default: Any = None) -> Any:
    raw = await request.read()
    if not raw.strip():
        return default
    try:
        return loads(raw)
    except (JSONDecodeError, UnicodeDecodeError):
        raise BadRequest("The request content was malformed.") from None


async def read_object(request: web.Request) -> dict[str, Any]:
    """A JSON object body (``{}`` when empty)."""
    body = await read_json(request, {})
    if not isinstance(body, dict):
        raise BadRequest("The request content was malformed: expected a JSON object.")
    return body


def forwarded_headers(request: web.Request) -> dict[str, str]:
    """The request's headers as an action sees them (``__ow_headers``): lower-cased names,
    without the caller's credentials."""
    return {k.lower(): v for k, v in request.headers.items() if k.lower() != "authorization"}


def flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    return default if value is None else value.lower() == "true"


def paging(request: web.Request, collection: str) -> tuple[int, int]:
    """``limit`` (absent: 30, 0: the maximum, at most 200) and ``skip``, as the stock
    controller reads them."""
    values = []
    for name, default in (("limit", DEFAULT_LIST_LIMIT), ("skip", 0)):
        text = request.query.get(name)
        try:
            values.append(default if text is None else int(text))
        except ValueError:
            raise BadRequest(f"The value '{text}' is not an integer for {collection}.") from None
    limit, skip = values
    if not 0 <= limit <= MAX_LIST_LIMIT:
        raise BadRequest(
            f"The value '{limit}' is not in the range of 0 to {MAX_LIST_LIMIT} for {collection}."
        )
    if skip < 0:
        raise BadRequest(f"The value '{skip}' is not greater than or equal to 0 for {collection}.")
    return limit or MAX_LIST_LIMIT, skip


def listing(
    request: web.Request,
    collection: str,
    docs: Sequence[dict[str, Any]],
    view: Callable[[dict[str, Any]], Any],
) -> web.Response:
    """One page of a listing (``limit``, ``skip``), or with ``count=true`` how many there are
    from ``skip`` on (``{"<collection>": n}``, as stock)."""
    limit, skip = paging(request, collection)
    if flag(request, "count"):
        return json_response({collection: len(docs[skip:])})
    return json_response([view(d) for d in docs[skip : skip + limit]])
