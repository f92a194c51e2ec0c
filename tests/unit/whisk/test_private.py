"""Secrets kept private, the pure parts: a secret given as a flag still works but warns (the
command line is readable by every local process), an auth file's lines, subjects documents
as identities (blocked ones left out), files and directories made private also when they
exist, the kept admin password, and ``require-whisk-auth`` decisions as stock makes them."""

from __future__ import annotations

import argparse
import logging
import os
import stat
from pathlib import Path

import pytest

from front import config as front_config
from front.identities import Identities, read_auth_file, subject_identities
from front.webauth import allowed
from invoker import config as invoker_config
from invoker.admin_http import admin_credentials, authorized
from whisk.private import kept_secret, private_dir, write_private
from whisk.store.embedded import EmbeddedStore


def _front(*argv: str) -> front_config.FrontConfig:
    parser = argparse.ArgumentParser()
    front_config.add_arguments(parser)
    return front_config.load(parser.parse_args(list(argv)), {})


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_secret_flag_warns_and_still_works(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.WARNING, logger="settings"):
        cfg = _front("--auth", "guest=a:b", "--couchdb-password", "pw", "--port", "1")
    assert cfg.auth == ("guest=a:b",) and cfg.couchdb_password == "pw"
    text = caplog.text
    assert "--auth puts a secret on the command line" in text and "OW_FRONT_AUTH" in text
    assert "--couchdb-password" in text and "--port" not in text


def test_secrets_from_the_environment_do_not_warn(caplog: pytest.LogCaptureFixture):
    parser = argparse.ArgumentParser()
    invoker_config.add_arguments(parser)
    with caplog.at_level(logging.WARNING, logger="settings"):
        cfg = invoker_config.load(
            parser.parse_args([]), {"CONFIG_whisk_invoker_password": "from-env"}
        )
    assert cfg.admin_password == "from-env" and caplog.text == ""


def test_an_auth_file(tmp_path: Path):
    path = tmp_path / "auth"
    path.write_text("# users\n\nguest=u1:k1\n  bob=u2:k2  \n")
    assert read_auth_file(path) == ["guest=u1:k1", "bob=u2:k2"]
    identities = Identities.parse(read_auth_file(path))
    assert {i.namespace for i in identities.by_key.values()} == {"guest", "bob"}
    with pytest.raises(ValueError, match="cannot read the auth file"):
        read_auth_file(tmp_path / "missing")


def test_subject_documents_as_identities():
    docs = [
        {
            "_id": "alice",
            "subject": "alice",
            "namespaces": [{"name": "a", "uuid": "u", "key": "k"}],
        },
        {"_id": "mallory", "blocked": True, "namespaces": [{"name": "m", "uuid": "x", "key": "y"}]},
        {"_id": "broken", "namespaces": [{"name": "b"}, "junk"]},
    ]
    found = subject_identities(docs, {"a": {"concurrentInvocations": 3}})
    assert list(found) == ["u:k"]
    who = found["u:k"]
    assert (who.subject, who.namespace, who.namespace_uuid) == ("alice", "a", "u")
    assert who.limits == {"concurrentInvocations": 3} and "ACTIVATE" in who.rights


def test_private_paths_also_when_they_exist(tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)
    assert _mode(private_dir(state)) == 0o700
    assert _mode(private_dir(state, 0o711)) == 0o711
    db = state / "openwhisk.sqlite3"
    db.touch()
    os.chmod(db, 0o644)
    EmbeddedStore(db)  # tightens what an older run left
    assert _mode(db) == 0o600
    fresh = tmp_path / "new" / "db.sqlite3"
    EmbeddedStore(fresh)
    assert _mode(fresh) == 0o600 and _mode(fresh.parent) == 0o700
    assert _mode(write_private(tmp_path / "f", "x")) == 0o600


def test_the_admin_password_is_random_kept_and_private(tmp_path: Path):
    first = kept_secret(tmp_path / "s" / "admin.password")
    assert len(first) >= 24 and kept_secret(tmp_path / "s" / "admin.password") == first
    assert kept_secret(tmp_path / "other") != first
    assert _mode(tmp_path / "s" / "admin.password") == 0o600
    cfg = invoker_config.InvokerConfig(state_dir=str(tmp_path / "node"))
    user, password = admin_credentials(cfg)
    assert user == "invoker.user" and password not in ("invoker.pass", "")
    assert (tmp_path / "node" / "admin.password").read_text().strip() == password
    given = invoker_config.InvokerConfig(state_dir=str(tmp_path / "n2"), admin_password="pw")
    assert admin_credentials(given) == ("invoker.user", "pw")
    assert not (tmp_path / "n2" / "admin.password").exists()
    header = "Basic aW52b2tlci51c2VyOnB3"  # invoker.user:pw
    assert authorized(header, "invoker.user", "pw") and not authorized(header, "invoker.user", "p")
    assert not authorized(None, "invoker.user", "pw") and not authorized("Bearer x", "u", "p")


def _marks(value: object) -> list[dict[str, object]]:
    return [{"key": "web-export", "value": True}, {"key": "require-whisk-auth", "value": value}]


def test_require_whisk_auth_as_stock_reads_it():
    assert allowed([{"key": "web-export", "value": True}], None, False)
    assert allowed(_marks(True), None, True) and not allowed(_marks(True), "true", False)
    assert allowed(_marks("s3"), "s3", False) and not allowed(_marks("s3"), "s4", True)
    assert not allowed(_marks("s3"), None, True)
    assert allowed(_marks(42), "42", False) and not allowed(_marks(42), "42.0", False)
    for refused in (False, None, {"a": 1}, [1]):  # stock: `case _ => false`
        assert not allowed(_marks(refused), "anything", True), refused
