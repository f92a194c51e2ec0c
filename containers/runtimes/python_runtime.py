"""An OpenWhisk-compatible Python action runtime, run by the process backend.

Standalone (stdlib only, never imports the invoker) so that action code cannot reach the
invoker's modules. Three modes:

``zygote``
    Started once per backend. Pre-imports the stdlib modules actions commonly use, freezes the
    GC (so forked children share those pages), then waits for newline-delimited JSON requests
    on stdin and answers on stdout. ``{"op": "spawn", ...}`` forks a *container*: a child in
    its own session, cgroup, working directory, private ``/tmp`` (a mount namespace, where
    allowed), minimal environment, with fd 1/2 on pipes. The zygote itself drains those pipes
    into the container's Docker-json-file style log, so output of C code and subprocesses is
    captured and nothing is lost when the action crashes or is OOM-killed. Requests with
    ``exec`` run another program (node, or a fresh interpreter) in the same prepared child.
    The zygote reaps children (it is their subreaper), reports their exits as
    ``{"event": "exit"}``, and when the invoker goes away (stdin EOF, or SIGTERM from
    PR_SET_PDEATHSIG) kills every container's process group and exits.

``serve``
    The container's HTTP server in a fresh interpreter (``--listen-fd`` or ``--port``); used
    for the no-zygote baseline and for manual testing.

With ``--sandbox`` every container enters its sandbox (``sandbox.py``: namespaces, a uid of
its own, seccomp) right after the fork, before it reads its assignment, and listens on a
Unix socket in the invoker's private directory instead of a loopback port.

The container (forked or ``serve``) speaks the action protocol on that socket or on
127.0.0.1: ``POST /init``, ``POST /run``, and writes the end-of-activation sentinel to stdout
and stderr after every /run and after a failed /init.
"""

from __future__ import annotations

import base64
import ctypes
import errno
import fcntl
import gc
import importlib.util
import io
import json
import linecache
import os
import re
import resource
import selectors
import signal
import socket
import stat
import sys
import tempfile
import time
import traceback
import types
import zipfile
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any

SENTINEL = b"XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n"
MAX_LOG_LINE = 16 * 1024  # Docker splits longer lines the same way
MAX_ARCHIVE_BYTES = 1024 * 1024 * 1024  # uncompressed size accepted from one action zip
MAX_HEADER_BYTES = 64 * 1024
INIT_TWICE = "Cannot initialize the action more than once."
NO_CODE = "Missing main/no code to execute."
NOT_A_DICT = "The action did not return a dictionary or array."
NOT_INITIALIZED = "no action defined yet"
COMMAND_EXITED = "command exited"

# Modules worth having in every forked container (imported once, shared copy-on-write).
PRELOAD = (
    "abc",
    "argparse",
    "array",
    "base64",
    "bisect",
    "binascii",
    "calendar",
    "collections",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "email.message",
    "enum",
    "fnmatch",
    "fractions",
    "functools",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http.client",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "logging",
    "math",
    "mimetypes",
    "operator",
    "pathlib",
    "pickle",
    "platform",
    "pprint",
    "queue",
    "random",
    "re",
    "shlex",
    "shutil",
    "site",
    "socket",
    "ssl",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "traceback",
    "typing",
    "unicodedata",
    "urllib.error",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "warnings",
    "xml.etree.ElementTree",
    "zipfile",
    "zlib",
)

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - not Linux/glibc
    _libc = None


def _prctl(option: int, arg: int | bytes) -> bool:
    if _libc is None:
        return False
    return _libc.prctl(option, arg, 0, 0, 0) == 0


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------------------------
# Zip archives: unpacked only inside the action's directory.


class UnsafeArchive(ValueError):
    """The action archive has an entry that would land outside the action directory."""


def archive_member_path(name: str, external_attr: int) -> str | None:
    """The safe relative path of a zip entry (None for a directory entry).

    Rejects absolute paths, drive letters, ``..`` components, NUL bytes and symbolic links
    (a link could point the next entry's write outside the directory)."""
    if stat.S_ISLNK(external_attr >> 16):
        raise UnsafeArchive(f"archive entry {name!r} is a symbolic link")
    if not name or "\x00" in name:
        raise UnsafeArchive(f"archive entry {name!r} has an invalid name")
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise UnsafeArchive(f"archive entry {name!r} has an absolute path")
    parts = [p for p in re.split(r"[\\/]", name) if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"archive entry {name!r} leaves the action directory")
    if not parts or name.endswith(("/", "\\")):
        return None
    return "/".join(parts)


def safe_extract(data: bytes, dest: str, max_bytes: int = MAX_ARCHIVE_BYTES) -> list[str]:
    """Unpack a zip archive into ``dest``; returns the relative paths of the files written."""
    root = os.path.realpath(dest)
    written: list[str] = []
    total = 0
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = [(i, archive_member_path(i.filename, i.external_attr)) for i in zf.infolist()]
        for info, _ in members:
            total += info.file_size
            if total > max_bytes:
                raise UnsafeArchive(f"archive expands beyond {max_bytes} bytes")
        for info, rel in members:
            if rel is None:
                if info.filename.strip("/\\") not in ("", "."):
                    os.makedirs(os.path.join(root, info.filename.strip("/\\")), exist_ok=True)
                continue
            target = os.path.join(root, rel)
            parent = os.path.dirname(target)
            os.makedirs(parent, exist_ok=True)
            real_parent = os.path.realpath(parent)
            if real_parent != root and not real_parent.startswith(root + os.sep):
                raise UnsafeArchive(f"archive entry {info.filename!r} leaves the action directory")
            mode = 0o755 if (info.external_attr >> 16) & 0o111 else 0o644
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
            with os.fdopen(fd, "wb") as out, zf.open(info) as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            written.append(rel)
    return written


# --------------------------------------------------------------------------------------------
# Logs: raw stream bytes -> Docker json-file lines.


def iso_time(epoch_ns: int) -> str:
    """``2024-05-29T16:26:40.590123456Z`` (UTC, nanoseconds), as Docker timestamps lines."""
    secs, ns = divmod(epoch_ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{ns:09d}Z"


class LogStream:
    """Splits one stream's bytes into lines and renders each as a json-file log line.

    Lines longer than 16 KiB are cut (on a UTF-8 boundary) like Docker does. A sentinel glued
    to an unterminated line (the action printed without a newline) is split off, so the
    invoker always sees it as a line of its own."""

    def __init__(self, stream: str) -> None:
        self._suffix = b'","stream":"' + stream.encode() + b'","time":"'
        self._pending = b""

    def feed(self, data: bytes, epoch_ns: int) -> bytes:
        data = self._pending + data if self._pending else data
        out: list[bytes] = []
        ts = iso_time(epoch_ns).encode()
        start = 0
        while (nl := data.find(b"\n", start)) >= 0:
            self._emit(out, data[start : nl + 1], ts)
            start = nl + 1
        rest = data[start:]
        while len(rest) >= MAX_LOG_LINE:
            cut = _utf8_cut(rest, MAX_LOG_LINE)
            self._emit(out, rest[:cut], ts)
            rest = rest[cut:]
        self._pending = rest
        return b"".join(out)

    def flush(self, epoch_ns: int) -> bytes:
        """Render what is left of an unterminated last line (at end of stream)."""
        if not self._pending:
            return b""
        out: list[bytes] = []
        self._emit(out, self._pending, iso_time(epoch_ns).encode())
        self._pending = b""
        return b"".join(out)

    def _emit(self, out: list[bytes], chunk: bytes, ts: bytes) -> None:
        if len(chunk) > len(SENTINEL) and chunk.endswith(SENTINEL):
            self._emit(out, chunk[: -len(SENTINEL)], ts)
            chunk = SENTINEL
        while len(chunk) > MAX_LOG_LINE:
            cut = _utf8_cut(chunk, MAX_LOG_LINE)
            self._render(out, chunk[:cut], ts)
            chunk = chunk[cut:]
        self._render(out, chunk, ts)

    def _render(self, out: list[bytes], chunk: bytes, ts: bytes) -> None:
        text = encode_basestring(chunk.decode("utf-8", "replace"))  # '"..."'
        out.append(b'{"log":' + text.encode()[:-1] + self._suffix + ts + b'"}\n')


def _utf8_cut(data: bytes, limit: int) -> int:
    """The largest cut <= limit that does not split a UTF-8 character."""
    if len(data) <= limit:
        return len(data)
    cut = limit
    while cut > limit - 3 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return cut


# --------------------------------------------------------------------------------------------
# The action itself (inside the container).


def write_sentinels() -> None:
    """Flush Python's buffers, then mark the end of the activation on both streams."""
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            stream.flush()
        except Exception:
            pass
        try:
            os.write(fd, SENTINEL)
        except OSError:
            pass


class BadBody(ValueError):
    """A ``/init`` or ``/run`` body refused before any action code runs. ``spent``: the
    refusal uses up the container's one ``/init`` (the code was there but unusable)."""

    def __init__(self, status: int, message: str, spent: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.spent = spent


def _body_object(body: bytes, what: str) -> Any:
    """The body's JSON, or BadBody: never RecursionError or another surprise."""
    try:
        return json.loads(body)
    except RecursionError:
        raise BadBody(400, f"The {what} body is nested too deeply.") from None
    except (ValueError, TypeError):  # UnicodeDecodeError, over-long integers included
        raise BadBody(400, f"The {what} body is not valid JSON.") from None


def _env_entry(name: Any, value: Any, what: str) -> tuple[str, str]:
    """One environment variable, or BadBody naming what the OS would refuse."""
    try:
        text = _env_text(value)
    except (RecursionError, ValueError, TypeError):
        shown = str(name)[:64]
        raise BadBody(400, f"The {what} value of {shown!r} cannot be written.", True) from None
    if not isinstance(name, str) or not name or "=" in name or "\0" in name or "\0" in text:
        shown = str(name)[:64]
        raise BadBody(400, f"The {what} has an invalid variable name or value: {shown!r}.", True)
    try:
        os.fsencode(name), os.fsencode(text)
    except UnicodeError:
        raise BadBody(400, f"The {what} variable {name[:64]!r} is not valid text.", True) from None
    return name, text


def parse_init(body: bytes) -> tuple[str, str, bytes | None, dict[str, str]]:
    """``(code, main, zip bytes or None, environment)`` of an ``/init`` body, or BadBody."""
    msg = _body_object(body, "/init")
    value = msg.get("value") if isinstance(msg, dict) else None
    if not isinstance(value, dict):
        value = {}
    code = value.get("code")
    main_name = value.get("main") or "main"
    if not isinstance(code, str) or not code or not isinstance(main_name, str):
        raise BadBody(403, NO_CODE)
    data = None
    if value.get("binary"):
        try:
            data = base64.b64decode(code, validate=True)
        except ValueError:
            raise BadBody(400, "The action code is not valid base64.", True) from None
    env_value = value.get("env")
    env = (
        dict(_env_entry(k, v, "/init env") for k, v in env_value.items())
        if isinstance(env_value, dict)
        else {}
    )
    return code, main_name, data, env


def parse_run(body: bytes) -> tuple[Any, dict[str, str]]:
    """``(value, environment)`` of a ``/run`` body, or BadBody."""
    msg = _body_object(body, "/run")
    if not isinstance(msg, dict):
        raise BadBody(400, "The /run body is not a JSON object.")
    env = dict(
        _env_entry("__OW_" + k.upper(), v, "/run context") for k, v in msg.items() if k != "value"
    )
    return msg.get("value", {}), env


class ActionRuntime:
    """``/init`` and ``/run`` for one action; answers are ``(status, JSON body)``."""

    def __init__(self, cwd: str, project_root: str | None = None) -> None:
        self.cwd = cwd
        self.project_root = project_root
        self.main: Any = None
        self.init_attempted = False

    def init(self, body: bytes) -> tuple[int, bytes]:
        if self.init_attempted:
            print(INIT_TWICE, file=sys.stderr)  # as the stock proxy: logged, no sentinels
            return 403, _json({"error": INIT_TWICE})
        try:
            code, main_name, data, env = parse_init(body)
        except BadBody as e:
            if e.spent:
                self.init_attempted = True
                write_sentinels()
            return e.status, _json({"error": e.message})
        self.init_attempted = True
        os.environ.update(env)
        try:
            if pool := os.environ.get("__OW_GPU_POOL"):
                self._install_gpu_client(pool)
            module = self._load_zip(data) if data is not None else self._load_source(code)
            fn = getattr(module, main_name, None)
            if not callable(fn):
                raise AttributeError(f"Action entrypoint '{main_name}' is not a function.")
        except _InitError as e:
            print(e, file=sys.stderr)
            write_sentinels()
            return 502, _json({"error": str(e)})
        except BaseException as e:  # SyntaxError, ImportError, SystemExit at import time...
            traceback.print_exc()
            write_sentinels()
            return 502, _json({"error": _describe(e)})
        self.main = fn
        return 200, b'{"ok":true}'

    def run(self, body: bytes) -> tuple[int, bytes]:
        try:
            return self._run(body)
        finally:
            write_sentinels()

    def _run(self, body: bytes) -> tuple[int, bytes]:
        if self.main is None:
            return 500, _json({"error": NOT_INITIALIZED})
        try:
            value, env = parse_run(body)
        except BadBody as e:
            return e.status, _json({"error": e.message})
        os.environ.update(env)
        try:
            result = self.main(value)
        except SystemExit:
            # As the stock proxy when the action's process exits: 400, and later calls are
            # refused (the invoker destroys the container after this developer error anyway).
            self.main = None
            return 400, _json({"error": COMMAND_EXITED})
        except Exception as e:
            # As the stock launcher: the traceback goes to the logs and the error, str(e) as
            # it gives it (no type, empty for an exception without a message), becomes the
            # result (HTTP 200, an application error; the container stays warm).
            traceback.print_exc()
            return 200, _json({"error": str(e)})
        if not isinstance(result, (dict, list)):
            return 502, _json({"error": NOT_A_DICT})
        try:
            return 200, _json(result)
        except (TypeError, ValueError, RecursionError) as e:
            return 502, _json({"error": f"The action's result is not valid JSON: {e}"})

    def _install_gpu_client(self, address: str) -> None:
        """The GPU pool hook: its client must be importable before the action is."""
        try:
            if self.project_root and self.project_root not in sys.path:
                sys.path.insert(0, self.project_root)
            import gpu.client

            gpu.client.install(address)
        except Exception as e:
            raise _InitError(f"The GPU pool client could not be installed: {_describe(e)}") from e

    def _load_source(self, code: str) -> types.ModuleType:
        filename = os.path.join(self.cwd, "__main__.py")
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        module = types.ModuleType("main__")
        module.__file__ = filename
        sys.modules["main__"] = module
        exec(compile(code, filename, "exec"), module.__dict__)
        return module

    def _load_zip(self, data: bytes) -> types.ModuleType:
        try:
            safe_extract(data, self.cwd)
        except (UnsafeArchive, zipfile.BadZipFile, OSError) as e:
            raise _InitError(f"The action archive could not be unpacked: {e}") from e
        entry = os.path.join(self.cwd, "__main__.py")
        if not os.path.isfile(entry):
            raise _InitError("Zip file does not include __main__.py.")
        venv = os.path.join(self.cwd, "virtualenv", "lib")
        if os.path.isdir(venv):
            import site

            for d in sorted(os.listdir(venv)):
                sp = os.path.join(venv, d, "site-packages")
                if d.startswith("python") and os.path.isdir(sp):
                    site.addsitedir(sp)
                    sys.path.remove(sp)
                    sys.path.insert(0, sp)
        sys.path.insert(0, self.cwd)
        spec = importlib.util.spec_from_file_location("main__", entry)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["main__"] = module
        spec.loader.exec_module(module)
        return module


class _InitError(Exception):
    """An /init failure whose message is already meant for the user."""


def _env_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


# --------------------------------------------------------------------------------------------
# A tiny HTTP/1.1 server: one activation at a time, keep-alive, any number of connections.


class BadRequest(ValueError):
    pass


def parse_head(buf: bytes | bytearray) -> tuple[str, str, dict[str, str], int, bool] | None:
    """``(method, path, headers, header_length, keep_alive)`` once the head is complete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEADER_BYTES:
            raise BadRequest("request head too large")
        return None
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    try:
        method, path, version = lines[0].split(" ")
    except ValueError:
        raise BadRequest("bad request line") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest("bad header line")
        headers[name.strip().lower()] = value.strip()
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    return method, path, headers, end + 4, keep_alive


def _response(status: int, body: bytes, keep_alive: bool) -> bytes:
    reason = {
        200: "OK",
        400: "Bad Request",
        403: "Forbidden",
        404: "Not Found",
        411: "Length Required",
        500: "Internal Server Error",
        502: "Bad Gateway",
    }
    head = (
        f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        + ("" if keep_alive else "Connection: close\r\n")
        + "\r\n"
    )
    return head.encode() + body


def serve(lsock: socket.socket, runtime: ActionRuntime) -> None:
    """Serve /init and /run forever (returns only if the listening socket fails)."""
    sel = selectors.DefaultSelector()
    lsock.setblocking(False)
    sel.register(lsock, selectors.EVENT_READ, None)
    while True:
        for key, _ in sel.select():
            if key.data is None:
                try:
                    conn, _ = lsock.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(True)
                if conn.family != socket.AF_UNIX:
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sel.register(conn, selectors.EVENT_READ, _Conn())
                continue
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            if not key.data.on_readable(sock, runtime):
                sel.unregister(sock)
                sock.close()


class _Conn:
    """Request assembly for one client connection."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.continued = False

    def on_readable(self, sock: socket.socket, runtime: ActionRuntime) -> bool:
        try:
            data = sock.recv(1 << 18)
        except OSError:
            return False
        if not data:
            return False
        self.buf += data
        try:
            while True:
                head = parse_head(self.buf)
                if head is None:
                    return True
                method, path, headers, hlen, keep_alive = head
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    error = _json({"error": "chunked bodies are not supported"})
                    sock.sendall(_response(411, error, False))
                    return False
                try:
                    length = int(headers.get("content-length", "0"))
                except ValueError:
                    raise BadRequest("bad Content-Length") from None
                if len(self.buf) < hlen + length:
                    if not self.continued and headers.get("expect", "").lower() == "100-continue":
                        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                        self.continued = True
                    return True
                body = bytes(self.buf[hlen : hlen + length])
                del self.buf[: hlen + length]
                self.continued = False
                try:
                    if method == "POST" and path == "/run":
                        status, payload = runtime.run(body)
                    elif method == "POST" and path == "/init":
                        status, payload = runtime.init(body)
                    else:
                        status, payload = 404, _json({"error": "not found"})
                except Exception as e:  # the server outlives any one request
                    traceback.print_exc()
                    status, payload = 500, _json({"error": f"The runtime failed: {_describe(e)}"})
                sock.sendall(_response(status, payload, keep_alive))
                if not keep_alive:
                    return False
        except BadRequest as e:
            try:
                sock.sendall(_response(400, _json({"error": str(e)}), False))
            except OSError:
                pass
            return False
        except OSError:
            return False


# --------------------------------------------------------------------------------------------
# Becoming a container (runs in the forked child, before any action code).


def enter_session(zygote_pid: int, keep: tuple[int, int, int, int], max_fd: int) -> None:
    """First steps of a fresh fork: own session, die with the zygote, and hold no fd of the
    zygote's but ``keep`` = (stdout pipe, stderr pipe, listening socket, assignment pipe),
    which end up as fds 1, 2, 3 and 4 (fd 0 is /dev/null)."""
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    os.setsid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote_pid:
        os._exit(1)
    # Copy the kept fds to >= 5 first, so the dup2s below cannot clobber one of them.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 5) for fd in keep]
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    for target, fd in zip((1, 2, 3, 4), high, strict=True):
        os.dup2(fd, target, inheritable=target != 4)
    os.closerange(5, max_fd + 1)


def enter_stdin(path: str) -> None:
    """Make ``path`` the child's stdin. A runtime exec'd as another user reads its script from
    here (``node -``), so it needs no access to the project's directory."""
    fd = os.open(path, os.O_RDONLY)
    if fd != 0:
        os.dup2(fd, 0)
        os.close(fd)


def enter_container(req: dict[str, Any], zygote_pid: int) -> None:
    """Isolation that depends on the assignment: fd limit, private /tmp, cwd, process name,
    and the user to run as (then the invoker's processes are out of the action's reach)."""
    nofile = int(req.get("nofile") or 1024)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    if req.get("private_tmp") and _libc is not None and _libc.unshare(CLONE_NEWNS) == 0:
        _libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
        _libc.mount(req["tmp"].encode(), b"/tmp", None, MS_BIND | MS_REC, None)
    os.chdir(req["cwd"])
    _prctl(PR_SET_NAME, ("ow:" + str(req.get("name", "")))[:15].encode())
    if (uid := req.get("uid")) is not None:
        os.setgroups([])
        os.setgid(int(req["gid"]))
        os.setuid(int(uid))
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a change of credentials clears it
        if os.getppid() != zygote_pid:
            os._exit(1)


def become_python_action(req: dict[str, Any], project_root: str | None) -> ActionRuntime:
    """Interpreter-level reset of a forked child: environment, streams, tempfile, limits."""
    os.environ.clear()
    os.environ.update(req.get("env") or {})
    _line_buffered_streams()
    sys.stdin = sys.__stdin__ = open(os.devnull)  # type: ignore[misc]  # noqa: SIM115
    sys.argv = [os.path.join(req["cwd"], "__main__.py")]
    tempfile.tempdir = None
    hide_editable_installs()
    if limit := req.get("rlimit_as"):
        resource.setrlimit(resource.RLIMIT_AS, (_vm_size() + int(limit),) * 2)
    return ActionRuntime(req["cwd"], project_root)


def hide_editable_installs() -> None:
    """Drop the import hooks of editable installs (``pip install -e``) of the interpreter's
    environment, so the invoker's own packages are not importable by action code (the GPU
    hook puts the project root back on ``sys.path`` when it is asked for)."""

    def editable(obj: Any) -> bool:
        return str(getattr(obj, "__module__", "")).startswith("__editable__")

    sys.meta_path[:] = [f for f in sys.meta_path if not editable(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if not editable(h)]
    sys.path[:] = [p for p in sys.path if "__editable__" not in p]
    sys.path_importer_cache.clear()


def _line_buffered_streams() -> None:
    """Fresh line-buffered UTF-8 writers on fd 1/2, so log timestamps follow the prints (the
    zygote's own stream objects cached facts about the fds they were created on)."""
    sys.stdout = sys.__stdout__ = open(  # type: ignore[misc]  # noqa: SIM115
        1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
    )
    sys.stderr = sys.__stderr__ = open(  # type: ignore[misc]  # noqa: SIM115
        2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
    )


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


# --------------------------------------------------------------------------------------------
# Cgroups, as far as the zygote needs them (creation, naming, limits; the backend removes).


class CgroupLayout:
    """Where container cgroups live: v1 ``memory`` (+ ``cpu``) parents, or one v2 parent."""

    def __init__(self, version: int, memory: str | None, cpu: str | None) -> None:
        self.version = version if memory else 0
        self.memory = memory
        self.cpu = cpu if version == 1 else None

    def make(self, name: str) -> list[str]:
        """Create the cgroup directories for ``name`` (memory first)."""
        dirs = [os.path.join(p, name) for p in (self.memory, self.cpu) if p]
        made: list[str] = []
        try:
            for d in dirs:
                os.mkdir(d)
                made.append(d)
        except OSError:
            remove_dirs(made)
            raise
        return dirs

    def rename(self, dirs: list[str], name: str) -> list[str]:
        out = []
        for d in dirs:
            new = os.path.join(os.path.dirname(d), name)
            if os.path.isdir(new):
                os.rmdir(new)  # an empty leftover of the same name; busy ones raise
            os.rename(d, new)
            out.append(new)
        return out

    def set_limits(self, dirs: list[str], memory_mb: int, cpu_shares: int | None) -> None:
        limit = str(max(int(memory_mb), 4) << 20)
        mem = dirs[0]
        if self.version == 1:
            _write(os.path.join(mem, "memory.limit_in_bytes"), limit)
            _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), limit, optional=True)
            if cpu_shares and len(dirs) > 1:
                _write(os.path.join(dirs[1], "cpu.shares"), str(max(int(cpu_shares), 2)))
        else:
            _write(os.path.join(mem, "memory.max"), limit)
            _write(os.path.join(mem, "memory.swap.max"), "0", optional=True)
            if cpu_shares:
                weight = 1 + ((max(int(cpu_shares), 2) - 2) * 9999) // 262142
                _write(os.path.join(mem, "cpu.weight"), str(weight), optional=True)

    def describe(self, dirs: list[str]) -> dict[str, Any] | None:
        if not dirs:
            return None
        cpu = dirs[1] if len(dirs) > 1 else None
        return {"version": self.version, "memory": dirs[0], "cpu": cpu}


def _write(path: str, value: str, optional: bool = False) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:
        if not optional:
            raise


def remove_dirs(dirs: list[str]) -> bool:
    ok = True
    for d in dirs:
        try:
            os.rmdir(d)
        except FileNotFoundError:
            pass
        except OSError:
            ok = False
    return ok


# --------------------------------------------------------------------------------------------
# The zygote.


class _Pipe:
    __slots__ = ("log", "pid", "stream")

    def __init__(self, pid: int, stream: LogStream, log: _LogFile) -> None:
        self.pid = pid
        self.stream = stream
        self.log = log


class _LogFile:
    __slots__ = ("fd", "refs")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.refs = 2

    def write(self, data: bytes) -> None:
        if data:
            try:
                os.write(self.fd, data)
            except OSError:
                pass

    def release(self) -> None:
        self.refs -= 1
        if self.refs == 0:
            os.close(self.fd)


class _Spare:
    """A forked child waiting for its assignment, already in its own session and cgroup
    (and, sandboxed, in its sandbox with a uid of its own, listening on a Unix socket)."""

    __slots__ = ("assign_w", "cgroups", "err_r", "out_r", "pid", "port", "socket", "uid")

    def __init__(
        self, pid: int, port: int, out_r: int, err_r: int, assign_w: int, cgroups: list[str]
    ) -> None:
        self.pid, self.port = pid, port
        self.out_r, self.err_r, self.assign_w = out_r, err_r, assign_w
        self.cgroups = cgroups
        self.socket: str | None = None
        self.uid: int | None = None

    def close_fds(self) -> None:
        for fd in (self.out_r, self.err_r, self.assign_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.out_r = self.err_r = self.assign_w = -1


class Zygote:
    """Forks containers on request; see the module docstring.

    It keeps ``spares`` children forked ahead of demand, each already in a session and a
    cgroup of its own (joining a cgroup costs a kernel RCU grace period, ~10 ms on cgroup v1),
    so assigning one costs a cgroup rename, a limit write and a pipe write."""

    def __init__(
        self,
        project_root: str | None,
        parent_pid: int,
        prefix: str,
        spares: int,
        cgroups: CgroupLayout,
        run: str = "",
        sandbox: dict[str, Any] | None = None,
    ) -> None:
        self.project_root = project_root
        self.parent_pid = parent_pid
        self.prefix = prefix
        self.run_tag = run or str(os.getpid())
        self.target_spares = spares
        self.cgroups = cgroups
        self.children: set[int] = set()
        self.spares: list[_Spare] = []
        self.spare_by_pid: dict[int, _Spare] = {}
        self.sel = selectors.DefaultSelector()
        self.ctl_buf = b""
        self.pid = os.getpid()
        self.max_fd = 1024
        self.seq = 0
        self.spare_retry_at = 0.0
        self.sandbox = _load_sandbox() if sandbox else None
        if sandbox:  # the project as a sandbox sees it (the GPU client's package)
            self.project_root = sandbox["project_root"]
        self.sandbox_config = self.sandbox.Config(sandbox) if self.sandbox and sandbox else None
        self.uids: Any = None
        if self.sandbox is not None and sandbox:
            step = 2 if sandbox.get("userns") else 1  # a user namespace maps two uids
            self.uids = self.sandbox.UidPool(sandbox["uid_base"], sandbox["uid_count"], step)
        self.socket_dir: str = (sandbox or {}).get("sockets", "")
        self.owned: dict[int, _Spare] = {}  # pid -> its uid, socket and cgroups, until reaped

    def run(self) -> None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if self.parent_pid and os.getppid() != self.parent_pid:
            return
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        self.max_fd = hard if 0 < hard < 1 << 24 else 1 << 20
        self.ctl_in, self.ctl_out = os.dup(0), os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)  # stray prints go to the invoker's stderr, never into the channel
        for name in PRELOAD:
            try:
                __import__(name)
            except Exception:
                pass
        json.loads(_json({"warm": [1, "x"]}))
        if self.sandbox is not None:
            self.sandbox.prepare_filter()
        gc.collect()
        gc.freeze()
        sig_r, sig_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(sig_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, _exit_on_signal)
        self.sel.register(self.ctl_in, selectors.EVENT_READ, "ctl")
        self.sel.register(sig_r, selectors.EVENT_READ, "sig")
        ready: dict[str, Any] = {"event": "ready", "pid": self.pid}
        if self.sandbox is not None and (problem := self.probe_sandbox()):
            ready["sandbox_error"] = problem
        self.reply(ready)
        try:
            self.loop(sig_r)
        finally:
            self.shutdown()

    def probe_sandbox(self) -> str | None:
        """Build one sandbox and leave it at once: what stops containers from starting is
        reported at start-up, in one line, instead of in every container's log."""
        assert self.uids is not None and self.sandbox is not None
        uid = self.uids.take()
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    null = os.open(os.devnull, os.O_RDWR)
                    for fd in (0, 3, 4):
                        os.dup2(null, fd)
                    for fd in (1, 2):
                        os.dup2(out_w, fd)
                    self.sandbox.enter(self.sandbox_config, uid)
                    os.write(1, b"ok")
                except BaseException as e:
                    os.write(2, _describe(e).encode())
                finally:
                    os._exit(0)
            os.close(out_w)
            out_w = -1
            text = _read_all(out_r).decode(errors="replace").strip()
            os.waitpid(pid, 0)
        finally:
            for fd in (out_r, out_w):
                if fd >= 0:
                    os.close(fd)
            self.uids.give_back(uid)
        return None if text == "ok" else (text or "the probe sandbox died")

    def loop(self, sig_r: int) -> None:
        while True:
            timeout = None
            if len(self.spares) < self.target_spares:
                timeout = max(0.0, self.spare_retry_at - time.monotonic())
            for key, _ in self.sel.select(timeout):
                tag = key.data
                if tag == "ctl":
                    data = os.read(self.ctl_in, 1 << 16)
                    if not data:
                        return
                    self.ctl_buf += data
                    while (nl := self.ctl_buf.find(b"\n")) >= 0:
                        line, self.ctl_buf = self.ctl_buf[:nl], self.ctl_buf[nl + 1 :]
                        if line.strip():
                            self.handle(line)
                elif tag == "sig":
                    try:
                        while os.read(sig_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                    self.reap()
                else:
                    self.drain(key.fd, tag)
            if len(self.spares) < self.target_spares and time.monotonic() >= self.spare_retry_at:
                self.add_spare()  # one per round, so requests and logs interleave

    def handle(self, line: bytes) -> None:
        try:
            req = json.loads(line)
            assert isinstance(req, dict)
        except (ValueError, AssertionError):
            self.reply({"id": None, "error": "bad request line"})
            return
        if req.get("op") == "spawn":
            try:
                self.reply({"id": req["id"], **self.spawn(req)})
            except Exception as e:
                self.reply({"id": req["id"], "error": _describe(e)})
        else:
            self.reply({"id": req.get("id"), "error": f"unknown op {req.get('op')!r}"})

    def reply(self, msg: dict[str, Any]) -> None:
        data = _json(msg) + b"\n"
        while data:
            data = data[os.write(self.ctl_out, data) :]

    def add_spare(self) -> None:
        try:
            spare = self.fork_spare()
        except Exception as e:
            print(f"zygote: cannot fork a spare container: {_describe(e)}", file=sys.stderr)
            self.spare_retry_at = time.monotonic() + 1.0
            return
        self.spares.append(spare)

    def fork_spare(self) -> _Spare:
        self.seq += 1
        uid = self.uids.take() if self.uids is not None else None  # before any cgroup
        try:
            dirs = self.cgroups.make(f"{self.prefix}_spare_{self.run_tag}_{self.seq}")
        except BaseException:
            self._release(uid, None)
            raise
        fds: list[int] = []
        path: str | None = None
        if self.socket_dir:  # reachable by the invoker only (its directory is 0700)
            path = os.path.join(self.socket_dir, f"{self.run_tag}_{self.seq}.sock")
            lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        else:
            lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if path is not None:
                if os.path.lexists(path):
                    os.unlink(path)
                lsock.bind(path)
                port = 0
            else:
                lsock.bind(("127.0.0.1", 0))
                port = lsock.getsockname()[1]
            lsock.listen(64)
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            fds += (out_r, out_w)
            err_r, err_w = os.pipe2(os.O_CLOEXEC)
            fds += (err_r, err_w)
            assign_r, assign_w = os.pipe2(os.O_CLOEXEC)
            fds += (assign_r, assign_w)
            # Opened here: the child joins through these even after a rename of its cgroup.
            procs = [
                os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for d in dirs
            ]
            fds += procs
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                self.spare_main((out_w, err_w, lsock.fileno(), assign_r), procs, uid)
        except BaseException:
            for fd in fds:
                os.close(fd)
            remove_dirs(dirs)
            self._release(uid, path)
            raise
        finally:
            lsock.close()
        for fd in (out_w, err_w, assign_r, *procs):
            os.close(fd)
        spare = _Spare(pid, port, out_r, err_r, assign_w, dirs)
        spare.socket, spare.uid = path, uid
        self.owned[pid] = spare
        self.children.add(pid)
        self.spare_by_pid[pid] = spare
        return spare

    def _release(self, uid: int | None, path: str | None, cgroups: Sequence[str] = ()) -> None:
        """A container's socket, once its shim is reaped; its uid goes into the pool's
        quarantine, until nothing of the container is alive (its ``cgroups`` empty)."""
        if uid is not None and self.uids is not None:
            self.uids.give_back(uid, cgroups)
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass

    def spare_main(
        self, keep: tuple[int, int, int, int], cgroup_procs: list[int], uid: int | None
    ) -> None:
        """The child side of a spare: never returns."""
        code = 1
        try:
            me = str(os.getpid()).encode()
            for fd in cgroup_procs:
                os.write(fd, me)
            enter_session(self.pid, keep, self.max_fd)
            if self.sandbox is not None and uid is not None:
                self.sandbox.enter(self.sandbox_config, uid)  # returns in the sandbox's init
            data = _read_all(4)
            os.close(4)
            if not data:
                code = 0
                return  # discarded by the zygote
            req = json.loads(data)
            if stdin := req.get("stdin"):  # opened before any change of user: see enter_stdin
                enter_stdin(stdin)
            enter_container(req, self.pid)
            if argv := req.get("exec"):
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
                os.execve(argv[0], argv, req.get("env") or {})
            runtime = become_python_action(req, self.project_root)
            serve(socket.socket(fileno=3), runtime)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            try:
                traceback.print_exc()
            except BaseException:
                pass
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            os._exit(code)

    def spawn(self, req: dict[str, Any]) -> dict[str, Any]:
        for _ in range(2):  # a spare may have died unnoticed: then try a fresh one
            try:
                return self.assign(self.spares.pop(0) if self.spares else self.fork_spare(), req)
            except BrokenPipeError:
                pass
        return self.assign(self.fork_spare(), req)

    def assign(self, spare: _Spare, req: dict[str, Any]) -> dict[str, Any]:
        del self.spare_by_pid[spare.pid]
        try:
            dirs = spare.cgroups
            if dirs and (cg := req.get("cgroup")):
                dirs = spare.cgroups = self.cgroups.rename(dirs, cg["name"])
                self.cgroups.set_limits(dirs, cg["memory_mb"], cg.get("cpu_shares"))
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
            logfd = os.open(req["log"], flags, 0o640)
            try:
                data = _json(req)
                while data:
                    data = data[os.write(spare.assign_w, data) :]
            except BaseException:
                os.close(logfd)
                raise
        except BaseException:
            self.discard(spare)
            raise
        os.close(spare.assign_w)
        spare.assign_w = -1
        log = _LogFile(logfd)
        for fd, name in ((spare.out_r, "stdout"), (spare.err_r, "stderr")):
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ, _Pipe(spare.pid, LogStream(name), log))
        reply: dict[str, Any] = {"pid": spare.pid, "port": spare.port}
        if spare.socket is not None:
            reply["socket"] = spare.socket
        return {**reply, "cgroup": self.cgroups.describe(dirs)}

    def discard(self, spare: _Spare) -> None:
        for kill in (os.killpg, os.kill):
            try:
                kill(spare.pid, signal.SIGKILL)
            except OSError:
                pass
        spare.close_fds()
        self.spare_by_pid[spare.pid] = spare  # its cgroups go once it is reaped

    def drain(self, fd: int, pipe: _Pipe) -> None:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        now = time.time_ns()
        if data:
            pipe.log.write(pipe.stream.feed(data, now))
            return
        pipe.log.write(pipe.stream.flush(now))
        self.sel.unregister(fd)
        os.close(fd)
        pipe.log.release()

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in self.children:
                continue  # an orphan we adopted as subreaper
            self.children.discard(pid)
            if (gone := self.owned.pop(pid, None)) is not None:
                self._release(gone.uid, gone.socket, gone.cgroups)
            spare = self.spare_by_pid.pop(pid, None)
            if spare is not None:  # never assigned
                if spare in self.spares:  # died idle: do not fork replacements in a tight loop
                    self.spares.remove(spare)
                    self.spare_retry_at = time.monotonic() + 0.5
                spare.close_fds()
                remove_dirs(spare.cgroups)
                continue
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            self.reply({"event": "exit", "pid": pid, "status": code})

    def shutdown(self) -> None:
        """Kill every container (whole process groups) and orphans we inherited as subreaper;
        remove the cgroups of unassigned spares."""
        for pid in list(self.children):
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        me = str(os.getpid())
        try:
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        with open(f"/proc/{entry}/stat") as f:
                            fields = f.read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    if fields[1] == me:
                        try:
                            os.kill(int(entry), signal.SIGKILL)
                        except OSError:
                            pass
        except OSError:
            pass
        spares = list(self.spare_by_pid.values())
        deadline = time.monotonic() + 1.0
        while spares and time.monotonic() < deadline:
            for spare in list(spares):
                try:
                    done = os.waitpid(spare.pid, os.WNOHANG)[0] != 0
                except ChildProcessError:
                    done = True
                if done:
                    spares.remove(spare)
                    remove_dirs(spare.cgroups)
            time.sleep(0.005)


def _load_sandbox() -> Any:
    """``sandbox.py`` beside this file (the zygote runs isolated, ``-I``: no script directory
    on ``sys.path``); loaded before any fork, so no action can import it from disk."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox.py")
    spec = importlib.util.spec_from_file_location("ow_sandbox", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


# --------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python_runtime.py")
    sub = parser.add_subparsers(dest="mode", required=True)
    z = sub.add_parser("zygote", help="fork containers on request (stdin/stdout JSON lines)")
    z.add_argument("--project-root", default=None)
    z.add_argument("--parent-pid", type=int, default=0)
    z.add_argument("--marker", default="wsk", help="the backend's name prefix (also in ps)")
    z.add_argument("--spares", type=int, default=2, help="children forked ahead of demand")
    z.add_argument("--run", default="", help="unique per zygote: names its spares' cgroups")
    z.add_argument("--cgroup-version", type=int, default=0)
    z.add_argument("--cgroup-memory", default=None, help="parent of container memory cgroups")
    z.add_argument("--cgroup-cpu", default=None, help="parent of container cpu cgroups (v1)")
    z.add_argument("--sandbox", default=None, help="the sandbox's settings, JSON (sandbox.py)")
    s = sub.add_parser("serve", help="run one container's HTTP server in this interpreter")
    s.add_argument("--listen-fd", type=int, default=None)
    s.add_argument("--port", type=int, default=8080)
    s.add_argument("--project-root", default=None)
    s.add_argument("--marker", default="", help="the backend's name prefix (also in ps)")
    args = parser.parse_args(argv)
    if args.mode == "zygote":
        try:
            layout = CgroupLayout(args.cgroup_version, args.cgroup_memory, args.cgroup_cpu)
            sandbox = json.loads(args.sandbox) if args.sandbox else None
            Zygote(
                args.project_root,
                args.parent_pid,
                args.marker,
                args.spares,
                layout,
                args.run,
                sandbox,
            ).run()
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 0
        return 0
    _line_buffered_streams()
    hide_editable_installs()
    if args.listen_fd is not None:
        lsock = socket.socket(fileno=args.listen_fd)
    else:
        lsock = socket.create_server(("127.0.0.1", args.port), backlog=64)
    serve(lsock, ActionRuntime(os.getcwd(), args.project_root))
    return 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as e:
        if e.errno != errno.EPIPE:
            raise
        sys.exit(1)
