"""The HTTP client every backend uses to talk to an action runtime (``/init``, ``/run``).

A minimal HTTP/1.1 client on a raw :class:`asyncio.Protocol`, one keep-alive connection per
container and one request at a time (a container runs one activation at a time). It is
several times cheaper per request than aiohttp (see ``benchmarks/bench_process_backend.py``),
which matters at 1000+ activations/s on two cores.

Semantics follow the reference invoker (spec 3.3/3.4):

- ``post_init`` retries failed connects every 50 ms until the timeout is used up (this absorbs
  runtime start-up); ``post_run`` connects at most once and never retries.
- Past the deadline: :class:`TimeoutError` (the connection is dropped, since the runtime may
  still answer later). The runtime closing or resetting the connection before a complete
  answer: :class:`~containers.backend.ContainerGone`.
- At most ``max_response_bytes + 1`` bytes of a body are kept (the rest is read and
  discarded), so a huge result cannot exhaust the invoker's memory; the true length is
  reported as :attr:`~containers.backend.HttpResult.length`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from containers.backend import ContainerGone, HttpResult

DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024
CONNECT_RETRY_S = 0.05
MAX_HEAD_BYTES = 64 * 1024
SocketFactory = Callable[[], Awaitable[socket.socket]]


class BadHttpResponse(Exception):
    """The runtime's answer is not HTTP/1.1 we can read."""


class NoAnswer(ContainerGone):
    """The connection closed before a single byte of an answer came back. Behind a proxy
    that accepts for the runtime (Docker's userland proxy for a published port), this is
    what a runtime that does not listen yet looks like, so /init may retry it while the
    container runs (:meth:`containers.docker.DockerContainer.init`)."""


class ResponseParser:
    """Incremental HTTP/1.1 response parser (Content-Length, chunked, or read-until-close).

    Keeps at most ``limit + 1`` body bytes; ``length`` counts every body byte received (or
    declared). Interim ``1xx`` answers are skipped."""

    __slots__ = (
        "_buf",
        "_chunk_left",
        "_state",
        "body",
        "keep_alive",
        "length",
        "limit",
        "remaining",
        "status",
    )

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.status = 0
        self.body = bytearray()
        self.length = 0
        self.keep_alive = True
        self.remaining = 0
        self._buf = b""
        self._state = (
            "head"  # head | length | chunk-size | chunk-data | chunk-end | trailer | eof | done
        )
        self._chunk_left = 0

    @property
    def done(self) -> bool:
        return self._state == "done"

    def feed(self, data: bytes) -> bool:
        """Consume bytes; True once the response is complete."""
        buf = self._buf + data if self._buf else data
        self._buf = b""
        while buf and self._state != "done":
            state = self._state
            if state == "head":
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise BadHttpResponse("response head too large")
                    self._buf = buf
                    return False
                self._head(buf[:end])
                buf = buf[end + 4 :]
            elif state == "length":
                take = buf[: self.remaining]
                self._keep(take)
                self.remaining -= len(take)
                buf = buf[len(take) :]
                if self.remaining == 0:
                    self._state = "done"
            elif state == "eof":
                self._keep(buf)
                buf = b""
            elif state == "chunk-data":
                take = buf[: self._chunk_left]
                self._keep(take)
                self._chunk_left -= len(take)
                buf = buf[len(take) :]
                if self._chunk_left == 0:
                    self._state = "chunk-end"
            else:  # chunk-size, chunk-end, trailer: line based
                nl = buf.find(b"\r\n")
                if nl < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise BadHttpResponse("chunk line too long")
                    self._buf = buf
                    return False
                line, buf = buf[:nl], buf[nl + 2 :]
                if state == "chunk-size":
                    try:
                        size = int(line.split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        raise BadHttpResponse("bad chunk size") from None
                    if size == 0:
                        self._state = "trailer"
                    else:
                        self._chunk_left = size
                        self._state = "chunk-data"
                elif state == "chunk-end":
                    if line:
                        raise BadHttpResponse("missing CRLF after chunk")
                    self._state = "chunk-size"
                elif not line:  # end of trailers
                    self._state = "done"
        if self._state == "done" and buf:
            raise BadHttpResponse("data after the end of the response")
        return self._state == "done"

    def feed_eof(self) -> bool:
        """The peer closed the connection; True if that completes the response."""
        if self._state == "eof":
            self._state = "done"
            self.keep_alive = False
        return self._state == "done"

    def _keep(self, data: bytes) -> None:
        self.length += len(data)
        room = self.limit + 1 - len(self.body)
        if room > 0:
            self.body += data[:room]

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise BadHttpResponse(f"bad status line {lines[0][:80]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise BadHttpResponse(f"bad status line {lines[0][:80]!r}") from None
        if 100 <= status < 200:
            return  # interim answer; the real one follows
        self.status = status
        length: int | None = None
        chunked = False
        conn = b""
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise BadHttpResponse("bad Content-Length") from None
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                conn = value.strip().lower()
        self.keep_alive = conn != b"close" if parts[0] == b"HTTP/1.1" else conn == b"keep-alive"
        if chunked:
            self._state = "chunk-size"
        elif length is not None:
            self.remaining = length
            self._state = "length" if length > 0 else "done"
        else:
            self._state = "eof"
            self.keep_alive = False


class _Connection(asyncio.Protocol):
    __slots__ = ("answered", "closed", "parser", "transport", "waiter")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser: ResponseParser | None = None
        self.waiter: asyncio.Future[ResponseParser] | None = None
        self.closed = False
        self.answered = False  # any byte received on this connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.answered = True
        parser = self.parser
        if parser is None:  # unsolicited bytes: this connection is no longer usable
            self.close()
            return
        try:
            done = parser.feed(data)
        except BadHttpResponse as e:
            self._fail(ContainerGone(f"unreadable answer from the runtime: {e}"))
            self.close()
            return
        if done:
            self._finish()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.parser is not None and self.parser.feed_eof():
            self._finish()
        else:
            reason = f": {exc}" if exc else ""
            gone = ContainerGone if self.answered else NoAnswer
            self._fail(gone(f"the runtime closed the connection{reason}"))

    def _finish(self) -> None:
        waiter, parser = self.waiter, self.parser
        self.waiter = self.parser = None
        if waiter is not None and parser is not None and not waiter.done():
            waiter.set_result(parser)

    def _fail(self, exc: BaseException) -> None:
        waiter = self.waiter
        self.waiter = self.parser = None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _expire(waiter: asyncio.Future[Any], message: str) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError(message))


class RuntimeClient:
    """Talks to one runtime at ``(host, port)`` or ``unix_path``; one request at a time.
    ``make_socket``:
    where the runtime is in another network namespace, each connection's (unconnected,
    non-blocking) socket comes from it (:mod:`containers.docker.netns`)."""

    def __init__(
        self,
        host: str,
        port: int,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        make_socket: SocketFactory | None = None,
        unix_path: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.max_response_bytes = max_response_bytes
        self.make_socket = make_socket  # None: a plain connect to (host, port)
        self.unix_path = unix_path  # a runtime listening on a Unix socket (the sandbox)
        self._conn: _Connection | None = None
        self._where = f"unix:{unix_path}" if unix_path else f"{host}:{port}"
        common = (
            f" HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            "Accept: application/json\r\nContent-Length: "
        )
        self._init_head = ("POST /init" + common).encode()
        self._run_head = ("POST /run" + common).encode()

    async def post_init(self, body: bytes, timeout_s: float) -> HttpResult:
        return await self._post(self._init_head, body, timeout_s, retry_connect=True)

    async def post_run(self, body: bytes, timeout_s: float) -> HttpResult:
        return await self._post(self._run_head, body, timeout_s, retry_connect=False)

    def close(self) -> None:
        """Drop the connection (a later request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close_idle(self) -> None:
        """Drop the kept connection unless a request is using it (a call paused in /run
        keeps its connection, and gets its answer once resumed)."""
        if self._conn is not None and self._conn.waiter is None:
            self.close()

    async def _post(
        self, head: bytes, body: bytes, timeout_s: float, retry_connect: bool
    ) -> HttpResult:
        loop = asyncio.get_running_loop()
        start = loop.time()
        deadline = start + timeout_s
        conn = self._conn
        if conn is None or conn.closed or conn.waiter is not None:
            # None yet, or busy with a concurrent request: that one gets a connection of its own
            conn = await self._connect(loop, deadline, retry_connect)
            if self._conn is None or self._conn.closed:
                self._conn = conn
        transport = conn.transport
        assert transport is not None
        parser = ResponseParser(self.max_response_bytes)
        waiter: asyncio.Future[ResponseParser] = loop.create_future()
        conn.parser, conn.waiter = parser, waiter
        message = head + str(len(body)).encode() + b"\r\n\r\n"
        if len(body) < 65536:
            transport.write(message + body)
        else:
            transport.writelines((message, body))
        what = f"no answer from the runtime at {self._where} within {timeout_s:g} s"
        timer = loop.call_at(deadline, _expire, waiter, what)
        try:
            await waiter
        except BaseException:
            self._drop(conn)  # the runtime may still answer: never reuse this connection
            raise
        finally:
            timer.cancel()
        if not parser.keep_alive or conn is not self._conn:
            self._drop(conn)
        elapsed = loop.time() - start
        return HttpResult(parser.status, bytes(parser.body), elapsed, parser.length)

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        if self._conn is conn:
            self._conn = None

    async def _connect(
        self, loop: asyncio.AbstractEventLoop, deadline: float, retry: bool
    ) -> _Connection:
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    if self.unix_path is not None:
                        _, conn = await loop.create_unix_connection(_Connection, self.unix_path)
                    elif self.make_socket is None:
                        _, conn = await loop.create_connection(_Connection, self.host, self.port)
                    else:
                        _, conn = await self._connect_made(loop)
                return conn
            except TimeoutError as e:
                raise TimeoutError(
                    f"the runtime at {self._where} accepted no connection in time"
                ) from e
            except OSError as e:
                if not retry:
                    raise ContainerGone(
                        f"cannot connect to the runtime at {self._where}: {e}"
                    ) from e
                pause = min(CONNECT_RETRY_S, deadline - loop.time())
                if pause <= 0:
                    raise TimeoutError(
                        f"the runtime at {self._where} accepted no connection"
                    ) from e
                await asyncio.sleep(pause)

    async def _connect_made(
        self, loop: asyncio.AbstractEventLoop
    ) -> tuple[asyncio.BaseTransport, _Connection]:
        assert self.make_socket is not None
        sock = await self.make_socket()
        try:
            await loop.sock_connect(sock, (self.host, self.port))
            return await loop.create_connection(_Connection, sock=sock)
        except BaseException:
            sock.close()
            raise
