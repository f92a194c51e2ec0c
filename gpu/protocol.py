"""Length-prefixed frames: a JSON header plus an optional binary payload.

Used between actions and the pool server and between the pool and its device workers. Only
the standard library, so the client side runs inside any action runtime that has torch.
Frame: ``>I`` header length, UTF-8 JSON header, ``>Q`` payload length, payload bytes. Both
lengths are bounded so a broken peer cannot make the reader allocate without limit.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import Any, BinaryIO

MAX_HEADER = 1 << 20
DEFAULT_MAX_PAYLOAD = 512 << 20
_HDR = struct.Struct(">I")
_PAY = struct.Struct(">Q")


class FrameError(RuntimeError):
    """The peer sent a malformed or oversized frame."""


def encode(header: dict[str, Any], payload: bytes | memoryview = b"") -> list[bytes | memoryview]:
    h = json.dumps(header, separators=(",", ":")).encode()
    if len(h) > MAX_HEADER:
        raise FrameError(f"header of {len(h)} bytes exceeds {MAX_HEADER}")
    return [_HDR.pack(len(h)), h, _PAY.pack(len(payload)), payload]


def _check(hlen: int, plen: int | None, max_payload: int) -> None:
    if hlen > MAX_HEADER:
        raise FrameError(f"header of {hlen} bytes exceeds {MAX_HEADER}")
    if plen is not None and plen > max_payload:
        raise FrameError(f"payload of {plen} bytes exceeds the limit of {max_payload}")


async def read_frame(
    reader: asyncio.StreamReader, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> tuple[dict[str, Any], bytes]:
    """Read one frame; raises asyncio.IncompleteReadError at a clean EOF."""
    (hlen,) = _HDR.unpack(await reader.readexactly(_HDR.size))
    _check(hlen, None, max_payload)
    header = json.loads(await reader.readexactly(hlen))
    (plen,) = _PAY.unpack(await reader.readexactly(_PAY.size))
    _check(hlen, plen, max_payload)
    payload = await reader.readexactly(plen) if plen else b""
    return header, payload


async def write_frame(
    writer: asyncio.StreamWriter, header: dict[str, Any], payload: bytes | memoryview = b""
) -> None:
    writer.writelines(encode(header, payload))
    await writer.drain()


def _read_exact(read: Any, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        b = read(n - got)
        if not b:
            raise EOFError("connection closed")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_frame_sync(
    stream: BinaryIO | socket.socket, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> tuple[dict[str, Any], bytes]:
    read = stream.recv if isinstance(stream, socket.socket) else stream.read
    (hlen,) = _HDR.unpack(_read_exact(read, _HDR.size))
    _check(hlen, None, max_payload)
    header = json.loads(_read_exact(read, hlen))
    (plen,) = _PAY.unpack(_read_exact(read, _PAY.size))
    _check(hlen, plen, max_payload)
    return header, _read_exact(read, plen) if plen else b""


def write_frame_sync(
    stream: BinaryIO | socket.socket, header: dict[str, Any], payload: bytes | memoryview = b""
) -> None:
    parts = encode(header, payload)
    if isinstance(stream, socket.socket):
        stream.sendall(b"".join(bytes(p) if isinstance(p, memoryview) else p for p in parts[:3]))
        if payload:
            stream.sendall(payload)
    else:
        for p in parts:
            stream.write(p)
        stream.flush()


def parse_address(address: str) -> tuple[str, str | tuple[str, int]]:
    """``unix:/path``, ``/path`` → ("unix", path); ``tcp:127.0.0.1:7000``, ``host:port`` → tcp."""
    a = address.strip()
    if a.startswith("unix:"):
        return "unix", a[5:]
    if a.startswith("/"):
        return "unix", a
    if a.startswith("tcp:"):
        a = a[4:]
    host, _, port = a.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad GPU pool address {address!r}: use unix:/path or tcp:HOST:PORT")
    return "tcp", (host, int(port))


def connect_sync(address: str, timeout: float | None = None) -> socket.socket:
    kind, target = parse_address(address)
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(timeout)
    s.connect(target)
    return s
