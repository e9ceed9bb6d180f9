"""Sans-IO framing: bytes in, commands out; command in, one frame out. No sockets here.

Frame layout (docs/protocol.md#frame-layout)::

    int32 totalLength (= 4 + headerLength + bodyLength, excludes itself)
    int32 serializeType << 24 | headerLength
    header bytes, then body bytes

The decoder keeps one ``bytearray`` and a read position, in the manner of h11's receive buffer:
whole frames are cut out as they complete and the consumed prefix is dropped in one move per
``feed`` rather than once per frame. Every length is checked before it is trusted, so a hostile
peer cannot make the buffer grow past one maximum frame or make a decoder read out of bounds.

A connection reads into the decoder's buffers (``get_buffer``, ``buffer_updated``: asyncio's
BufferedProtocol): a large body's bytes go from the socket straight into the storage of the
``bytes`` object the command then holds as its body, where reads handed over as bytes were copied
out of the loop's read buffer and then joined (1 MiB sends: 305-369 -> 268-292 µs of the receiving
thread per frame), and, later, read into a reused buffer and copied out of it once (``_new_body``).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable

from rocketmq_py.remoting.command import RemotingCommand
from rocketmq_py.remoting.serializer import DECODERS, ENCODERS, HeaderDecodeError

# Java's frame decoder rejects 4 + totalLength above 16 MiB (com.rocketmq.remoting.frameMaxLength).
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024

_PREFIX = struct.Struct(">iI")

# Frames from this size on whose body is still to come are collected as the reads come (their
# pieces kept as they are) and their body joined once, not grown in the held buffer.
COLLECT_FROM = 64 * 1024


# What one read of a buffered protocol takes at most when no large body is being collected (as
# uvloop reads for a data_received protocol): one buffer per thread, since a read's bytes are
# copied out of it before the thread's next read.
READ_SIZE = 256 * 1024
# What the read after a large body takes at most: the next frame's head, and what follows it,
# goes through the read buffer and is copied twice (out of it, then into the next body's storage),
# so behind a large frame, likely followed by another (a producer of large messages), it reads
# little; the read after it takes READ_SIZE again.
READ_AFTER_LARGE = 4 * 1024
_reads = threading.local()


def _read_buffer() -> memoryview:
    """This thread's buffer for reads that are not a large body's."""
    view: memoryview | None = getattr(_reads, "view", None)
    if view is None:
        view = _reads.view = memoryview(bytearray(READ_SIZE))
    return view


# Bytes of large bodies a thread may have taken buffers for while they are still coming (their
# senders' declared lengths). Past it a body is collected from its reads as ``feed`` collects it,
# so peers that send only headers cannot make a daemon take more memory than they send.
BODY_BUFFER_BUDGET = 64 * 1024 * 1024


def _reserve(size: int) -> bool:
    taken: int = getattr(_reads, "taken", 0)
    if taken + size > BODY_BUFFER_BUDGET:
        return False
    _reads.taken = taken + size
    return True


def _release(size: int) -> None:
    _reads.taken = getattr(_reads, "taken", 0) - size


# Where a bytes object's bytes lie in it, in CPython (its basic size counts the final NUL).
_BYTES_DATA = bytes.__basicsize__ - 1


def _bytes_storage(body: bytes) -> memoryview:
    """A writable view of ``body``'s bytes."""
    return memoryview((ctypes.c_char * len(body)).from_address(id(body) + _BYTES_DATA)).cast("B")


def _unfilled_bytes_maker() -> Callable[[None, int], bytes] | None:
    """CPython's own constructor of a bytes object whose bytes are left to the caller to fill
    (``PyBytes_FromStringAndSize(NULL, size)``), when this interpreter has it and its bytes
    objects hold their bytes where ``_bytes_storage`` looks: read there first, then written."""
    known = b"rocketmq-py body"
    try:
        if ctypes.string_at(id(known) + _BYTES_DATA, len(known)) != known:
            return None
        make = ctypes.pythonapi.PyBytes_FromStringAndSize
        make.restype = ctypes.py_object
        make.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
        probe = make(None, len(known))
        with _bytes_storage(probe) as view:
            view[:] = known
    except (AttributeError, TypeError, ValueError, OSError):
        return None
    return make if probe == known else None


_new_bytes = _unfilled_bytes_maker()


def _new_body(size: int) -> tuple[bytes | bytearray, memoryview]:
    """A large body's storage and a writable view of it for its reads.

    In CPython the storage is the ``bytes`` object the command gets, made unfilled and filled by
    the reads through the view before anything else sees it, as C code fills the bytes it makes:
    reading into a bytearray meant one more copy of every large body, into the command's bytes
    (1 MiB sends at 8 in flight: 10% of the broker's event loop, ``memmove``). A bytearray
    elsewhere, copied into bytes once full."""
    if _new_bytes is not None:
        body = _new_bytes(None, size)
        return body, _bytes_storage(body)
    buffer = bytearray(size)
    return buffer, memoryview(buffer)


class FrameError(ValueError):
    """The byte stream is not a valid sequence of frames; the connection must be closed."""


def frame_body(body: object) -> bytes | bytearray | memoryview:
    """``body`` as the bytes a frame carries: bytes and bytearrays as they are, any other buffer
    as a flat view of its bytes. Anything else (a ``str``...) raises TypeError here, where the
    command is encoded, rather than in the join of a later write that other frames share."""
    if isinstance(body, bytes | bytearray):
        return body
    try:
        # type-ignored: any object is tried as a buffer; TypeError below says which is not one
        view = memoryview(body)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"a remoting command body must be bytes-like, not {type(body).__name__}") from None
    if not view.c_contiguous:
        raise TypeError("a remoting command body must be a contiguous buffer")
    return view if view.ndim == 1 and view.format == "B" else view.cast("B")


def encode_frame_head(cmd: RemotingCommand) -> bytes:
    """The length prefix and header of a command's frame; its body follows as is.

    Kept apart from the body so a writer can hand both to one ``join`` without first copying
    a large body into a frame of its own. A body that is not ``bytes`` is replaced by
    ``frame_body``'s view of it, so the length written is its length in bytes; one that has no
    bytes raises TypeError, and nothing is written.
    """
    body = cmd.body
    if body is not None and body.__class__ is not bytes:
        # the written view of a buffer body; commands read off the wire only ever hold bytes
        body = cmd.body = frame_body(body)  # type: ignore[assignment]
    header = ENCODERS[cmd.serialize_type](cmd)
    hlen = len(header)
    if hlen > 0xFFFFFF:
        raise FrameError(f"header of {hlen} bytes does not fit the 24-bit length field")
    return _PREFIX.pack(4 + hlen + (len(body) if body else 0), (cmd.serialize_type << 24) | hlen) + header


def encode_frame(cmd: RemotingCommand) -> bytes:
    head = encode_frame_head(cmd)
    return head + cmd.body if cmd.body else head


class FrameDecoder:
    """Feed bytes in any chunking; get whole commands back in order.

    Read one way: ``feed`` (bytes the caller read), or ``get_buffer`` and ``buffer_updated``
    (reads into the decoder's own buffers, as asyncio's BufferedProtocol does)."""

    __slots__ = ("_after_large", "_buf", "_cmd", "_filled", "_into", "_into_view", "_need", "_parts", "_pos",
                 "collect_from", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, collect_from: int = COLLECT_FROM) -> None:
        self.max_frame_size = max_frame_size
        self.collect_from = collect_from
        self._buf = bytearray()
        self._pos = 0
        # A large frame whose header is decoded and whose body is still coming: the command,
        # the body's pieces so far and the bytes it still needs.
        self._cmd: RemotingCommand | None = None
        self._parts: list[bytes | memoryview] = []
        self._need = 0
        # Read through ``get_buffer``: the large body being collected, read into its own storage
        # (``_new_body``) through a writable view of it, and how much of it is in.
        self._into: bytes | bytearray | None = None
        self._into_view: memoryview | None = None
        self._filled = 0
        # Whether the last read completed a large body (READ_AFTER_LARGE).
        self._after_large = False

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete."""
        into = self._filled if self._into is not None else 0
        return len(self._buf) - self._pos + sum(map(len, self._parts)) + into

    # -- reading into the decoder's buffers (asyncio.BufferedProtocol) --------------------------

    def get_buffer(self) -> memoryview:
        """Where the next read goes: the rest of a large body being collected, so the socket's
        bytes land in it without passing through a read buffer and a join; else this thread's
        read buffer, handed back to ``buffer_updated`` before the next read."""
        view = self._into_view
        if view is not None:
            return view[self._filled:]
        if self._after_large:
            return _read_buffer()[:READ_AFTER_LARGE]
        return _read_buffer()

    def buffer_updated(self, nbytes: int) -> list[RemotingCommand]:
        """The commands completed by ``nbytes`` read into ``get_buffer``'s buffer."""
        into = self._into
        if into is None:
            self._after_large = False
            # The read buffer itself: what is kept of it (bodies, headers, a frame's start) is
            # copied out, each byte once, not the whole read first and then each part again.
            return self._feed(_read_buffer()[:nbytes], True)
        filled = self._filled + nbytes
        self._need -= nbytes
        if self._need > 0:
            self._filled = filled
            return []
        cmd = self._cmd
        assert cmd is not None
        cmd.body = into if into.__class__ is bytes else bytes(into)  # commands hold bytes
        self._cmd = None
        self._into = self._into_view = None
        self._filled = 0
        self._after_large = True
        _release(filled)
        return [cmd]

    def close(self) -> None:
        """What is held for a frame not yet complete, let go (its connection is closed)."""
        if self._into_view is not None:
            _release(self._filled + self._need)
            self._into = self._into_view = None
        self._cmd = None
        self._parts = []
        self._buf.clear()
        self._pos = 0

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """The commands completed by ``data``, the next bytes of the stream."""
        return self._feed(data, False)

    def _feed(self, data: bytes | memoryview, into: bool) -> list[RemotingCommand]:
        """``data`` is a view of the thread's read buffer when ``into``: nothing may keep it."""
        out: list[RemotingCommand] = []
        pos = 0
        cmd = self._cmd
        if cmd is not None:  # a large body's next piece: nothing else is held meanwhile
            if data.__class__ is not bytes:  # kept past this call: never a view of a reused buffer
                data = bytes(data)
            need = self._need
            if len(data) < need:
                self._parts.append(data)
                self._need = need - len(data)
                return out
            parts = self._parts
            parts.append(data if len(data) == need else memoryview(data)[:need])
            cmd.body = b"".join(parts)  # the body's one copy out of the reads
            self._cmd = None
            self._parts = []
            out.append(cmd)
            if len(data) == need:
                return out
            pos = need
        buf = self._buf
        # With nothing held, frames are cut straight out of ``data``: a large body is copied
        # once (into its own bytes) instead of three times (into, out of and off the buffer).
        if buf:
            held = len(buf) - self._pos
            need = 4 + _PREFIX.unpack_from(buf, self._pos)[0] - held if held >= 8 else 0
            if 0 < need < len(data):
                # The held frame completed by as much of ``data`` as it lacks, and the frames
                # after it cut out of ``data`` too, not copied into ``buf`` first.
                view = data if isinstance(data, memoryview) else memoryview(data)
                out = self._feed(view[:need], into)
                if not buf and self._cmd is None:
                    return out + self._feed(view[need:], into)
                buf += view[need:]
            else:
                buf += data
            src: bytes | bytearray | memoryview = buf
            pos = self._pos
        else:
            src = data
        end = len(src)
        max_frame = self.max_frame_size
        try:
            while end - pos >= 8:
                total, packed = _PREFIX.unpack_from(src, pos)
                if total < 4 or total + 4 > max_frame:
                    raise FrameError(f"frame length {total} outside 4..{max_frame - 4}")
                stype = packed >> 24
                hlen = packed & 0xFFFFFF
                hstart = pos + 8
                bstart = hstart + hlen
                fend = pos + 4 + total
                if fend > end and (total < self.collect_from or bstart >= end):
                    break  # held whole until complete: small frames, and large ones until their header is in
                if hlen > total - 4:
                    raise FrameError(f"header length {hlen} exceeds frame length {total}")
                decode = DECODERS.get(stype)
                if decode is None:
                    raise FrameError(f"unknown serialize type {stype}")
                header = src[hstart:bstart]
                try:
                    # every decoder reads bytes and bytearrays alike; none may keep a view of the read
                    cmd = decode(header.tobytes() if isinstance(header, memoryview) else header)
                except HeaderDecodeError as exc:
                    raise FrameError(str(exc)) from None
                if fend > end:
                    # A large frame's header is in, its body still coming: the body's pieces are
                    # collected as the reads bring them, not grown in ``buf`` (copied at every
                    # growth, on fresh memory) and then copied out of it.
                    if into and _reserve(fend - bstart):  # read by get_buffer: the rest goes straight into the body
                        self._into, body = _new_body(fend - bstart)
                        self._into_view = body
                        with memoryview(src) as view:
                            body[:end - bstart] = view[bstart:end]
                        self._filled = end - bstart
                    elif src is data and data.__class__ is bytes:  # a view of the read, kept with the later ones
                        self._parts = [memoryview(data)[bstart:end]]
                    else:  # ``buf`` changes: what it holds of the body, copied out
                        with memoryview(src) as view:
                            self._parts = [view[bstart:end].tobytes()]
                    self._cmd = cmd
                    self._need = fend - end
                    pos = end
                    break
                if fend > bstart:
                    if isinstance(src, bytes):
                        cmd.body = src[bstart:fend]
                    else:  # one copy out of the buffer, not a bytearray slice copied again
                        with memoryview(src) as view:
                            cmd.body = view[bstart:fend].tobytes()
                out.append(cmd)
                pos = fend
        finally:
            if src is not buf:
                if pos < end:  # the start of a frame still to come
                    buf += memoryview(data)[pos:]
                self._pos = 0
            # Drop what was consumed once per feed, not once per frame.
            elif pos == end:
                buf.clear()
                self._pos = 0
            elif pos > 65536 or pos > (end >> 1):
                del buf[:pos]
                self._pos = 0
            else:
                self._pos = pos
        return out
