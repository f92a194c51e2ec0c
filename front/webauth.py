"""Web actions that ask for credentials: the ``require-whisk-auth`` annotation, as the stock
controller reads it (``WebActions.confirmAuthenticated``).

- absent: anyone may call the action;
- ``true``: the caller must give a valid API key (any subject's, by basic auth), and the
  action then sees its namespace as ``__ow_user``;
- a string or a number: the ``X-Require-Whisk-Auth`` header must equal it;
- anything else (``false``, ``null``, an object): nobody may, as stock (a value it cannot read
  is refused rather than taken as no requirement).

Refused calls get 401 with the stock body, before anything is run. Pure: the caller passes
the annotations, the header and whether the request authenticated.
"""

from __future__ import annotations

import hmac
from typing import Any

ANNOTATION = "require-whisk-auth"
HEADER = "X-Require-Whisk-Auth"
# akka-http's default text for 401, which the stock controller's terminate(Unauthorized) sends.
UNAUTHORIZED = "Authentication is possible but has failed or not yet been provided."
_ABSENT = object()


def requirement(annotations: list[dict[str, Any]]) -> Any:
    """The annotation's value, or :data:`_ABSENT` (a ``null`` value is not absence)."""
    for a in annotations:
        if isinstance(a, dict) and a.get("key") == ANNOTATION:
            return a.get("value")
    return _ABSENT


def allowed(annotations: list[dict[str, Any]], header: str | None, authenticated: bool) -> bool:
    """Whether a call with this ``X-Require-Whisk-Auth`` header (None: none) may run."""
    required = requirement(annotations)
    if required is _ABSENT:
        return True
    if required is True:
        return authenticated
    if isinstance(required, bool) or not isinstance(required, str | int | float):
        return False
    expected = required if isinstance(required, str) else str(required)
    return header is not None and hmac.compare_digest(header.encode(), expected.encode())
