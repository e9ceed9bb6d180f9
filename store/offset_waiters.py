"""OffsetWaiters: puts waiting for the log to reach an offset somewhere else (on disk, on a slave).

SYNC_FLUSH's group commit and SYNC_MASTER's group transfer wait the same way: each put holds a
future for the offset its record ends at, one event (an fsync done, a slave's acknowledgement)
releases every waiter it covers, and a waiter still there at its deadline fails. One watchdog
timer serves all waiters rather than a timer per put: at tens of thousands of synced puts a
second, creating and cancelling those costs more than the puts.
"""

from __future__ import annotations

import asyncio


class OffsetWaiters:
    """Futures for offsets, in arrival order, each with a loop-time deadline."""

    def __init__(self) -> None:
        # (offset waited for, its future, loop-time deadline); arrivals come in offset order.
        self.entries: list[tuple[int, asyncio.Future[bool], float]] = []
        self._watchdog: asyncio.TimerHandle | None = None
        self._watchdog_at = 0.0  # its loop time

    def __bool__(self) -> bool:
        return bool(self.entries)

    def add(self, offset: int, timeout: float) -> asyncio.Future[bool]:
        """True once ``release_upto`` covers ``offset``; False after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        return self.add_until(offset, loop.time() + timeout, loop)

    def add_until(self, offset: int, deadline: float, loop: asyncio.AbstractEventLoop) -> asyncio.Future[bool]:
        """``add`` with the deadline (loop time) and the running loop given: the puts of one turn
        of the loop share the first one's (GroupCommitService.flushed_to)."""
        fut: asyncio.Future[bool] = loop.create_future()
        self.entries.append((offset, fut, deadline))
        if self._watchdog is None or deadline < self._watchdog_at:
            # Sooner than the watchdog's time when the timeout was shortened: UPDATE_BROKER_CONFIG
            # may lower syncFlushTimeout on a running broker.
            if self._watchdog is not None:
                self._watchdog.cancel()
            self._watchdog = loop.call_at(deadline, self._expire)
            self._watchdog_at = deadline
        return fut

    def newest_offset(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def release_upto(self, offset: int) -> None:
        """Every waiter ``offset`` covers released at once."""
        still = []
        for entry in self.entries:
            if entry[0] <= offset:
                fut = entry[1]
                if not fut.done():  # _resolve's, without a call for each waiter
                    fut.set_result(True)
            else:
                still.append(entry)
        self.entries = still

    def release_all(self, value: bool) -> None:
        """Every waiter answered ``value`` and the watchdog stopped (shutdown)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        for _, fut, _ in self.entries:
            _resolve(fut, value)
        self.entries.clear()

    def _expire(self) -> None:
        self._watchdog = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        keep = []
        for entry in self.entries:
            if entry[2] <= now:
                _resolve(entry[1], False)
            else:
                keep.append(entry)
        self.entries = keep
        if keep:
            self._watchdog_at = min(entry[2] for entry in keep)
            self._watchdog = loop.call_at(self._watchdog_at, self._expire)


def _resolve(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)
