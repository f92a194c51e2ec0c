"""OpenWhisk's CouchDB databases, set up and administered the way the stock deployment's
ansible ``initdb`` playbook and ``wskadmin`` do, over the synchronous ``couchdb`` client.

The JSON files beside this module are OpenWhisk's design documents, data reproduced from
apache/openwhisk ``ansible/files`` (Apache-2.0): the stock controller queries their views by
name (``subjects.v2.0.0/identities`` to authenticate, ``whisks.v2.1.0/...`` to list).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

import couchdb

# Per database role, the design documents ansible installs (tasks/initdb.yml for the
# subjects, tasks/recreateViews.yml for the other two).
DESIGN_FILES: dict[str, tuple[str, ...]] = {
    "subjects": (
        "auth_design_document_for_subjects_db_v2.0.0.json",
        "filter_design_document.json",
        "namespace_throttlings_design_document_for_subjects_db.json",
    ),
    "whisks": (
        "whisks_design_document_for_entities_db_v2.1.0.json",
        "filter_design_document.json",
    ),
    "activations": (
        "whisks_design_document_for_activations_db_v2.1.0.json",
        "whisks_design_document_for_activations_db_filters_v2.1.1.json",
        "filter_design_document.json",
        "activations_design_document_for_activations_db.json",
        "logCleanup_design_document_for_activations_db.json",
    ),
}
# The view the controller authenticates with: keys [namespace] and [uuid, key].
IDENTITIES_VIEW = "subjects.v2.0.0/identities"


class AdminError(Exception):
    """An operation that cannot be done, said in one line; ``status`` is the exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Databases:
    """The three databases' names (stock: ``<prefix>subjects``, ``whisks``, ``activations``)."""

    subjects: str
    whisks: str
    activations: str

    def by_role(self) -> dict[str, str]:
        return {"subjects": self.subjects, "whisks": self.whisks, "activations": self.activations}


def design_documents(role: str) -> list[dict[str, Any]]:
    """The shipped design documents for a database role, freshly parsed (callers may mutate)."""
    folder = resources.files(__name__)
    return [json.loads((folder / name).read_text()) for name in DESIGN_FILES[role]]


def connect(url: str, user: str | None, password: str | None, timeout_s: float = 30.0):
    """A ``couchdb.Server`` that sends the credentials with every request (pouchdb-server
    must never see an unauthenticated write once it has an admin)."""
    server = couchdb.Server(url, session=couchdb.http.Session(timeout=timeout_s))
    if user:
        server.resource.credentials = (user, password or "")
    return server


def _reason(error: couchdb.http.HTTPError) -> str:
    detail = error.args[0] if error.args else ""
    if isinstance(detail, tuple) and len(detail) == 2 and isinstance(detail[0], int):
        detail = detail[1]  # ServerError: (status, (error, reason) or body)
    if isinstance(detail, tuple):
        return ": ".join(str(d) for d in detail if d)
    if isinstance(detail, bytes):
        return detail.decode(errors="replace").strip()
    return str(detail)


@contextmanager
def couch_errors(url: str, user: str | None) -> Iterator[None]:
    """Turn the client's exceptions into one-line :class:`AdminError` s: exit status 2 for
    an unreachable server, refused credentials or a server error, 1 for a missing document
    or view (not set up) and a conflict with a concurrent writer."""
    try:
        yield
    except couchdb.http.Unauthorized:
        raise AdminError(
            f"CouchDB at {url} refused the credentials of user {user!r}", status=2
        ) from None
    except couchdb.http.Forbidden as e:
        raise AdminError(
            f"CouchDB at {url} forbids user {user!r} this: {_reason(e)}", status=2
        ) from None
    except couchdb.http.ServerError as e:
        raise AdminError(f"CouchDB at {url} answered {e.args[0][0]}: {_reason(e)}", 2) from None
    except couchdb.http.ResourceNotFound as e:
        raise AdminError(
            f"not found on CouchDB at {url} ({_reason(e)}): has `ow-invoker admin initdb` run?"
        ) from None
    except couchdb.http.HTTPError as e:  # 409/412: a concurrent writer, try again
        raise AdminError(f"CouchDB at {url} refused the change: {_reason(e)}") from None
    except (OSError, http.client.HTTPException) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise AdminError(f"cannot reach CouchDB at {url}: {reason}", status=2) from None


def open_db(server: couchdb.Server, name: str) -> couchdb.Database:
    """An existing database, or a clear error saying how to create it."""
    try:
        return server[name]
    except couchdb.http.ResourceNotFound:
        raise AdminError(
            f"database {name!r} does not exist: run `ow-invoker admin initdb` first"
        ) from None
