"""The HA port's two byte streams, sans-IO (docs/ha.md).

Slave to master: nothing but 8-byte big-endian CommitLog offsets, the slave's max offset, sent
at connection, whenever it advances and at least every haSendHeartbeatInterval. Master to
slave: frames of an 8-byte physical offset, a 4-byte size and that many CommitLog bytes, at most
haTransferBatchSize, never across a CommitLog file; a frame of size 0 is a heartbeat. Both sides
are byte-compatible with Java 4.9's HAConnection and HAClient.
"""

from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
FRAME_HEADER = struct.Struct(">qi")
FRAME_HEADER_SIZE = FRAME_HEADER.size  # 12
# Java's HAClient reads into a 4 MiB buffer, so no frame it accepts is larger than that.
MAX_FRAME_BODY = 4 * 1024 * 1024 - FRAME_HEADER_SIZE


class TransferProtocolError(ValueError):
    """A frame no master sends (a negative offset, a negative or oversized body): the slave
    closes the connection."""


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def encode_frame_header(offset: int, size: int) -> bytes:
    return FRAME_HEADER.pack(offset, size)


class ReportReader:
    """The master's side: offsets a slave reported. As in Java's ReadSocketService only the last
    whole offset of what arrived counts (earlier ones are superseded); a partial one waits."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> int | None:
        """The newest whole offset in the stream so far, or None when ``data`` completed none."""
        buf = self._buf
        buf += data
        whole = len(buf) - len(buf) % 8
        if whole == 0:
            return None
        (offset,) = REPORT.unpack_from(buf, whole - 8)
        del buf[:whole]
        return int(offset)


class FrameReader:
    """The slave's side: whole frames cut from the master's stream, ``(offset, body)``."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buf = self._buf
        buf += data
        frames: list[tuple[int, bytes]] = []
        pos = 0
        while len(buf) - pos >= FRAME_HEADER_SIZE:
            offset, size = FRAME_HEADER.unpack_from(buf, pos)
            if size < 0 or size > MAX_FRAME_BODY or offset < 0:
                raise TransferProtocolError(f"HA frame at {offset} with size {size}: not a master's frame")
            end = pos + FRAME_HEADER_SIZE + size
            if len(buf) < end:
                break
            frames.append((offset, bytes(buf[pos + FRAME_HEADER_SIZE:end])))
            pos = end
        if pos:
            del buf[:pos]
        return frames
