"""What a controller writes (whisk/protocol/controller.py): ids, activation messages and action
documents, exactly."""

from __future__ import annotations

import base64
import hashlib
import re

from whisk.protocol.actions import DEFAULT_LOGS_MB, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_MS
from whisk.protocol.controller import (
    GUEST,
    MAX_INLINE_BYTES,
    action_document,
    activation_message,
    code_attachment,
    new_activation_id,
    new_transid,
)
from whisk.protocol.messages import Identity, QualifiedName

# -- activation records ---------------------------------------------------------------------

ALICE = Identity("alice", "guest", "uuid-1", {"api_key": "k"})


# -- what a controller writes ---------------------------------------------------------------


def test_ids_are_as_the_controller_makes_them():
    tid, start = new_transid(42)
    assert len(tid) == 32 and re.fullmatch(r"[A-Za-z0-9_-]{32}", tid) and start == 42
    assert re.fullmatch(r"[0-9a-f]{32}", new_activation_id())


def test_an_activation_message_carries_everything_it_is_given():
    msg = activation_message(
        QualifiedName("guest", "a"),
        "3-r",
        start_ms=7,
        user=ALICE,
        blocking=False,
        content={"x": 1},
        controller="2",
        activation_id="b" * 32,
        transid=["t", 7],
        init_args=("x",),
        cause="c" * 32,
    )
    assert (msg.revision, msg.user, msg.blocking, msg.content, msg.controller) == (
        "3-r",
        ALICE,
        False,
        {"x": 1},
        "2",
    )
    assert (msg.activation_id, msg.transid, msg.init_args, msg.cause) == (
        "b" * 32,
        ["t", 7],
        ("x",),
        "c" * 32,
    )
    fresh = activation_message(QualifiedName("guest", "a"), None, start_ms=9)
    assert fresh.user == GUEST and fresh.blocking and fresh.controller == "0"
    assert fresh.transid[1] == 9 and len(fresh.activation_id) == 32 and fresh.cause is None


def test_code_is_inline_when_small_and_an_attachment_when_not():
    small = code_attachment(b"print(1)", binary=False)
    assert small == {
        "attachmentType": "text/plain; charset=UTF-8",
        "length": 8,
        "digest": "sha256-" + hashlib.sha256(b"print(1)").hexdigest(),
        "attachmentName": "mem:" + base64.urlsafe_b64encode(b"print(1)").decode(),
    }
    big = code_attachment(b"x" * MAX_INLINE_BYTES, binary=True)
    assert big["attachmentType"] == "application/octet-stream"
    assert big["length"] == MAX_INLINE_BYTES and MAX_INLINE_BYTES == 16 * 1024
    assert re.fullmatch(r"couch:[0-9a-f-]{36}", big["attachmentName"])
    assert code_attachment(b"x" * (MAX_INLINE_BYTES - 1), True)["attachmentName"].startswith("mem:")


def test_an_action_document_as_the_controller_stores_it():
    doc = action_document(
        "guest",
        "hello",
        kind="python:3.11",
        code=b"c",
        main="run",
        package="pkg",
        parameters=[{"key": "p", "value": 1}],
        timeout_ms=1000,
        memory_mb=128,
        logs_mb=5,
        concurrency=3,
        version="0.0.2",
        publish=True,
        updated_ms=77,
    )
    assert doc == {
        "_id": "guest/pkg/hello",
        "entityType": "action",
        "updated": 77,
        "namespace": "guest/pkg",
        "name": "hello",
        "version": "0.0.2",
        "publish": True,
        "exec": {
            "kind": "python:3.11",
            "binary": False,
            "code": code_attachment(b"c", False),
            "main": "run",
        },
        "parameters": [{"key": "p", "value": 1}],
        "limits": {"timeout": 1000, "memory": 128, "logs": 5, "concurrency": 3},
        "annotations": [
            {"key": "provide-api-key", "value": False},
            {"key": "exec", "value": "python:3.11"},
        ],
    }


def test_a_blackbox_and_a_sequence_document():
    box = action_document("guest", "box", kind="blackbox", image="me/img", annotations=[])
    assert box["exec"] == {"kind": "blackbox", "binary": False, "image": "me/img"}
    assert box["annotations"] == [] and box["parameters"] == [] and box["publish"] is False
    assert box["limits"] == {
        "timeout": DEFAULT_TIMEOUT_MS,
        "memory": DEFAULT_MEMORY_MB,
        "logs": DEFAULT_LOGS_MB,
        "concurrency": 1,
    }
    seq = action_document("guest", "s", kind="sequence", components=["/guest/a", "/guest/b"])
    assert seq["exec"] == {"kind": "sequence", "components": ["/guest/a", "/guest/b"]}
    assert seq["parameters"] == [{"key": "_actions", "value": ["/guest/a", "/guest/b"]}]
    assert (seq["_id"], seq["version"], seq["updated"]) == ("guest/s", "0.0.1", 0)
