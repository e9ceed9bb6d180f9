"""The store's flush services, by Java's names: GroupCommitService (SYNC_FLUSH: the puts waiting
when an fsync starts share it), FlushRealTimeService (the CommitLog's periodic flush) and
FlushConsumeQueueService (consume queues, index and checkpoint).

Each holds its DefaultMessageStore as Java's inner services hold ``DefaultMessageStore.this``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from rocketmq_py.store.message_result import PutMessageStatus
from rocketmq_py.store.offset_waiters import OffsetWaiters

if TYPE_CHECKING:
    from rocketmq_py.store.consume_queue import ConsumeQueue
    from rocketmq_py.store.message_store import DefaultMessageStore

log = logging.getLogger("rocketmq.store")

_MAX_GROUP_FLUSHES = 1  # fsyncs in flight for SYNC_FLUSH group commit (see GroupCommitService.start_flush)
# Queues taken out of the flush sets per turn of the event loop after a consume queue flush
# (ConsumeQueueStore.forget_flushed, about a microsecond a queue): a thorough flush after sends
# spread over 70,000 queues held the loop 70-120 ms in one piece for them.
_FORGET_SLICE = 256


class FlushRealTimeService:
    """ASYNC_FLUSH's periodic CommitLog flush. Under SYNC_FLUSH the puts drive group commit, and
    this still flushes what puts that did not wait left dirty."""

    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store
        self.last_flush = time.monotonic()

    async def run(self) -> None:
        store = self.store
        cfg = store.config
        commit_log = store.commit_log
        while True:
            await asyncio.sleep(cfg.flushIntervalCommitLog / 1000)
            thorough = time.monotonic() - self.last_flush >= cfg.flushCommitLogThoroughInterval / 1000
            if thorough or commit_log.queue.dirty_bytes() >= cfg.flushCommitLogLeastPages * 4096:
                ts = commit_log.last_store_timestamp
                try:
                    await asyncio.to_thread(commit_log.queue.flush)
                except OSError as exc:  # retried next round: the service must outlive a bad moment
                    log.error("flush commit log failed: %s", exc)
                    continue
                self.flushed(ts)

    def flushed(self, store_timestamp: int) -> None:
        """A CommitLog flush ended (this service's or group commit's). ``store_timestamp``: the
        newest record's store time when the flush started (records appended while it ran may
        not be on disk)."""
        self.last_flush = time.monotonic()
        checkpoint = self.store.checkpoint
        if checkpoint is not None and store_timestamp:
            checkpoint.physic_msg_timestamp = store_timestamp


class GroupCommitService:
    """SYNC_FLUSH's group commit: futures resolved once the log is on disk up to an offset."""

    def __init__(self, store: DefaultMessageStore, flush_service: FlushRealTimeService) -> None:
        self.store = store
        self.flush_service = flush_service
        self.waiters = OffsetWaiters()
        self.flushes: set[asyncio.Future[int]] = set()
        self._flushing_to = 0
        self._flushed_to = 0  # the end of the last group flush that completed
        self._start: asyncio.Handle | None = None  # the next flush, asked for at the end of this loop turn
        # The loop time at which the waiters of this turn of the loop time out: its first put's
        # plus syncFlushTimeout, which that put read once for the turn rather than from the
        # pydantic model (a third of a plain read's speed) by each put (an UPDATE_BROKER_CONFIG
        # applies from the next turn). The running loop is the one that put found: the other puts
        # of the turn ask neither the loop's clock nor for the loop (a turn lasts a few ms at most
        # of the timeout's seconds).
        self._deadline = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def flushed_to(self, offset: int) -> asyncio.Future[bool]:
        """True once the log is on disk up to ``offset``; False after syncFlushTimeout.

        Group commit: every put waiting when a flush starts shares that one fsync."""
        if offset <= self._flushed_to:  # asked after the flush that covers it ended
            fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            fut.set_result(True)
            return fut
        loop = self._loop
        if self._start is not None and loop is not None:  # a flush asked for this turn: its first put's deadline
            return self.waiters.add_until(offset, self._deadline, loop)
        loop = self._loop = asyncio.get_running_loop()
        self._deadline = loop.time() + self.store.config.syncFlushTimeout / 1000
        fut = self.waiters.add_until(offset, self._deadline, loop)
        self.start_flush()
        return fut

    def start_flush(self) -> None:
        """An fsync asked for at the end of this turn of the event loop, covering everything
        appended by then, unless one is running, already asked for, or already covers the newest
        waiter.

        At the end of the turn rather than at once, so that the puts of one turn share one
        fsync: the first put of a turn no longer starts a flush of its own while the others
        queue for the next. When a flush ends, the puts it releases run in the next turn and
        append again before the flush asked for then starts. Started at once, 64 writers fell
        into two groups, 63 puts and 1, each group's flush starting as the other's ended: two
        fsyncs for 64 puts where one does (bench/store_append.py's puts_sync_64). One flush at a
        time: this disk's fsync cost grows with the bytes it writes, and two at once measured
        slower than one. A flush resolves the waiters up to the end it saw when it started."""
        if self._start is not None:
            return
        newest = self.waiters.newest_offset()
        if len(self.flushes) >= _MAX_GROUP_FLUSHES or newest is None or newest <= self._flushing_to:
            return
        self._start = asyncio.get_running_loop().call_soon(self._start_flush)

    def _start_flush(self) -> None:
        self._start = None
        if self.store.shutdown_flag:  # the store's final flush covers the waiters left
            return
        commit_log = self.store.commit_log
        target = self._flushing_to = commit_log.max_offset
        ts = commit_log.last_store_timestamp
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, commit_log.queue.flush)
        self.flushes.add(fut)
        fut.add_done_callback(lambda f: self._flush_done(f, target, ts))

    def _flush_done(self, fut: asyncio.Future[int], target: int, store_timestamp: int) -> None:
        self.flushes.discard(fut)
        if fut.cancelled() or fut.exception() is not None:
            log.error("group commit flush failed: %s", "cancelled" if fut.cancelled() else fut.exception())
            return  # its waiters time out with FLUSH_DISK_TIMEOUT
        self.flush_service.flushed(store_timestamp)
        self._flushed_to = max(self._flushed_to, target)
        self.waiters.release_upto(target)
        if not self.store.shutdown_flag:
            self.start_flush()

    async def shutdown(self) -> None:
        """Waits for the flush running; the waiters left are released as flushed (the store's
        final flush follows)."""
        if self._start is not None:
            self._start.cancel()
            self._start = None
        if self.flushes:
            await asyncio.wait(self.flushes)

    def release_waiters(self) -> None:
        self.waiters.release_all(True)


class FlushConsumeQueueService:
    """Consume queues flushed every flushIntervalConsumeQueue, each once it has
    flushConsumeQueueLeastPages pages unsynced; every one of them, the index and the checkpoint's
    logics and index times every flushConsumeQueueThoroughInterval (Java's
    FlushConsumeQueueService). Syncing every queue with a unit written each second was 80,000
    fdatasyncs a second for 10,000 topics of 8 queues; and looking at every queue each second to
    find those due was a tenth of a core. The queues looked at are those due, or for the thorough
    flush those written since their last sync (ConsumeQueueStore.to_flush)."""

    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store

    async def run(self) -> None:
        cfg = self.store.config
        last_thorough = time.monotonic()
        while True:
            await asyncio.sleep(cfg.flushIntervalConsumeQueue / 1000)
            thorough = time.monotonic() - last_thorough >= cfg.flushConsumeQueueThoroughInterval / 1000
            if await self.flush_once(thorough) and thorough:
                last_thorough = time.monotonic()

    async def flush_once(self, thorough: bool) -> bool:
        """One round: the queues due (or, ``thorough``, every dirty one) written and synced in a
        thread (ConsumeQueueStore.flush: the units kept for unmapped files too), then, thorough,
        the index and the checkpoint. The loop's part is the list of queues and taking the
        synced ones out of the flush sets, a slice of queues per turn. False when a sync or
        write failed (logged; the next round retries): a full disk must not end the service,
        as Java's FlushConsumeQueueService logs and goes on."""
        store = self.store
        cfg = store.config
        cqs = store.consume_queue_store
        ts = store.commit_log.last_store_timestamp
        queues = list(cqs.to_flush.dirty if thorough else cqs.to_flush.due)
        try:
            await asyncio.to_thread(cqs.flush, queues, 0 if thorough else cfg.flushConsumeQueueLeastPages)
        except OSError as exc:
            log.error("flush consume queues failed: %s", exc)
            return False
        await self.forget_flushed(queues)
        done = True
        if thorough:
            try:
                await asyncio.to_thread(store.index_service.flush)
                checkpoint = store.checkpoint
                if checkpoint is not None and ts:
                    checkpoint.logics_msg_timestamp = ts
                    checkpoint.index_msg_timestamp = self.index_flushed_timestamp(ts)
                    await asyncio.to_thread(checkpoint.flush)
            except OSError as exc:
                log.error("flush index or checkpoint failed: %s", exc)
                done = False
        if store.index_dispatch is not None:
            store.index_dispatch.ensure_running()
        return done

    async def forget_flushed(self, queues: list[ConsumeQueue]) -> None:
        """ConsumeQueueStore.forget_flushed over ``queues``, a slice per turn of the loop (each
        queue is judged as it stands when its slice runs: one written meanwhile stays dirty)."""
        cqs = self.store.consume_queue_store
        for start in range(0, len(queues), _FORGET_SLICE):
            if start:
                await asyncio.sleep(0)
            cqs.forget_flushed(queues[start:start + _FORGET_SLICE])

    def index_flushed_timestamp(self, ts: int) -> int:
        """Store time up to which the index is on disk: the child's report, or ``ts`` inline."""
        store = self.store
        if store.index_dispatch is None:
            return ts
        reported = store.index_dispatch.flushed_timestamp
        if reported:
            return reported
        return store.checkpoint.index_msg_timestamp if store.checkpoint is not None else 0


def _waits(store: DefaultMessageStore, offset: int
           ) -> tuple[asyncio.Future[bool] | None, asyncio.Future[bool] | None, PutMessageStatus]:
    """What a put to ``offset`` waits for: the flush (SYNC_FLUSH), the slave (SYNC_MASTER, when
    one is fit to wait for), and the status when both go well (SLAVE_NOT_AVAILABLE when no slave
    is connected or it is more than haSlaveFallbehindMax behind)."""
    flushed = store.group_commit_service.flushed_to(offset) if store.sync_flush else None
    replicated = None
    replica_status = PutMessageStatus.PUT_OK
    if store.sync_master:
        if store.ha_service.is_slave_ok(offset):
            replicated = store.ha_service.wait_transfer(offset)
        else:
            replica_status = PutMessageStatus.SLAVE_NOT_AVAILABLE
    return flushed, replicated, replica_status


def _status(flushed: asyncio.Future[bool] | None, replicated: asyncio.Future[bool] | None,
            replica_status: PutMessageStatus) -> PutMessageStatus:
    """The status of a put whose waits are done: the flush's failure first, as in Java."""
    if flushed is not None and (flushed.cancelled() or not flushed.result()):
        return PutMessageStatus.FLUSH_DISK_TIMEOUT
    if replicated is not None and (replicated.cancelled() or not replicated.result()):
        return PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    return replica_status


def stored_future(store: DefaultMessageStore, offset: int) -> asyncio.Future[PutMessageStatus]:
    """PUT_OK once the log is flushed (SYNC_FLUSH) and acknowledged by the slave (SYNC_MASTER)
    up to ``offset``, both waited for at once; else FLUSH_DISK_TIMEOUT after syncFlushTimeout,
    FLUSH_SLAVE_TIMEOUT after slaveTimeout, or SLAVE_NOT_AVAILABLE. Java's
    CommitLog.handleDiskFlushAndHA.

    A future rather than a coroutine: a run of sends stored together shares one, and their
    answers go out from its callback, with no task per send (at 64 sends in flight to a
    SYNC_MASTER, a task and its coroutines per send were a fifth of the broker's time)."""
    status: asyncio.Future[PutMessageStatus] = asyncio.get_running_loop().create_future()
    flushed, replicated, replica_status = _waits(store, offset)
    waits = [w for w in (flushed, replicated) if w is not None]
    if not waits:
        status.set_result(replica_status)
        return status

    def settle(_: object) -> None:
        if not status.done() and all(w.done() for w in waits):
            status.set_result(_status(flushed, replicated, replica_status))

    for w in waits:
        w.add_done_callback(settle)
    return status


async def stored_to(store: DefaultMessageStore, offset: int) -> PutMessageStatus:
    """``stored_future`` for one put awaiting in a coroutine, which awaits the waits themselves:
    a future of its own would cost each put a callback and a turn of the loop more
    (bench/store_append.py's SYNC_FLUSH puts at 64 in flight)."""
    flushed, replicated, replica_status = _waits(store, offset)
    for wait in (flushed, replicated):
        if wait is not None:
            await wait
    return _status(flushed, replicated, replica_status)


def flush_all(store: DefaultMessageStore, index_complete: bool = True) -> None:
    """Everything on disk and the checkpoint written: the store's last act at shutdown."""
    store.commit_log.queue.flush()
    store.consume_queue_store.flush_dirty()
    store.index_service.flush()
    if store.checkpoint is not None:
        ts = store.commit_log.last_store_timestamp
        if ts:
            store.checkpoint.physic_msg_timestamp = ts
            store.checkpoint.logics_msg_timestamp = ts
            store.checkpoint.index_msg_timestamp = ts if index_complete else \
                store.flush_consume_queue_service.index_flushed_timestamp(ts)
        store.checkpoint.flush()
