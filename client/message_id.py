"""Client-side unique message ids: the UNIQ_KEY property, the msgId users see (docs/store-formats.md#unique-message-id).

16 bytes (IPv4) as uppercase hex: client IP, low 16 bits of the pid, a per-process random int
(Java uses the class loader's hash), milliseconds since the start of the current month, and a
16-bit counter. The first three are fixed per process, so ids are cheap to make and sort by time
within a month, and the broker indexes them for query-by-id.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import itertools
import os
import random
import socket
import struct
import threading
import time


def _client_ip() -> bytes:
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            addr = ipaddress.ip_address(info[4][0])
            if not addr.is_loopback:
                return addr.packed
    except OSError:
        pass
    # No usable address: Java falls back to random bytes so ids from different hosts still differ.
    return random.getrandbits(32).to_bytes(4, "big")


class MessageClientIDSetter:
    def __init__(self, ip: bytes | None = None) -> None:
        fixed = (ip or _client_ip()) + struct.pack(">hi", os.getpid() & 0x7FFF, random.getrandbits(31))
        self._prefix = fixed.hex().upper()
        self._counter = itertools.count(random.getrandbits(16))
        self._lock = threading.Lock()
        self._month_start_ms = 0
        self._next_month_ms = 0
        # (millisecond, the id up to its counter), swapped as one reference so that threads
        # never pair a millisecond with another's text: sends in one millisecond (dozens, under
        # load) format only their counter.
        self._stamp = (-1, "")

    def _roll_month(self, now_ms: int) -> None:
        now = dt.datetime.fromtimestamp(now_ms / 1000).astimezone()
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = (start + dt.timedelta(days=32)).replace(day=1)
        self._month_start_ms = int(start.timestamp() * 1000)
        self._next_month_ms = int(nxt.timestamp() * 1000)

    def create_uniq_id(self, now_ms: int | None = None) -> str:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        # ``next`` on a count is atomic under the GIL; only the month roll needs the lock.
        counter = next(self._counter) & 0xFFFF
        stamped_ms, stamped = self._stamp
        if stamped_ms != now_ms:
            if not self._month_start_ms <= now_ms < self._next_month_ms:
                with self._lock:
                    if not self._month_start_ms <= now_ms < self._next_month_ms:
                        self._roll_month(now_ms)
            stamped = f"{self._prefix}{(now_ms - self._month_start_ms) & 0xFFFFFFFF:08X}"
            self._stamp = (now_ms, stamped)
        return f"{stamped}{counter:04X}"


_default = MessageClientIDSetter()


def create_uniq_id() -> str:
    return _default.create_uniq_id()


def nearly_time_from_id(msg_id: str) -> int:
    """About when a UNIQ_KEY was made, in epoch millis (Java's getNearlyTimeFromID): its
    milliseconds since a month's start, in this month unless that is still ahead, then the
    previous one; 0 for text that is no id."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        return 0
    ip_length = 16 if len(raw) == 28 else 4
    if len(raw) < ip_length + 10:
        return 0
    span: int = struct.unpack_from(">I", raw, ip_length + 6)[0]
    now = dt.datetime.now().astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    start_ms = int(start.timestamp() * 1000)
    if start_ms + span >= int(now.timestamp() * 1000):
        start_ms = int((start - dt.timedelta(days=1)).replace(day=1).timestamp() * 1000)
    return start_ms + span
