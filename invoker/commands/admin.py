"""``ow-invoker admin``: set up and inspect OpenWhisk's CouchDB databases as the stock
ansible ``initdb`` playbook and ``wskadmin`` do, with ``ow-invoker run``'s CouchDB flags and
environment (``--couchdb-url``, ``--db-prefix``, ``CONFIG_whisk_couchdb_username`` ...).

With ``--embedded [STATE_DIR]`` the users and limits verbs work on the embedded platform's
store instead (``ow-invoker standalone``'s ``openwhisk.sqlite3``), running or stopped: its
front accepts a new key within a second, no ``--auth`` flag needed.

Keys print as ``wskadmin`` prints them (``uuid:key``). Failures print one line on stderr:
exit status 1 for an unknown subject or namespace, 2 for bad input, an unreachable server
or refused credentials.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import fields

from invoker import config as configuration

HELP = "set up OpenWhisk's CouchDB (initdb) and manage users and limits, like wskadmin"

# The configuration fields the admin tools use; everything else of `run` is left out.
COUCH_FIELDS = (
    "couchdb_url",
    "couchdb_user",
    "couchdb_password",
    "db_prefix",
    "db_whisks",
    "db_activations",
)
EMBEDDED_DEFAULT = ".state/standalone"  # ow-invoker standalone's default --state-dir
# The subjects database's name: wskadmin's, the stock controller's, then ours.
SUBJECTS_ENV = (
    "DB_WHISK_AUTHS",
    "CONFIG_whisk_couchdb_databases_WhiskAuth",
    "OW_INVOKER_DB_SUBJECTS",
)


def _auth_key(text: str):
    from invoker.whiskdb import AdminError
    from invoker.whiskdb.subjects import AuthKey

    try:
        return AuthKey.parse(text)
    except AdminError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "yes", "false", "no"):
        raise argparse.ArgumentTypeError(f"{text!r} is not true/false/yes/no")
    return value in ("true", "yes")


def _connection_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    skip = tuple(f.name for f in fields(configuration.InvokerConfig) if f.name not in COUCH_FIELDS)
    configuration.add_arguments(common, skip=skip)
    common.add_argument(
        "--db-subjects",
        help=f"subjects database name (default: <prefix>subjects) [env: {', '.join(SUBJECTS_ENV)}]",
    )
    common.add_argument(
        "--embedded",
        nargs="?",
        const=EMBEDDED_DEFAULT,
        metavar="STATE_DIR",
        help="work on the embedded platform's store (ow-invoker standalone's --state-dir, "
        f"default {EMBEDDED_DEFAULT}, or its openwhisk.sqlite3) instead of CouchDB; users "
        "and limits only",
    )
    return common


def _verb(
    verbs: argparse._SubParsersAction,
    name: str,
    run: Callable[..., int],
    help: str,
    common: argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    p = verbs.add_parser(name, parents=[common], help=help, description=help)
    p.set_defaults(_admin=run)
    return p


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from invoker.whiskdb.initdb import STOCK_SUBJECTS
    from invoker.whiskdb.subjects import LIMITS
    from whisk.argtypes import nonnegative_int, positive_int

    common = _connection_options()
    verbs = parser.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)

    p = _verb(
        verbs,
        "initdb",
        cmd_initdb,
        "create the subjects, whisks and activations databases with OpenWhisk's design "
        "documents, the guest and whisk.system subjects and every namespace's limits document",
        common,
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 unless everything is present and up to date",
    )
    for subject, flag in (("guest", "--guest-auth"), ("whisk.system", "--system-auth")):
        p.add_argument(
            flag,
            type=_auth_key,
            default=STOCK_SUBJECTS[subject],
            metavar="UUID:KEY",
            help=f"the {subject} key when the subject is created (default: the stock key)",
        )

    user = verbs.add_parser("user", help="manage subjects (users) and their namespaces' keys")
    users = user.add_subparsers(dest="user_command", metavar="COMMAND", required=True)
    p = _verb(users, "create", cmd_user_create, "create a user and print its key", common)
    p.add_argument("subject")
    p.add_argument("-ns", "--namespace", help="the namespace (default: the subject)")
    p.add_argument("-u", "--auth", type=_auth_key, metavar="UUID:KEY", help="use this key")
    p.add_argument("-r", "--revoke", action="store_true", help="replace the namespace's key")
    p.add_argument("-g", "--genonly", action="store_true", help="print a new key, store nothing")
    p.add_argument("-s", "--silent", action="store_true", help="do not print the key")
    p = _verb(users, "get", cmd_user_get, "print a user's key", common)
    p.add_argument("subject")
    p.add_argument("-ns", "--namespace", help="the namespace (default: the subject)")
    p.add_argument("-a", "--all", action="store_true", help="every namespace with its key")
    p = _verb(users, "delete", cmd_user_delete, "delete a user, or one namespace", common)
    p.add_argument("subject")
    p.add_argument("-ns", "--namespace", help="delete only this namespace's key")
    for name, blocked in (("block", True), ("unblock", False)):
        p = _verb(
            users, name, cmd_user_block if blocked else cmd_user_unblock, f"{name} users", common
        )
        p.add_argument("subjects", nargs="+")
    p = _verb(users, "whois", cmd_user_whois, "who a UUID:KEY authenticates as", common)
    p.add_argument("authkey", metavar="UUID:KEY")
    p = _verb(users, "list", cmd_user_list, "the keys with access to a namespace", common)
    p.add_argument("namespace")
    p.add_argument("-p", "--pick", type=positive_int, default=1, metavar="N", help="show N")
    p.add_argument("-a", "--all", action="store_true", help="show all")
    p.add_argument("-k", "--key", action="store_true", help="only the keys")

    limits = verbs.add_parser("limits", help="manage namespace-specific limits")
    limit_verbs = limits.add_subparsers(dest="limits_command", metavar="COMMAND", required=True)
    p = _verb(limit_verbs, "set", cmd_limits_set, "set limits of a namespace", common)
    p.add_argument("namespace")
    types: dict[type, tuple[Callable[[str], object], str]] = {
        int: (nonnegative_int, "N"),
        bool: (_bool, "BOOL"),
        str: (str, "SIZE"),
    }
    for name, kind in LIMITS.items():
        if kind is list:
            p.add_argument(f"--{name}", nargs="+", metavar="KIND")
        else:
            p.add_argument(f"--{name}", type=types[kind][0], metavar=types[kind][1])
    p = _verb(limit_verbs, "get", cmd_limits_get, "print a namespace's limits", common)
    p.add_argument("namespace")
    p = _verb(limit_verbs, "delete", cmd_limits_delete, "back to the system limits", common)
    p.add_argument("namespace")


def subjects_db(
    cfg: configuration.InvokerConfig,
    given: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The subjects database's name: ``given``, else the last of :data:`SUBJECTS_ENV` set,
    else ``<prefix>subjects`` (the standalone reads its users from the same name)."""
    if given:
        return given
    env = os.environ if environ is None else environ
    named = [env[name] for name in SUBJECTS_ENV if env.get(name)]
    return named[-1] if named else f"{cfg.db_prefix}subjects"


def main(args: argparse.Namespace) -> int:
    from invoker.whiskdb import AdminError, Databases, connect, couch_errors

    cfg = configuration.load(args)
    dbs = Databases(subjects_db(cfg, args.db_subjects), cfg.whisks_db, cfg.activations_db)
    try:
        errors: AbstractContextManager[None]
        if args.embedded is not None:
            server = _embedded(args)
            errors = nullcontext()
        else:
            server = connect(cfg.couchdb_url, cfg.couchdb_user, cfg.couchdb_password)
            errors = couch_errors(cfg.couchdb_url, cfg.couchdb_user)
        with errors:
            return args._admin(server, dbs, args)
    except AdminError as e:
        print(f"ow-invoker admin: {e}", file=sys.stderr)
        return e.status
    except sqlite3.Error as e:
        print(f"ow-invoker admin: the embedded store at {args.embedded}: {e}", file=sys.stderr)
        return 2


def _embedded(args: argparse.Namespace):
    from invoker.whiskdb import AdminError
    from invoker.whiskdb.embedded import EmbeddedServer, store_path

    if args._admin is cmd_initdb:
        raise AdminError("the embedded store needs no initdb: the platform creates it", 2)
    return EmbeddedServer(store_path(args.embedded))


def cmd_initdb(server, dbs, args: argparse.Namespace) -> int:
    from invoker.whiskdb.initdb import MISSING, OUTDATED, initdb

    subjects = {"guest": args.guest_auth, "whisk.system": args.system_auth}
    steps = initdb(server, dbs, subjects, check=args.check)
    for step in steps:
        print(step)
    return int(args.check and any(s.outcome in (MISSING, OUTDATED) for s in steps))


def _subjects(server, dbs):
    from invoker.whiskdb import open_db

    return open_db(server, dbs.subjects)


def cmd_user_create(server, dbs, args: argparse.Namespace) -> int:
    from invoker.whiskdb.subjects import AuthKey, create_user

    if args.genonly:
        print(args.auth or AuthKey.generate())
        return 0
    key = create_user(_subjects(server, dbs), args.subject, args.namespace, args.auth, args.revoke)
    if not args.silent:
        print(key)
    return 0


def cmd_user_get(server, dbs, args: argparse.Namespace) -> int:
    from invoker.whiskdb.subjects import user_key, user_keys

    db = _subjects(server, dbs)
    if args.all:
        for name, key in user_keys(db, args.subject):
            print(f"{name}\t{key}")
    else:
        print(user_key(db, args.subject, args.namespace))
    return 0


def cmd_user_delete(server, dbs, args: argparse.Namespace) -> int:
    from invoker.whiskdb.subjects import delete_user

    print(delete_user(_subjects(server, dbs), args.subject, args.namespace))
    return 0


def _block(server, dbs, subjects: list[str], blocked: bool) -> int:
    from invoker.whiskdb import AdminError
    from invoker.whiskdb.subjects import set_blocked

    db = _subjects(server, dbs)
    failed = 0
    for subject in filter(None, (s.strip() for s in subjects)):
        try:
            set_blocked(db, subject, blocked)
        except AdminError as e:
            print(f"ow-invoker admin: {e}", file=sys.stderr)
            failed += 1
        else:
            print(f'"{subject}" {"blocked" if blocked else "unblocked"} successfully')
    return int(failed > 0)


def cmd_user_block(server, dbs, args: argparse.Namespace) -> int:
    return _block(server, dbs, args.subjects, True)


def cmd_user_unblock(server, dbs, args: argparse.Namespace) -> int:
    return _block(server, dbs, args.subjects, False)


def cmd_user_whois(server, dbs, args: argparse.Namespace) -> int:
    from invoker.whiskdb import AdminError
    from invoker.whiskdb.subjects import whois

    found = whois(_subjects(server, dbs), args.authkey)
    if not found:
        raise AdminError("the key is not recognized (unknown or blocked subject)")
    for subject, namespace in found:
        print(f"subject: {subject}\nnamespace: {namespace}")
    return 0


def cmd_user_list(server, dbs, args: argparse.Namespace) -> int:
    from invoker.whiskdb import AdminError
    from invoker.whiskdb.subjects import identities

    found = identities(_subjects(server, dbs), args.namespace)
    if not found:
        raise AdminError(f"no identities found for namespace {args.namespace!r}")
    for subject, key in found if args.all else found[: args.pick]:
        print(key if args.key else f"{key}\t{subject}")
    return 0


def cmd_limits_set(server, dbs, args: argparse.Namespace) -> int:
    from invoker.whiskdb.subjects import LIMITS, set_limits

    set_limits(_subjects(server, dbs), args.namespace, {n: getattr(args, n) for n in LIMITS})
    print(f'Limits successfully set for "{args.namespace}"')
    return 0


def cmd_limits_get(server, dbs, args: argparse.Namespace) -> int:
    from invoker.whiskdb.subjects import get_limits

    limits = get_limits(_subjects(server, dbs), args.namespace)
    for name, value in limits.items():
        print(f"{name} = {value}")
    if not limits:
        print("No limits found, default system limits apply")
    return 0


def cmd_limits_delete(server, dbs, args: argparse.Namespace) -> int:
    from invoker.whiskdb.subjects import delete_limits

    delete_limits(_subjects(server, dbs), args.namespace)
    print("Limits deleted")
    return 0
