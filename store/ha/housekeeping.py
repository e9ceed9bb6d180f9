"""Housekeeping of an HA connection: one that has been silent for haHousekeepingInterval is closed.

One timer per connection, re-armed from the time of the last read when it fires, rather than a
timeout around every read: a SYNC_MASTER's HA connection reads an acknowledgement for every few
sends, and a timer set and cancelled per read cost the master more than the read's own work.
Java's HAConnection and HAClient check the same interval after each select.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Housekeeping:
    """Calls ``expire`` once no ``touch`` came for ``interval`` seconds."""

    def __init__(self, interval: float, expire: Callable[[], None]) -> None:
        self.interval = interval
        self.expired = False
        self._expire = expire
        self._loop = asyncio.get_running_loop()
        self.last = self._loop.time()
        self._handle: asyncio.TimerHandle | None = self._loop.call_later(interval, self._check)

    def touch(self) -> None:
        """Something was read: the connection is alive."""
        self.last = self._loop.time()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _check(self) -> None:
        silent = self._loop.time() - self.last
        if silent < self.interval:
            self._handle = self._loop.call_later(self.interval - silent, self._check)
            return
        self._handle = None
        self.expired = True
        self._expire()
