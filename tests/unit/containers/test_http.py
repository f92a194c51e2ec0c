"""HTTP framing on both sides: the invoker's response parser and the runtime's request head
parser; and the client against a scripted server (timeouts, drops, refusals)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from containers.backend import ContainerGone
from containers.http import BadHttpResponse, ResponseParser, RuntimeClient
from containers.runtimes.python_runtime import BadRequest, parse_head


def feed_all(p: ResponseParser, data: bytes, step: int) -> bool:
    done = False
    for i in range(0, len(data), step):
        done = p.feed(data[i : i + step])
    return done


@pytest.mark.parametrize("step", [1, 7, 1000])
def test_content_length_response_in_pieces(step: int) -> None:
    p = ResponseParser(1000)
    data = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
    data += b'{"ok":true}'
    assert feed_all(p, data, step)
    assert (p.status, bytes(p.body), p.length, p.keep_alive) == (200, b'{"ok":true}', 11, True)


@pytest.mark.parametrize("step", [1, 5, 1000])
def test_chunked_response(step: int) -> None:
    p = ResponseParser(1000)
    data = (
        b"HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4;ext=1\r\n{"er\r\n9\r\nror":"x"}\r\n0\r\nTrailer: y\r\n\r\n'
    )
    assert feed_all(p, data, step)
    assert (p.status, bytes(p.body)) == (502, b'{"error":"x"}')


def test_interim_response_is_skipped() -> None:
    p = ResponseParser(100)
    assert p.feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    assert (p.status, bytes(p.body)) == (200, b"{}")


def test_read_until_close() -> None:
    p = ResponseParser(100)
    assert not p.feed(b"HTTP/1.0 200 OK\r\n\r\n[1,")
    assert not p.feed(b"2]")
    assert p.feed_eof()
    assert (bytes(p.body), p.keep_alive) == (b"[1,2]", False)


def test_eof_in_the_middle_is_not_a_response() -> None:
    p = ResponseParser(100)
    p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")
    assert not p.feed_eof()


def test_body_beyond_the_limit_is_counted_not_kept() -> None:
    p = ResponseParser(10)
    body = b"x" * 5000
    assert feed_all(p, b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + body, 999)
    assert bytes(p.body) == b"x" * 11 and p.length == 5000 and p.keep_alive


def test_connection_close_header() -> None:
    p = ResponseParser(10)
    assert p.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert not p.keep_alive


@pytest.mark.parametrize(
    "data",
    [
        b"SMTP hello\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
    ],
)
def test_garbage_is_a_bad_http_response(data: bytes) -> None:
    with pytest.raises(BadHttpResponse):
        ResponseParser(10).feed(data)


def test_runtime_parse_head() -> None:
    head = b"POST /run HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    method, path, headers, length, keep_alive = parse_head(head)  # type: ignore[misc]
    assert (method, path, headers["content-length"], keep_alive) == ("POST", "/run", "2", False)
    assert head[length:] == b"{}"
    assert parse_head(b"POST /run HTTP/1.1\r\nHost") is None
    assert parse_head(b"GET / HTTP/1.0\r\n\r\n")[4] is False  # type: ignore[index]
    with pytest.raises(BadRequest):
        parse_head(b"nonsense\r\n\r\n")


# -- the client against scripted servers -----------------------------------------------------


async def serve_once(reply: bytes | None, delay: float = 0.0) -> tuple[asyncio.Server, int]:
    """A server answering each request with ``reply`` (None: close without answering)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                await asyncio.sleep(delay)
                if reply is None:
                    writer.transport.abort()
                    return
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_client_keeps_the_connection_alive() -> None:
    server, port = await serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    async with server:
        client = RuntimeClient("127.0.0.1", port)
        r1 = await client.post_init(b"{}", 5)
        conn = client._conn
        r2 = await client.post_run(b"{}", 5)
        assert (r1.status, r2.body) == (200, b"{}") and client._conn is conn
        client.close()


async def test_client_times_out() -> None:
    server, port = await serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", delay=1.0)
    async with server:
        client = RuntimeClient("127.0.0.1", port)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(TimeoutError):
            await client.post_run(b"{}", 0.2)
        assert 0.19 <= loop.time() - t0 < 0.8
        assert client._conn is None


async def test_client_reports_a_dropped_connection() -> None:
    server, port = await serve_once(None)
    async with server:
        with pytest.raises(ContainerGone):
            await RuntimeClient("127.0.0.1", port).post_run(b"{}", 5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_init_retries_refused_connections_until_the_server_is_up() -> None:
    port = free_port()
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def start_later() -> asyncio.AbstractServer:
        await asyncio.sleep(0.2)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n{}")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()

        return await asyncio.start_server(handle, "127.0.0.1", port)

    task = asyncio.create_task(start_later())
    result = await RuntimeClient("127.0.0.1", port).post_init(b"{}", 5)
    server = await task
    server.close()
    assert result.status == 200 and result.elapsed_s >= 0.19 and loop.time() - t0 < 2


async def test_run_does_not_retry_and_init_gives_up_at_the_deadline() -> None:
    port = free_port()
    with pytest.raises(ContainerGone):
        await RuntimeClient("127.0.0.1", port).post_run(b"{}", 5)
    with pytest.raises(TimeoutError):
        await RuntimeClient("127.0.0.1", port).post_init(b"{}", 0.2)


async def test_concurrent_requests_get_their_own_connections() -> None:
    server, port = await serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", delay=0.1)
    async with server:
        client = RuntimeClient("127.0.0.1", port)
        results = await asyncio.gather(*(client.post_run(b"{}", 5) for _ in range(3)))
        assert [r.status for r in results] == [200, 200, 200]
        kept = client._conn
        assert kept is not None and not kept.closed
        assert (await client.post_run(b"{}", 5)).status == 200 and client._conn is kept
        client.close()
