"""One remoting connection, used by both servers and clients.

Requests and responses interleave in both directions on one TCP connection (docs/protocol.md#transport):
a broker answers a producer's sends and, on the same connection, asks it about transactions.
So one ``asyncio.Protocol`` does both jobs: incoming frames with the RESPONSE bit complete an
entry of this connection's response table (opaque -> pending call); the others go to the
owner's processor table.

Writes are coalesced: every frame produced during one turn of the event loop goes out in one
``transport.write`` at the end of the turn, which is what lets 64 requests in flight cost far
less than 64 system calls. When the peer stops reading and the transport's buffer passes its
high-water mark, this side stops reading too, so a slow peer cannot make memory grow.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr

from rocketmq_py.common.busy_poll import BusyPoller
from rocketmq_py.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand
from rocketmq_py.remoting.exceptions import (
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from rocketmq_py.remoting.frame import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, FrameError, encode_frame_head

if TYPE_CHECKING:
    from rocketmq_py.remoting.processor import ProcessorTable

log = logging.getLogger("rocketmq.remoting")

# A callback of invoke_async: exactly one of (response, error) is set.
InvokeCallback = Callable[[RemotingCommand | None, BaseException | None], None]

# Java's client caps async and oneway requests with 65535-permit semaphores; the same bound keeps
# a response table from growing without limit when a peer stops answering.
DEFAULT_MAX_PENDING = 65535

# Frames are written in batches: at the end of the loop turn, or as soon as this many are queued.
# The early flush lets the peer start on the first frames while this side encodes the rest, so
# the two processes of a pipelined exchange work in parallel instead of in lock-step.
FLUSH_BATCH = 16

# ``bytes`` bodies from this size on are handed to the transport beside their frame's head, not
# joined with the turn's other frames into one bytes: the join is a copy of every such body (a
# 1 MiB send's, a batch of 32 x 1 KiB's 36 KiB), where the transport writes the parts with one
# writev (uvloop's writelines). A part handed over costs uvloop about what copying 4 KiB does (16
# frames written to a loopback socket and read back, per frame: 4 KiB 1.3 us either way, 16 KiB
# 3.6 -> 3.2, 36 KiB 6.9 -> 6.0), so smaller bodies are still joined. Only ``bytes``: the
# transport keeps what it has not sent yet, and a view of a bytearray or a mapping kept there
# would change with it, or keep it from being resized or closed.
WRITE_APART_FROM = 16 * 1024

# Sync calls expire by their own timer; only async calls are left to the periodic scan.
_NO_DEADLINE = float("inf")


class _TimeoutBatch:
    """Sync calls written in one loop turn with one timeout share one timer, whichever of the
    loop's connections they went out on.

    A timer per call (create, then cancel on the answer) costs as much as encoding the request;
    at 64 calls in flight one timer now serves them all. Its deadline is the first call's, so
    later calls of the same turn may time out microseconds early, never late. Shared by the
    connections too: with one call per connection per turn (1,000 producers' connections in one
    process, bench/scale.py's conns part) a batch per connection was a timer per call again.
    """

    __slots__ = ("conns", "opaques", "remaining", "timeout", "timer")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.conns: list[RemotingConnection] = []
        self.opaques: list[int] = []
        self.remaining = 0
        self.timer: asyncio.TimerHandle | None = None


class _Turn:
    """What one event loop's turn shares among its connections: the connections with frames
    queued, written by one callback at the end of the turn (not one callback per connection),
    and the sync calls' open timeout batch, closed by the same callback."""

    __slots__ = ("batch", "dirty", "scheduled")

    def __init__(self) -> None:
        self.batch: _TimeoutBatch | None = None
        self.dirty: list[RemotingConnection] = []
        self.scheduled = False

    def end(self) -> None:
        self.scheduled = False
        self.batch = None
        dirty = self.dirty
        if dirty:
            self.dirty = []
            for conn in dirty:
                conn._end_of_turn_flush()


# A loop's turn, by the loop's id, with a weak reference to the loop to tell a loop that reused a
# dead one's id; the turn holds nothing of its loop, so neither keeps the other alive.
_turns: dict[int, tuple[weakref.ref[asyncio.AbstractEventLoop], _Turn]] = {}


def _turn_of(loop: asyncio.AbstractEventLoop) -> _Turn:
    known = _turns.get(id(loop))
    if known is not None and known[0]() is loop:
        return known[1]
    # Loops on other threads make theirs too: the items copied at once, each dead one dropped alone.
    for key, (ref, _) in list(_turns.items()):
        if ref() is None:
            _turns.pop(key, None)
    turn = _Turn()
    _turns[id(loop)] = (weakref.ref(loop), turn)
    return turn


class _Pending:
    __slots__ = ("batch", "callback", "deadline", "future", "timeout")

    def __init__(self, future: asyncio.Future[RemotingCommand] | None, callback: InvokeCallback | None,
                 timeout: float, deadline: float) -> None:
        self.future = future
        self.callback = callback
        self.timeout = timeout
        self.deadline = deadline
        self.batch: _TimeoutBatch | None = None

    def complete(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        batch = self.batch
        if batch is not None:
            batch.remaining -= 1
            if batch.remaining == 0 and batch.timer is not None:
                batch.timer.cancel()
        if self.future is not None:
            if not self.future.done():
                if error is not None:
                    self.future.set_exception(error)
                else:
                    # type-ignored: response is set whenever error is None
                    self.future.set_result(response)  # type: ignore[arg-type]
        elif self.callback is not None:
            try:
                self.callback(response, error)
            except Exception:
                log.exception("invoke callback raised")


# subclassed outside the compiled modules (mypyc's build, setup.py)
@mypyc_attr(allow_interpreted_subclasses=True)
class ConnectionEvents:
    """What an owner (server or client) hears about its connections."""

    def on_connect(self, conn: RemotingConnection) -> None: ...
    def on_close(self, conn: RemotingConnection) -> None: ...
    def on_idle(self, conn: RemotingConnection) -> None: ...
    def on_exception(self, conn: RemotingConnection, exc: BaseException) -> None: ...


# subclassed outside the compiled modules (tests' stand-ins for a live channel)
@mypyc_attr(allow_interpreted_subclasses=True)
class RemotingConnection(asyncio.BufferedProtocol):
    def __init__(self, processors: ProcessorTable, events: ConnectionEvents | None = None, *,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 max_pending: int = DEFAULT_MAX_PENDING, poller: BusyPoller | None = None) -> None:
        self._processors = processors
        self._poller = poller
        self._events = events
        self._decoder = FrameDecoder(max_frame_size)
        self._pending: dict[int, _Pending] = {}
        self._max_pending = max_pending
        self._wbuf: list[bytes] = []
        self._wframes = 0
        # Whether ``_wbuf`` holds a body of WRITE_APART_FROM bytes or more.
        self._wlarge = False
        self._flush_scheduled = False
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._turn = _turn_of(self._loop)
        self._closed = self._loop.create_future()
        self._close_reason = "connection closed"
        self.remote_addr = "?"
        self.local_addr = "?"
        self.last_activity = time.monotonic()
        # The serialization this side's requests are written in, when not the caller's own
        # (the SDK's msgpack with a peer that offered it); None keeps each request's.
        self.request_serialize_type: int | None = None
        # Room for owners' per-channel state (client id, language, ...).
        self.attributes: dict[str, Any] = {}

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # type-ignored: asyncio hands a stream protocol a Transport, typed as its base
        self._transport = transport  # type: ignore[assignment]
        self.remote_addr = _fmt_addr(transport.get_extra_info("peername"))
        self.local_addr = _fmt_addr(transport.get_extra_info("sockname"))
        if self._events:
            self._events.on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        # The decoder's: a large body is read straight into its own buffer (FrameDecoder.get_buffer).
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._read(None, nbytes)

    def data_received(self, data: bytes) -> None:
        """Bytes read by the caller (the transports read through ``get_buffer``; tests feed frames here)."""
        self._read(data, 0)

    def _read(self, data: bytes | None, nbytes: int) -> None:
        """One read: ``data`` when the caller read it, else ``nbytes`` into the decoder's buffer."""
        self.last_activity = time.monotonic()
        poller = self._poller
        if poller is not None:
            poller.begin()
        try:
            commands = self._decoder.buffer_updated(nbytes) if data is None else self._decoder.feed(data)
        except FrameError as exc:
            log.warning("closing connection %s: malformed frame: %s", self.remote_addr, exc)
            if self._events:
                self._events.on_exception(self, exc)
            self.abort(f"malformed frame: {exc}")
            return
        if len(commands) == 1 and not commands[0].flag & RPC_TYPE_RESPONSE:
            self._processors.dispatch(self, commands[0])  # one request in flight: the common read
        else:
            self._handle(commands)
        if self._wbuf:
            # Answers produced inline (most requests) leave now rather than one loop turn
            # later: at one request in flight that turn is a good part of the round trip.
            self._flush()
        if poller is not None:
            poller.end()

    def _handle(self, commands: list[RemotingCommand]) -> None:
        """Requests go to the processors a run at a time (a read of pipelined sends is stored in
        one write), each run ending where a response comes, so the order of the two holds."""
        pending = self._pending
        requests: list[RemotingCommand] = []
        for cmd in commands:
            if cmd.flag & RPC_TYPE_RESPONSE:
                if requests:
                    self._processors.dispatch_all(self, requests)
                    requests = []
                entry = pending.pop(cmd.opaque, None)
                if entry is None:
                    log.debug("response with unknown opaque %s from %s dropped", cmd.opaque, self.remote_addr)
                else:
                    entry.complete(cmd, None)
            else:
                requests.append(cmd)
        if requests:
            self._processors.dispatch_all(self, requests)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = self._close_reason if exc is None else f"{self._close_reason}: {exc}"
        self._transport = None
        self._wbuf.clear()
        self._wlarge = False
        self._decoder.close()
        if not self._closed.done():
            self._closed.set_result(None)
        self._fail_all(reason)
        if self._events:
            self._events.on_close(self)

    def pause_writing(self) -> None:
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    # -- state ------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    def close(self, reason: str = "connection closed") -> None:
        self._close_reason = reason
        if self._transport is not None:
            self._flush()
            self._transport.close()

    def abort(self, reason: str) -> None:
        self._close_reason = reason
        if self._transport is not None:
            self._transport.abort()

    # -- writing ----------------------------------------------------------------------------

    def write_command(self, cmd: RemotingCommand) -> None:
        """Queue one frame; it is written at the end of this event-loop turn.

        The frame is encoded here, in the caller's call: a command that cannot be encoded (a
        ``str`` body, a header the serializer refuses) raises to its caller and queues nothing,
        so the shared write of this turn never meets it."""
        if self._transport is None:
            raise RemotingSendRequestError(self.remote_addr, self._close_reason)
        head = encode_frame_head(cmd)
        wbuf = self._wbuf
        wbuf.append(head)
        body = cmd.body
        if body:
            wbuf.append(body)
            if len(body) >= WRITE_APART_FROM and body.__class__ is bytes:
                self._wlarge = True
        self._wframes += 1
        if self._wframes >= FLUSH_BATCH:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            turn = self._turn
            turn.dirty.append(self)
            if not turn.scheduled:
                turn.scheduled = True
                self._loop.call_soon(turn.end)

    def flush(self) -> None:
        """Write what is queued now, not at the end of the turn (an answer that should overtake
        the ones being produced in this turn)."""
        self._flush()

    def _end_of_turn_flush(self) -> None:
        self._flush_scheduled = False
        self._flush()

    def _flush(self) -> None:
        wbuf = self._wbuf
        if not wbuf or self._transport is None:
            return
        self._wframes = 0
        self.last_activity = time.monotonic()
        if self._wlarge:
            self._wlarge = False
            if all(part.__class__ is bytes for part in wbuf):
                # Written as they are: the list goes to the transport, which takes its items at once.
                self._wbuf = []
                self._transport.writelines(wbuf)
                return
        data = wbuf[0] if len(wbuf) == 1 else b"".join(wbuf)
        wbuf.clear()
        self._transport.write(data)

    # -- calls ------------------------------------------------------------------------------

    def _stamp(self, request: RemotingCommand) -> None:
        """Every way a request leaves writes it in the connection's serialization, if it has one."""
        if self.request_serialize_type is not None:
            request.serialize_type = self.request_serialize_type

    def _register(self, opaque: int, entry: _Pending) -> None:
        if self._transport is None:
            raise RemotingSendRequestError(self.remote_addr, self._close_reason)
        if len(self._pending) >= self._max_pending:
            raise RemotingTooMuchRequestError(
                f"{len(self._pending)} requests already awaiting answers from {self.remote_addr}")
        self._pending[opaque] = entry

    def invoke(self, request: RemotingCommand, timeout: float) -> asyncio.Future[RemotingCommand]:
        """Send a request; the returned future gets its response, or RemotingTimeoutError after
        ``timeout`` seconds, or RemotingSendRequestError if the connection closes first.

        A plain future rather than a coroutine: awaiting it costs the caller no extra frame, and
        a caller that gives up (cancels) leaves an entry that its timer removes.
        """
        fut: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._stamp(request)
        opaque = request.opaque
        entry = _Pending(fut, None, timeout, _NO_DEADLINE)
        self._register(opaque, entry)
        try:
            self.write_command(request)
        except BaseException:
            del self._pending[opaque]  # never written: nothing will answer it
            raise
        turn = self._turn
        batch = turn.batch
        if batch is None or batch.timeout != timeout:
            batch = turn.batch = _TimeoutBatch(timeout)
            batch.timer = self._loop.call_later(timeout, _expire_batch, batch)
            if not turn.scheduled:  # write_command has scheduled the turn's end; kept certain here
                turn.scheduled = True
                self._loop.call_soon(turn.end)
        batch.conns.append(self)
        batch.opaques.append(opaque)
        batch.remaining += 1
        entry.batch = batch
        return fut

    def invoke_async(self, request: RemotingCommand, timeout: float, callback: InvokeCallback) -> None:
        """Send a request; ``callback`` runs with the response, or with the error once the
        periodic scan finds it past its timeout (as Java's scanResponseTable does)."""
        self._stamp(request)
        self._register(request.opaque, _Pending(None, callback, timeout, time.monotonic() + timeout))
        try:
            self.write_command(request)
        except BaseException:
            self._pending.pop(request.opaque, None)
            raise

    def invoke_oneway(self, request: RemotingCommand) -> None:
        self._stamp(request)
        request.mark_oneway()
        self.write_command(request)

    def _expire(self, opaque: int) -> None:
        entry = self._pending.pop(opaque, None)
        if entry is not None:
            entry.complete(None, RemotingTimeoutError(self.remote_addr, entry.timeout))

    def scan_expired(self, now: float) -> int:
        """Fail every pending call past its deadline; returns how many were failed."""
        expired = [op for op, e in self._pending.items() if e.deadline <= now]
        for op in expired:
            self._expire(op)
        return len(expired)

    def _fail_all(self, reason: str) -> None:
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            entry.complete(None, RemotingSendRequestError(self.remote_addr, reason))


def _expire_batch(batch: _TimeoutBatch) -> None:
    for conn, opaque in zip(batch.conns, batch.opaques, strict=True):
        pending = conn._pending
        entry = pending.get(opaque)
        if entry is not None and entry.batch is batch:
            del pending[opaque]
            entry.batch = None
            entry.complete(None, RemotingTimeoutError(conn.remote_addr, entry.timeout))


def _fmt_addr(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        host = addr[0]
        return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"
    return str(addr)
