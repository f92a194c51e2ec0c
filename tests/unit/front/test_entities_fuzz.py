"""Hostile request bodies never crash the front's entity builders: anything a client sends for
an action, sequence, package, binding, trigger or rule is either built into a document or
refused with a BadRequest (a 4xx with a clear message), never another exception."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from front.entities import Limits, new_action_document, updated_pairs
from front.http import BadRequest
from front.names import parse_name
from front.packages import new_package_document
from front.triggers import new_rule_document, new_trigger_document
from tests.unit.whisk.protocol.test_messages_fuzz import json_values
from whisk.manifest import Manifest
from whisk.protocol import QualifiedName

MANIFEST = Manifest()
FIELDS = [
    "exec",
    "parameters",
    "annotations",
    "limits",
    "binding",
    "publish",
    "version",
    "trigger",
    "action",
    "status",
    "components",
    "kind",
    "code",
    "namespace",
    "name",
]
# The routes read bodies with read_object: only JSON objects reach the builders.
bodies = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), json_values, max_size=6)
OLD = {
    "_id": "guest/x",
    "_rev": "1-a",
    "namespace": "guest",
    "name": "x",
    "version": "0.0.1",
    "parameters": [{"key": "k", "value": 1}],
    "annotations": [],
    "publish": False,
    "binding": {},
    "exec": {"kind": "nodejs:20", "code": "x", "binary": False},
    "limits": {},
}


def refused_or_built(build: Any) -> None:
    try:
        doc = build()
    except BadRequest as e:
        assert 400 <= e.status < 500 and str(e)
    else:
        assert doc["_id"].startswith("guest/")


@settings(max_examples=300, deadline=None)
@given(body=bodies, old=st.booleans())
def test_entity_documents_are_built_or_refused(body: Any, old: bool) -> None:
    prior = dict(OLD) if old else None
    t, a = QualifiedName("guest", "t"), QualifiedName("guest", "a")
    for build in (
        lambda: new_package_document("guest", "p", body, now_ms=1, old=prior),
        lambda: new_trigger_document("guest", "t", body, now_ms=1, old=prior),
        lambda: new_rule_document("guest", "r", body, t, a, now_ms=1, old=prior),
        lambda: new_action_document(
            "guest",
            "x",
            body,
            kinds=set(MANIFEST.runtimes),
            kind_defaults=MANIFEST.defaults,
            limits=Limits(),
            now_ms=1,
            old=prior,
            components=["/guest/a"],
        )[0],
        lambda: {"_id": "guest/", "pairs": updated_pairs(body, prior)},
    ):
        refused_or_built(build)


@settings(max_examples=500, deadline=None)
@given(value=json_values | st.text(alphabet="/_ab.-@ \\x00", max_size=20))
def test_entity_names_are_parsed_or_refused(value: Any) -> None:
    try:
        name = parse_name(value, "guest")
    except BadRequest as e:
        assert e.status == 400
    else:
        assert name.namespace and name.name and len(name.path.split("/")) <= 2
