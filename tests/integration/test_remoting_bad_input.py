"""Malformed frames close only the connection that sent them; the server keeps serving."""

from __future__ import annotations

import random
import socket
import struct
import subprocess
import time
from collections.abc import Iterator

import pytest

from rocketmq_py.remoting import RemotingCommand, ResponseCode, encode_frame
from tests.integration.remoting_server import ECHO
from tests.integration.test_remoting_server import start_server, stop_server


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc, addr = start_server()
    yield proc, int(addr.rsplit(":", 1)[1])
    stop_server(proc)


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(5)
    return s


def _closed_by_peer(s: socket.socket, timeout: float = 5.0) -> bool:
    """True once the server has closed this connection (reads EOF or a reset), bounded."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _echo_ok(port: int, body: bytes = b"ping") -> bool:
    with _connect(port) as s:
        s.sendall(encode_frame(RemotingCommand.request(ECHO, None, body)))
        (length,) = struct.unpack(">i", _recv_exact(s, 4))
        frame = _recv_exact(s, length)
        return frame.endswith(body)


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


BAD_FRAMES = {
    "oversize frame": struct.pack(">iI", 64 * 1024 * 1024, 10),
    "header longer than frame": struct.pack(">iI", 20, 200) + b"x" * 16,
    "unknown serialize type": struct.pack(">iI", 6, (9 << 24) | 2) + b"{}",
    "unparsable JSON header": struct.pack(">iI", 9, 5) + b"{nope",
    "JSON header not an object": struct.pack(">iI", 6, 2) + b"[]",
    "ROCKETMQ header too short": struct.pack(">iI", 8, (1 << 24) | 4) + b"\0\0\0\0",
    "negative length": struct.pack(">iI", -5, 0),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_malformed_frame_closes_only_that_connection(server: tuple[subprocess.Popen[str], int], name: str) -> None:
    proc, port = server
    bystander = _connect(port)
    with _connect(port) as bad:
        bad.sendall(BAD_FRAMES[name])
        assert _closed_by_peer(bad), f"server kept a connection that sent: {name}"
    # The other connection, opened before, still works, and so does a fresh one.
    bystander.sendall(encode_frame(RemotingCommand.request(ECHO, None, b"still-here")))
    (length,) = struct.unpack(">i", _recv_exact(bystander, 4))
    assert _recv_exact(bystander, length).endswith(b"still-here")
    bystander.close()
    assert _echo_ok(port)
    assert proc.poll() is None


def test_request_header_missing_fields_gets_error_not_disconnect(server: tuple[subprocess.Popen[str], int]) -> None:
    # A well-formed frame whose JSON lacks every optional key decodes with Java's defaults
    # (code 0) and is answered, not dropped: code 0 has no processor.
    _, port = server
    with _connect(port) as s:
        s.sendall(struct.pack(">iI", 6, 2) + b"{}")
        (length,) = struct.unpack(">i", _recv_exact(s, 4))
        frame = _recv_exact(s, length)
        assert b'"code":%d' % ResponseCode.REQUEST_CODE_NOT_SUPPORTED in frame


@pytest.mark.slow
def test_thousands_of_random_and_mutated_frames(server: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = server
    rng = random.Random(20261122)
    good = [encode_frame(RemotingCommand.request(ECHO, {"topic": "T", "queueId": "1"}, b"body" * 10,
                                                 serialize_type=st)) for st in (0, 1, 2)]
    deadline = time.monotonic() + 60
    sent = 0
    conns: list[socket.socket] = []
    while sent < 3000 and time.monotonic() < deadline:
        if not conns or rng.random() < 0.1:
            conns.append(_connect(port))
        s = conns[-1]
        kind = rng.random()
        if kind < 0.4:
            frame = bytearray(rng.choice(good))
            for _ in range(rng.randint(1, 6)):
                frame[rng.randrange(len(frame))] = rng.randrange(256)
            data = bytes(frame)
        elif kind < 0.7:
            data = rng.randbytes(rng.randint(1, 300))
        elif kind < 0.85:
            data = rng.choice(good)[: rng.randint(1, 60)]
        else:
            data = rng.choice(good)
        try:
            s.sendall(data)
        except OSError:
            conns.pop().close()
        sent += 1
        if len(conns) > 20:
            conns.pop(0).close()
    for s in conns:
        s.close()
    assert sent >= 3000, "bounded loop did not finish its count in time"
    assert proc.poll() is None, "server process died"
    assert _echo_ok(port, b"after-the-storm")
