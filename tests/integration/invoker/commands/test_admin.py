"""``ow-invoker admin`` against the real CouchDB-API server: the databases, OpenWhisk's design
documents and the views the stock controller queries, subjects, users and limits, idempotent
re-runs and one-line errors. The CLI runs as a subprocess, as an operator runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import couchdb
import pytest
from services import unique_name

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[4]
DESIGNS = ROOT / "invoker" / "whiskdb"
GUEST = (
    "23bc46b1-71f6-4ed5-8c54-816aa4f8c502",
    "123zO3xZCLrMN6v2BKK1dXYFpXlPkccOFqm12CdAsMgRU4VrNZ9lyGVCGuMDGIwP",
)
SYSTEM = (
    "789c46b1-71f6-4ed5-8c54-816aa4f8c502",
    "abczO3xZCLrMN6v2BKK1dXYFpXlPkccOFqm12CdAsMgRU4VrNZ9lyGVCGuMDGIwP",
)
# What ansible installs in each database (tasks/initdb.yml, tasks/recreateViews.yml).
SHIPPED = {
    "subjects": [
        "auth_design_document_for_subjects_db_v2.0.0.json",
        "filter_design_document.json",
        "namespace_throttlings_design_document_for_subjects_db.json",
    ],
    "whisks": ["whisks_design_document_for_entities_db_v2.1.0.json", "filter_design_document.json"],
    "activations": [
        "whisks_design_document_for_activations_db_v2.1.0.json",
        "whisks_design_document_for_activations_db_filters_v2.1.1.json",
        "filter_design_document.json",
        "activations_design_document_for_activations_db.json",
        "logCleanup_design_document_for_activations_db.json",
    ],
}
KEY_LINE = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}:\w{64}$"
)


def run_admin(
    couch, *args: str, prefix: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m ow_invoker admin ARGS`` with the test server's URL and user as flags and its
    password in the environment, never on a command line (``prefix`` given), or from ``env``
    alone."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OW_INVOKER_", "CONFIG_whisk_", "DB_"))
    }
    clean["PYTHONPATH"] = str(ROOT)
    flags: list[str] = []
    if prefix is not None:
        flags = [
            "--couchdb-url",
            couch.url,
            "--couchdb-user",
            couch.user,
            "--db-prefix",
            prefix,
        ]
        clean["CONFIG_whisk_couchdb_password"] = couch.password
    return subprocess.run(
        [sys.executable, "-m", "ow_invoker", "admin", *args, *flags],
        env={**clean, **(env or {})},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def one_line_error(proc: subprocess.CompletedProcess[str], status: int, *words: str) -> str:
    assert proc.returncode == status, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0]
    return lines[0]


def couchdb_server(couch) -> couchdb.Server:
    s = couchdb.Server(couch.url)
    s.resource.credentials = (couch.user, couch.password)
    return s


@pytest.fixture
def server(couchdb) -> couchdb.Server:
    return couchdb_server(couchdb)


@pytest.fixture
def prefix(server) -> str:
    """A fresh database prefix; its databases go at the end."""
    p = unique_name("adm").replace("-", "") + "_"
    yield p
    for role in SHIPPED:
        if f"{p}{role}" in server:
            del server[f"{p}{role}"]


def without_rev(doc: Any) -> dict[str, Any]:
    return {k: v for k, v in dict(doc).items() if k != "_rev"}


def view(db: couchdb.Database, name: str, **options: Any) -> list[dict[str, Any]]:
    return [dict(row) for row in db.view(name, **options)]


def test_initdb_creates_databases_design_documents_subjects_and_limits(couchdb, server, prefix):
    lines = ok(run_admin(couchdb, "initdb", prefix=prefix))

    for role, files in SHIPPED.items():
        name = f"{prefix}{role}"
        assert f"created   {name}" in lines
        db = server[name]
        for file in files:
            shipped = json.loads((DESIGNS / file).read_text())
            assert without_rev(db[shipped["_id"]]) == shipped, (name, file)
            assert f"created   {name}/{shipped['_id']}" in lines
    subjects = server[f"{prefix}subjects"]
    for subject, (uid, key) in (("guest", GUEST), ("whisk.system", SYSTEM)):
        assert without_rev(subjects[subject]) == {
            "_id": subject,
            "subject": subject,
            "namespaces": [{"name": subject, "uuid": uid, "key": key}],
        }
        assert without_rev(subjects[f"{subject}/limits"]) == {"_id": f"{subject}/limits"}
    assert ok(run_admin(couchdb, "initdb", "--check", prefix=prefix))
    # The keys as wskadmin prints them, and the stock keys from ansible/files/auth.*.
    assert ok(run_admin(couchdb, "user", "get", "guest", prefix=prefix)) == [":".join(GUEST)]
    assert ok(run_admin(couchdb, "user", "get", "whisk.system", prefix=prefix)) == [
        ":".join(SYSTEM)
    ]


def test_views_answer_as_the_controller_queries_them(couchdb, server, prefix):
    ok(run_admin(couchdb, "initdb", prefix=prefix))
    subjects = server[f"{prefix}subjects"]

    # The controller authenticates by [uuid, key] and resolves namespaces by [namespace],
    # with include_docs for the limits: every row must carry its limits document.
    for key in ([GUEST[0], GUEST[1]], ["guest"]):
        rows = view(subjects, "subjects.v2.0.0/identities", key=key, include_docs=True)
        assert len(rows) == 1
        assert rows[0]["id"] == "guest"
        assert rows[0]["value"] == {
            "_id": "guest/limits",
            "namespace": "guest",
            "uuid": GUEST[0],
            "key": GUEST[1],
        }
        assert rows[0]["doc"]["_id"] == "guest/limits"
    assert view(subjects, "subjects.v2.0.0/identities", key=[GUEST[0], "wrong"]) == []
    assert view(subjects, "namespaceThrottlings/blockedNamespaces", group=True) == []

    whisks = server[f"{prefix}whisks"]
    whisks.save(
        {
            "_id": "guest/hello",
            "namespace": "guest",
            "name": "hello",
            "version": "0.0.1",
            "publish": False,
            "annotations": [],
            "limits": {},
            "exec": {"kind": "python:3.11", "code": "def main(a): return a"},
            "updated": 1,
        }
    )
    rows = view(
        whisks, "whisks.v2.1.0/actions", reduce=False, startkey=["guest"], endkey=["guest", {}]
    )
    assert [r["value"]["name"] for r in rows] == ["hello"]

    activations = server[f"{prefix}activations"]
    activations.save(
        {
            "_id": "guest/0123456789abcdef0123456789abcdef",
            "activationId": "0123456789abcdef0123456789abcdef",
            "namespace": "guest",
            "name": "hello",
            "version": "0.0.1",
            "publish": False,
            "annotations": [{"key": "path", "value": "guest/hello"}],
            "start": 10,
            "end": 20,
            "response": {"statusCode": 0},
            "logs": ["a log line"],
        }
    )
    rows = view(activations, "whisks.v2.1.0/activations", reduce=False)
    assert [r["value"]["duration"] for r in rows] == [10]
    assert len(view(activations, "activations/byDate")) == 1
    # These two assign an undeclared loop variable (`for (i = 0; ...)`), which pouchdb-server's
    # strict-mode map functions reject inside their try: queryable, but they emit no rows
    # there (CouchDB emits one); shipped unchanged all the same.
    for name in ("whisks-filters.v2.1.1/activations", "logCleanup/byDateWithLogs"):
        assert len(view(activations, name, reduce=False)) <= 1


def test_initdb_is_idempotent_and_brings_design_documents_up_to_date(couchdb, server, prefix):
    ok(run_admin(couchdb, "initdb", prefix=prefix))
    subjects = server[f"{prefix}subjects"]
    # An older design document, an operator's own guest key, and a user created without a
    # limits document (as wskadmin creates them).
    design = subjects["_design/subjects.v2.0.0"]
    design["views"]["identities"]["map"] = "function (doc) {}"
    subjects.save(design)
    guest = subjects["guest"]
    guest["namespaces"][0]["key"] = "k" * 64
    subjects.save(guest)
    subjects.save(
        {
            "_id": "carol",
            "subject": "carol",
            "namespaces": [{"name": "carol", "uuid": GUEST[0][:-1] + "9", "key": "c" * 64}],
        }
    )

    check = run_admin(couchdb, "initdb", "--check", prefix=prefix)
    assert check.returncode == 1
    assert f"outdated  {prefix}subjects/_design/subjects.v2.0.0" in check.stdout
    assert f"missing   {prefix}subjects/carol/limits" in check.stdout
    assert "carol/limits" not in subjects  # --check writes nothing

    lines = ok(run_admin(couchdb, "initdb", prefix=prefix))
    assert f"updated   {prefix}subjects/_design/subjects.v2.0.0" in lines
    assert f"created   {prefix}subjects/carol/limits" in lines
    shipped = json.loads((DESIGNS / SHIPPED["subjects"][0]).read_text())
    assert without_rev(subjects[shipped["_id"]]) == shipped
    assert subjects["guest"]["namespaces"][0]["key"] == "k" * 64  # left alone
    changed = [line for line in lines if not line.startswith("unchanged")]
    assert len(changed) == 2, lines

    lines = ok(run_admin(couchdb, "initdb", prefix=prefix))
    assert all(line.startswith("unchanged") for line in lines), lines
    assert ok(run_admin(couchdb, "initdb", "--check", prefix=prefix))


def test_users_round_trip(couchdb, server, prefix):
    ok(run_admin(couchdb, "initdb", prefix=prefix))
    subjects = server[f"{prefix}subjects"]

    [key] = ok(run_admin(couchdb, "user", "create", "alice", prefix=prefix))
    assert KEY_LINE.match(key)
    assert ok(run_admin(couchdb, "user", "get", "alice", prefix=prefix)) == [key]
    uid, secret = key.split(":")
    assert without_rev(subjects["alice"]) == {
        "_id": "alice",
        "subject": "alice",
        "namespaces": [{"name": "alice", "uuid": uid, "key": secret}],
    }
    assert "alice/limits" in subjects  # so a stock controller on pouchdb can serve alice
    assert ok(run_admin(couchdb, "user", "whois", key, prefix=prefix)) == [
        "subject: alice",
        "namespace: alice",
    ]
    assert ok(run_admin(couchdb, "user", "list", "alice", prefix=prefix)) == [f"{key}\talice"]
    one_line_error(
        run_admin(couchdb, "user", "create", "alice", prefix=prefix), 1, "already exists"
    )

    given = "11111111-2222-4333-8444-555555555555:" + "x" * 64
    assert ok(
        run_admin(couchdb, "user", "create", "alice", "-ns", "team", "-u", given, prefix=prefix)
    ) == [given]
    assert ok(run_admin(couchdb, "user", "get", "alice", "--all", prefix=prefix)) == [
        f"alice\t{key}",
        f"team\t{given}",
    ]
    assert ok(run_admin(couchdb, "user", "get", "alice", "-ns", "team", prefix=prefix)) == [given]
    [revoked] = ok(run_admin(couchdb, "user", "create", "alice", "-r", prefix=prefix))
    assert revoked != key
    assert ok(run_admin(couchdb, "user", "get", "alice", prefix=prefix)) == [revoked]
    one_line_error(run_admin(couchdb, "user", "whois", key, prefix=prefix), 1, "not recognized")

    [generated] = ok(run_admin(couchdb, "user", "create", "dave1", "-g", prefix=prefix))
    assert KEY_LINE.match(generated)
    assert "dave1" not in subjects
    assert ok(run_admin(couchdb, "user", "create", "erin1", "-s", prefix=prefix)) == []
    assert "erin1" in subjects

    assert ok(run_admin(couchdb, "user", "delete", "alice", "-ns", "team", prefix=prefix)) == [
        "Namespace deleted"
    ]
    assert ok(run_admin(couchdb, "user", "delete", "alice", prefix=prefix)) == ["Subject deleted"]
    for args in (("get", "alice"), ("delete", "alice"), ("block", "alice")):
        one_line_error(run_admin(couchdb, "user", *args, prefix=prefix), 1, "'alice'")
    one_line_error(run_admin(couchdb, "user", "create", "bob", prefix=prefix), 2, "5 characters")


def test_block_and_unblock(couchdb, server, prefix):
    ok(run_admin(couchdb, "initdb", prefix=prefix))
    subjects = server[f"{prefix}subjects"]
    [key] = ok(run_admin(couchdb, "user", "create", "mallory", prefix=prefix))

    assert ok(run_admin(couchdb, "user", "block", "mallory", prefix=prefix)) == [
        '"mallory" blocked successfully'
    ]
    assert subjects["mallory"]["blocked"] is True
    uid, secret = key.split(":")
    assert view(subjects, "subjects.v2.0.0/identities", key=[uid, secret]) == []
    assert view(subjects, "namespaceThrottlings/blockedNamespaces", group=True) == [
        {"key": "mallory", "value": 1}
    ]
    one_line_error(run_admin(couchdb, "user", "whois", key, prefix=prefix), 1)
    one_line_error(
        run_admin(couchdb, "user", "create", "mallory", "-ns", "x", prefix=prefix), 1, "blocked"
    )

    assert ok(run_admin(couchdb, "user", "unblock", "mallory", prefix=prefix)) == [
        '"mallory" unblocked successfully'
    ]
    assert len(view(subjects, "subjects.v2.0.0/identities", key=[uid, secret])) == 1
    assert view(subjects, "namespaceThrottlings/blockedNamespaces", group=True) == []


def test_limits_round_trip(couchdb, server, prefix):
    ok(run_admin(couchdb, "initdb", prefix=prefix))
    subjects = server[f"{prefix}subjects"]
    none = ["No limits found, default system limits apply"]
    assert ok(run_admin(couchdb, "limits", "get", "guest", prefix=prefix)) == none

    set_ = run_admin(
        couchdb,
        *("limits", "set", "guest", "--invocationsPerMinute", "120"),
        *("--concurrentInvocations", "30", "--allowedKinds", "python:3.11", "nodejs:20"),
        *("--storeActivations", "false", "--maxPayloadSize", "2 MB"),
        prefix=prefix,
    )
    assert ok(set_) == ['Limits successfully set for "guest"']
    ok(run_admin(couchdb, "limits", "set", "guest", "--firesPerMinute", "60", prefix=prefix))
    assert without_rev(subjects["guest/limits"]) == {
        "_id": "guest/limits",
        "invocationsPerMinute": 120,
        "concurrentInvocations": 30,
        "allowedKinds": ["python:3.11", "nodejs:20"],
        "storeActivations": False,
        "maxPayloadSize": "2 MB",
        "firesPerMinute": 60,
    }
    assert ok(run_admin(couchdb, "limits", "get", "guest", prefix=prefix)) == [
        "invocationsPerMinute = 120",
        "firesPerMinute = 60",
        "concurrentInvocations = 30",
        "allowedKinds = ['python:3.11', 'nodejs:20']",
        "storeActivations = False",
        "maxPayloadSize = 2 MB",
    ]
    # The controller reads them through the identities view's include_docs.
    [row] = view(subjects, "subjects.v2.0.0/identities", key=["guest"], include_docs=True)
    assert row["doc"]["invocationsPerMinute"] == 120

    ok(run_admin(couchdb, "limits", "set", "guest", "--invocationsPerMinute", "0", prefix=prefix))
    assert view(subjects, "namespaceThrottlings/blockedNamespaces", group=True) == [
        {"key": "guest", "value": 1}
    ]

    assert ok(run_admin(couchdb, "limits", "delete", "guest", prefix=prefix)) == ["Limits deleted"]
    assert ok(run_admin(couchdb, "limits", "get", "guest", prefix=prefix)) == none
    # Back to the defaults, and the document stays for pouchdb's view rows.
    [row] = view(subjects, "subjects.v2.0.0/identities", key=["guest"], include_docs=True)
    assert row["doc"]["_id"] == "guest/limits"
    one_line_error(run_admin(couchdb, "limits", "delete", "nobody", prefix=prefix), 1, "nobody")
    bad = run_admin(
        couchdb, "limits", "set", "guest", "--concurrentInvocations", "-1", prefix=prefix
    )
    assert bad.returncode == 2
    assert "--concurrentInvocations" in bad.stderr


def test_configuration_from_the_stock_environment(couchdb, server, prefix):
    """The same environment as ``ow-invoker run``: URL, the stock credential names, prefix."""
    env = {
        "OW_INVOKER_COUCHDB_URL": couchdb.url,
        "CONFIG_whisk_couchdb_username": couchdb.user,
        "CONFIG_whisk_couchdb_password": couchdb.password,
        "DB_PREFIX": prefix,
    }
    ok(run_admin(couchdb, "initdb", env=env))
    assert all(f"{prefix}{role}" in server for role in SHIPPED)
    assert ok(run_admin(couchdb, "user", "get", "guest", env=env)) == [":".join(GUEST)]
    # wskadmin's name for the subjects database
    one_line_error(
        run_admin(couchdb, "user", "get", "guest", env={**env, "DB_WHISK_AUTHS": "nosuchdb"}),
        1,
        "'nosuchdb' does not exist",
        "initdb",
    )


def test_clear_errors(couchdb, prefix):
    bad = run_admin(
        couchdb,
        "initdb",
        env={
            "OW_INVOKER_COUCHDB_URL": couchdb.url,
            "CONFIG_whisk_couchdb_username": couchdb.user,
            "CONFIG_whisk_couchdb_password": "wrong",
            "DB_PREFIX": prefix,
        },
    )
    one_line_error(bad, 2, "refused the credentials", repr(couchdb.user))
    assert f"{prefix}subjects" not in couchdb_server(couchdb)

    unreachable = run_admin(
        couchdb, "user", "get", "guest", env={"OW_INVOKER_COUCHDB_URL": "http://127.0.0.1:9"}
    )
    one_line_error(unreachable, 2, "cannot reach CouchDB at http://127.0.0.1:9")

    one_line_error(
        run_admin(couchdb, "user", "get", "guest", prefix=prefix), 1, "does not exist", "initdb"
    )
    ok(run_admin(couchdb, "initdb", prefix=prefix))
    one_line_error(
        run_admin(couchdb, "user", "get", "nobody", prefix=prefix), 1, "'nobody' does not exist"
    )
    one_line_error(
        run_admin(couchdb, "user", "get", "guest", "-ns", "other", prefix=prefix), 1, "'other'"
    )
    # A subjects database without OpenWhisk's design documents (not set up by initdb).
    subjects = couchdb_server(couchdb)[f"{prefix}subjects"]
    subjects.delete(subjects["_design/subjects.v2.0.0"])
    one_line_error(run_admin(couchdb, "user", "whois", ":".join(GUEST), prefix=prefix), 1, "initdb")


async def test_a_front_on_couchdb_takes_the_users_the_cli_writes(couchdb, prefix):
    """As the stock controller, the front authenticates the subjects database's keys: a user
    created, blocked or deleted here is honoured within seconds, no --auth needed."""
    import asyncio

    import aiohttp

    from front.identities import basic_auth
    from front.server import start_front
    from whisk.bus.memory import MemoryBus
    from whisk.clock import SystemClock
    from whisk.store.couch import CouchStore

    ok(run_admin(couchdb, "initdb", prefix=prefix))
    store = CouchStore(couchdb.url, couchdb.user, couchdb.password)
    front = await start_front(
        bus=MemoryBus(),
        store=store,
        clock=SystemClock(),
        host="127.0.0.1",
        port=0,
        whisks_db=f"{prefix}whisks",
        activations_db=f"{prefix}activations",
        subjects_db=f"{prefix}subjects",
    )

    async def status(http: aiohttp.ClientSession, key: str) -> int:
        headers = {"Authorization": basic_auth(key)}
        async with http.get(front.url + "/api/v1/namespaces", headers=headers) as r:
            return r.status

    async def becomes(http: aiohttp.ClientSession, key: str, expected: int) -> bool:
        for _ in range(100):
            if await status(http, key) == expected:
                return True
            await asyncio.sleep(0.1)
        return False

    try:
        async with aiohttp.ClientSession() as http:
            [key] = ok(run_admin(couchdb, "user", "create", "carol", prefix=prefix))
            assert await becomes(http, key, 200)
            ok(run_admin(couchdb, "user", "block", "carol", prefix=prefix))
            assert await becomes(http, key, 401)
            ok(run_admin(couchdb, "user", "unblock", "carol", prefix=prefix))
            assert await becomes(http, key, 200)
            ok(run_admin(couchdb, "user", "delete", "carol", prefix=prefix))
            assert await becomes(http, key, 401)
    finally:
        await front.stop()
        await store.close()


def test_embedded_store_errors_are_one_line(tmp_path):
    """``--embedded``: no store there, and initdb (the platform makes its store itself)."""
    missing = run_admin(None, "user", "create", "alice", "--embedded", str(tmp_path))
    one_line_error(missing, 2, "no embedded store", "--state-dir")
    (tmp_path / "openwhisk.sqlite3").touch()
    one_line_error(run_admin(None, "initdb", "--embedded", str(tmp_path)), 2, "no initdb")
    [key] = ok(run_admin(None, "user", "create", "alice", "--embedded", str(tmp_path)))
    assert KEY_LINE.match(key)
    assert ok(run_admin(None, "user", "whois", key, "--embedded", str(tmp_path))) == [
        "subject: alice",
        "namespace: alice",
    ]
    assert ok(run_admin(None, "user", "list", "alice", "-k", "--embedded", str(tmp_path))) == [key]
    one_line_error(
        run_admin(None, "user", "create", "alice", "--embedded", str(tmp_path)),
        1,
        "already exists",
    )
    ok(
        run_admin(
            None, "limits", "set", "alice", "--firesPerMinute", "9", "--embedded", str(tmp_path)
        )
    )
    assert ok(run_admin(None, "limits", "get", "alice", "--embedded", str(tmp_path))) == [
        "firesPerMinute = 9"
    ]
    ok(run_admin(None, "limits", "delete", "alice", "--embedded", str(tmp_path)))
    assert ok(run_admin(None, "limits", "get", "alice", "--embedded", str(tmp_path))) == [
        "No limits found, default system limits apply"
    ]
