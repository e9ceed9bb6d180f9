"""HAConnection: the master's side of one slave's HA connection (docs/ha.md).

Two tasks, as Java's ReadSocketService and WriteSocketService are two threads: one reads the
slave's reported offsets (the first is where the transfer starts, every later one an
acknowledgement that may release SYNC_MASTER sends), the other streams the CommitLog from there in
frames of at most haTransferBatchSize, with an empty frame whenever nothing was written for
haSendHeartbeatInterval. A connection silent for haHousekeepingInterval is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketmq_py.store.ha.flow_monitor import FlowMonitor
from rocketmq_py.store.ha.housekeeping import Housekeeping
from rocketmq_py.store.ha.transfer import ReportReader, encode_frame_header

if TYPE_CHECKING:
    from rocketmq_py.store.ha.ha_service import HAService

log = logging.getLogger("rocketmq.store")

# How long an idle writer sleeps before looking at the log again when no SYNC_MASTER send woke it
# (Java's allWaitForRunning(100)): an ASYNC_MASTER's slave is at most this much behind when idle.
IDLE_WAIT = 0.1


class HAConnection:
    def __init__(self, service: HAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.client_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        # -1 until the slave's first report, as in Java.
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self.flow = FlowMonitor()
        self._requested = asyncio.Event()
        self._data = asyncio.Event()

    def wakeup(self) -> None:
        """New data or a waiting SYNC_MASTER send: the writer looks at the log now."""
        self._data.set()

    async def run(self) -> None:
        """Serve the slave until either side fails or the connection goes silent."""
        tasks = [asyncio.create_task(self._read_loop()), asyncio.create_task(self._write_loop())]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    log.warning("HA connection of slave[%s] ends: %s", self.client_addr, task.exception())
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
            for task in tasks:
                if not task.cancelled():
                    task.exception()  # retrieved (the first one was logged above)
            self.writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await self.writer.wait_closed()
            log.info("HA connection of slave[%s] closed", self.client_addr)

    async def _read_loop(self) -> None:
        cfg = self.service.store.config
        reports = ReportReader()
        housekeeping = Housekeeping(cfg.haHousekeepingInterval / 1000, self._expire)
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    return
                housekeeping.touch()
                offset = reports.feed(data)
                if offset is None:
                    continue
                max_offset = self.service.store.get_max_phy_offset()
                if offset > max_offset:
                    # Its log reaches past ours: a slave of another history, or of a master that
                    # lost data. Streaming from anywhere would merge two logs; refuse.
                    log.error("slave[%s] request offset=%d greater than local commitLog offset=%d: its log is "
                              "ahead of this master's, closing the connection", self.client_addr, offset, max_offset)
                    return
                self.slave_ack_offset = offset
                if self.slave_request_offset < 0:
                    self.slave_request_offset = offset
                    log.info("slave[%s] request offset %d", self.client_addr, offset)
                    self._requested.set()
                self.service.notify_transfer_some(offset)
        finally:
            housekeeping.cancel()

    def _expire(self) -> None:
        log.warning("ha housekeeping, found this connection[%s] expired, silent for %d ms", self.client_addr,
                    self.service.store.config.haHousekeepingInterval)
        self.writer.close()

    def _start_offset(self) -> int:
        """Java's rule: a slave with nothing gets the master's last file from its beginning."""
        if self.slave_request_offset == 0:
            store = self.service.store
            max_offset = store.get_max_phy_offset()
            return max(0, max_offset - max_offset % store.config.mappedFileSizeCommitLog)
        return self.slave_request_offset

    async def _write_loop(self) -> None:
        await self._requested.wait()
        self.next_transfer_from = self._start_offset()
        log.info("master transfer data from %d to slave[%s], and slave request %d", self.next_transfer_from,
                 self.client_addr, self.slave_request_offset)
        writer = self.writer
        # The slave gets a heartbeat at once: it learns where the stream starts.
        writer.write(encode_frame_header(self.next_transfer_from, 0))
        await writer.drain()
        # Woken by new data, a waiting SYNC_MASTER send, or at least every IDLE_WAIT by one timer
        # (not a timeout per wait: a SYNC_MASTER wakes this for every few sends).
        ticker = _Ticker(IDLE_WAIT, self._data.set)
        try:
            await self._stream(writer)
        finally:
            ticker.cancel()

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        store = self.service.store
        heartbeat = store.config.haSendHeartbeatInterval / 1000
        batch = store.config.haTransferBatchSize
        queue = store.commit_log.queue
        last_write = time.monotonic()
        while True:
            # Cleared before the log is looked at: a wakeup from here on is not lost.
            self._data.clear()
            at = self.next_transfer_from
            if at < store.get_max_phy_offset():
                mf = queue.find_mapped_file_by_offset(at)
                if mf is None or at < store.get_min_phy_offset():
                    log.error("slave[%s] needs offset %d, which this master no longer holds (min %d)",
                              self.client_addr, at, store.get_min_phy_offset())
                    return
                pos = at - mf.file_from_offset
                end = min(mf.wrote_position, pos + batch)
                if end > pos:
                    data = mf.mm[pos:end]
                    writer.write(encode_frame_header(at, len(data)) + data)
                    self.next_transfer_from = at + len(data)
                    self.flow.add(len(data))
                    await writer.drain()
                    last_write = time.monotonic()
                    continue
            if time.monotonic() - last_write > heartbeat:
                writer.write(encode_frame_header(at, 0))
                await writer.drain()
                last_write = time.monotonic()
            await self._data.wait()


class _Ticker:
    """Calls ``tick`` every ``interval`` seconds until cancelled."""

    def __init__(self, interval: float, tick: Callable[[], None]) -> None:
        self._interval = interval
        self._tick = tick
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_later(interval, self._run)

    def _run(self) -> None:
        self._tick()
        self._handle = self._loop.call_later(self._interval, self._run)

    def cancel(self) -> None:
        self._handle.cancel()
