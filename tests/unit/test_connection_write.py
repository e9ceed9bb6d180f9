"""How a connection hands a turn's frames to its transport: large ``bytes`` bodies beside their
heads (no joined copy), everything else joined into one write."""

from __future__ import annotations

import asyncio

import pytest

from rocketmq_py.common.build import compiled
from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.connection import WRITE_APART_FROM, RemotingConnection
from rocketmq_py.remoting.frame import FrameDecoder, encode_frame
from rocketmq_py.remoting.processor import ProcessorTable


class _Transport:
    """A transport that keeps each call: ("write", data) or ("writelines", [parts])."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def write(self, data: bytes) -> None:
        self.calls.append(("write", data))

    def writelines(self, parts: list[bytes]) -> None:
        self.calls.append(("writelines", list(parts)))

    def get_extra_info(self, name: str) -> tuple[str, int]:
        return ("127.0.0.1", 1)

    def is_closing(self) -> bool:
        return False

    def stream(self) -> bytes:
        out = bytearray()
        for kind, data in self.calls:
            for part in data if kind == "writelines" else [data]:  # type: ignore[attr-defined]
                out += part
        return bytes(out)


def _connection() -> tuple[RemotingConnection, _Transport]:
    conn = RemotingConnection(ProcessorTable())
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def _command(n: int, body: object) -> RemotingCommand:
    return RemotingCommand.request(10, {"n": str(n)}, body)  # type: ignore[arg-type]


async def test_a_large_bytes_body_is_written_as_it_is() -> None:
    conn, transport = _connection()
    small = _command(1, b"x" * 100)
    large = _command(2, bytes(range(256)) * (WRITE_APART_FROM // 256 * 16))
    for cmd in (small, large, _command(3, None)):
        conn.write_command(cmd)
    conn.flush()
    assert [kind for kind, _ in transport.calls] == ["writelines"]
    parts = transport.calls[0][1]
    assert any(part is large.body for part in parts)  # type: ignore[attr-defined]
    expected = [encode_frame(_command(1, b"x" * 100)), encode_frame(_command(2, large.body)),
                encode_frame(_command(3, None))]
    decoded = FrameDecoder().feed(transport.stream())
    assert [(c.ext_fields, c.body) for c in decoded] == [(c.ext_fields, c.body) for c in
                                                        (FrameDecoder().feed(b"".join(expected)))]
    # the next turn, small frames only, is one joined write again
    conn.write_command(_command(4, b"y"))
    conn.write_command(_command(5, b"z"))
    conn.flush()
    assert transport.calls[1][0] == "write"


async def test_small_frames_are_joined_into_one_write() -> None:
    conn, transport = _connection()
    for i in range(5):
        conn.write_command(_command(i, b"b" * (WRITE_APART_FROM - 1)))
    conn.flush()
    assert [kind for kind, _ in transport.calls] == ["write"]
    assert [c.body for c in FrameDecoder().feed(transport.stream())] == [b"b" * (WRITE_APART_FROM - 1)] * 5


@pytest.mark.skipif(compiled(), reason="the compiled RemotingCommand holds bytes bodies only")
@pytest.mark.parametrize("kind", ["bytearray", "memoryview"])
async def test_a_large_body_that_is_not_bytes_is_copied_into_the_write(kind: str) -> None:
    """The transport may keep what it has not sent: a view of a buffer the caller goes on using
    must not be among it (a later change would be sent, a resize or close would fail)."""
    conn, transport = _connection()
    data = bytearray(b"q" * (2 * WRITE_APART_FROM))
    body = data if kind == "bytearray" else memoryview(data)
    conn.write_command(_command(1, body))
    conn.write_command(_command(2, b"r" * (2 * WRITE_APART_FROM)))  # a bytes one beside it
    conn.flush()
    assert [k for k, _ in transport.calls] == ["write"]
    assert transport.calls[0][1].__class__ is bytes
    data[:] = b"Z" * len(data)  # changed after the write: what was written stays
    if isinstance(body, memoryview):
        body.release()  # the caller's own view (BufferError if a view of it were kept)
    data.clear()  # and the buffer can be resized: nothing kept a view of it
    assert [c.body for c in FrameDecoder().feed(transport.stream())] == [b"q" * (2 * WRITE_APART_FROM),
                                                                       b"r" * (2 * WRITE_APART_FROM)]


async def test_large_frames_round_trip_through_a_socket() -> None:
    """The real transport's writelines (uvloop's, under the daemons) delivers the frames whole and
    in order, interleaved with small ones, with more queued than the socket takes at once."""
    received: asyncio.Queue[RemotingCommand] = asyncio.Queue()

    class _Sink(asyncio.BufferedProtocol):
        def __init__(self) -> None:
            self.decoder = FrameDecoder()

        def get_buffer(self, sizehint: int) -> memoryview:
            return self.decoder.get_buffer()

        def buffer_updated(self, nbytes: int) -> None:
            for cmd in self.decoder.buffer_updated(nbytes):
                received.put_nowait(cmd)

    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Sink, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport, conn = await loop.create_connection(lambda: RemotingConnection(ProcessorTable()), "127.0.0.1", port)
    try:
        bodies = [bytes([i]) * ((1 << 20) + i) if i % 3 else bytes([i]) * 10 for i in range(24)]
        for i, body in enumerate(bodies):
            conn.write_command(_command(i, body))
        got = [await asyncio.wait_for(received.get(), 20) for _ in bodies]
        assert [(c.ext_fields or {}).get("n") for c in got] == [str(i) for i in range(len(bodies))]
        assert [c.body for c in got] == bodies
    finally:
        transport.close()
        server.close()
        await server.wait_closed()


async def test_frames_queued_on_many_connections_leave_at_the_end_of_the_turn() -> None:
    """One end-of-turn callback for the loop writes every connection's frames, one write each."""
    pairs = [_connection() for _ in range(3)]
    for i, (conn, _) in enumerate(pairs):
        conn.write_command(_command(i, b"a"))
        conn.write_command(_command(i + 10, b"b"))
    assert all(not transport.calls for _, transport in pairs), "nothing before the turn ends"
    await asyncio.sleep(0)  # the turn's end was scheduled before this task's wake-up
    for i, (_, transport) in enumerate(pairs):
        assert [kind for kind, _ in transport.calls] == ["write"]
        assert [c.ext_fields for c in FrameDecoder().feed(transport.stream())] == [{"n": str(i)}, {"n": str(i + 10)}]
    # a connection closed before its turn ends writes nothing, and the others still do
    (first, t1), (second, t2) = _connection(), _connection()
    first.write_command(_command(1, b"x"))
    second.write_command(_command(2, b"y"))
    first.connection_lost(None)
    await asyncio.sleep(0)
    assert not t1.calls and [kind for kind, _ in t2.calls] == ["write"]
    second.write_command(_command(3, b"z"))  # and the next turn is flushed afresh
    await asyncio.sleep(0)
    assert len(t2.calls) == 2


async def test_calls_of_one_turn_on_many_connections_time_out_each() -> None:
    """Sync calls written in one turn with one timeout share a timer across connections: each
    unanswered call still times out with its own connection's address, an answered one does not,
    and a call with another timeout in the same turn keeps its own."""
    from rocketmq_py.remoting.exceptions import RemotingTimeoutError

    conns = [_connection()[0] for _ in range(4)]
    for i, conn in enumerate(conns):
        conn.remote_addr = f"127.0.0.1:{i + 1}"
    requests = [_command(i, b"q") for i in range(4)]
    futures = [conn.invoke(req, 10.0 if i == 2 else 0.05)
               for i, (conn, req) in enumerate(zip(conns, requests, strict=True))]
    batches = {conn._pending[req.opaque].batch for conn, req in zip(conns, requests, strict=True)}
    assert len(batches) == 3, "0 and 1 share a timer; 2's timeout opens another; 3 another again"
    conns[1].data_received(encode_frame(requests[1].response(body=b"answer")))
    assert (await asyncio.wait_for(futures[1], 1)).body == b"answer"
    for i in (0, 3):
        with pytest.raises(RemotingTimeoutError, match=f"127.0.0.1:{i + 1}"):
            await asyncio.wait_for(futures[i], 2)
        assert conns[i].pending_count == 0
    assert not futures[2].done(), "its own 10 s timeout, not the others'"
    conns[2].connection_lost(None)  # a closed connection fails what it has pending
    with pytest.raises(Exception, match="closed"):
        await asyncio.wait_for(futures[2], 1)
