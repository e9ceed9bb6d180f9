"""DefaultMessageStore: the store's public face -- puts, reads, and the services behind them.

The put path appends to the CommitLog and dispatches at once (CommitLogDispatcher: ConsumeQueue
unit, index keys, the arrival listener that wakes long-polling pulls), so a message is readable
by queue as soon as its put returns. The services keep RocketMQ's names, each in its module:
StoreRecovery (recovery.py), CommitLogDispatcher and ReputMessageService (dispatch.py),
GroupCommitService, FlushRealTimeService and FlushConsumeQueueService (flush.py),
CleanCommitLogService and CleanConsumeQueueService (clean.py); the result types are in
message_result.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

from rocketmq_py.remoting.protocol.message import Host
from rocketmq_py.store import get_message
from rocketmq_py.store.checkpoint import StoreCheckpoint
from rocketmq_py.store.clean import CleanCommitLogService, CleanConsumeQueueService
from rocketmq_py.store.commit_log import (
    AppendMessageResult,
    AppendMessageStatus,
    CommitLog,
    MessageExtBatch,
    MessageExtBrokerInner,
    RunEntry,
)
from rocketmq_py.store.config import BrokerRole, FlushDiskType, MessageStoreConfig, parse_delay_levels
from rocketmq_py.store.consume_queue import ConsumeQueue
from rocketmq_py.store.consume_queue_store import ConsumeQueueStore
from rocketmq_py.store.dispatch import (
    CommitLogDispatcher,
    MessageArrivingListener,
    ReputMessageService,
)
from rocketmq_py.store.flush import (
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitService,
    flush_all,
    stored_future,
    stored_to,
)
from rocketmq_py.store.ha.ha_service import HAService
from rocketmq_py.store.index_dispatch import CHILD_SUPPORTED, IndexDispatchProcess, wait_for_previous_child
from rocketmq_py.store.index_file import IndexService
from rocketmq_py.store.mapped_file import DiskFullError, start_allocator, wait_allocator
from rocketmq_py.store.message_result import (
    MATCH_ALL,
    GetMessageResult,
    GetMessageStatus,
    MessageFilter,
    PutMessageResult,
    PutMessageStatus,
    not_appended,
)
from rocketmq_py.store.recovery import StoreRecovery
from rocketmq_py.store.store_lock import StoreLockedError, lock_store

__all__ = ["MATCH_ALL", "DefaultMessageStore", "GetMessageResult", "GetMessageStatus", "MessageArrivingListener",
           "MessageFilter", "PutMessageResult", "PutMessageStatus", "StoreLockedError"]

log = logging.getLogger("rocketmq.store")


_PUT_OK = PutMessageStatus.PUT_OK
_FLUSH_DISK_TIMEOUT = PutMessageStatus.FLUSH_DISK_TIMEOUT
_P = TypeVar("_P", MessageExtBrokerInner, MessageExtBatch, Sequence[RunEntry])
_APPENDED = AppendMessageStatus.PUT_OK
_SLAVE = BrokerRole.SLAVE  # an Enum member read from its class costs 0.1 µs, every put


class DefaultMessageStore:
    def __init__(self, config: MessageStoreConfig, message_arriving_listener: MessageArrivingListener | None = None
                 ) -> None:
        self.config = config
        self.root = config.storePathRootDir
        self.commit_log = CommitLog(config)
        self.index_service = IndexService(os.path.join(self.root, "index"), config.maxHashSlotNum,
                                          config.maxIndexNum)
        self.checkpoint: StoreCheckpoint | None = None
        # Read on every put; the flush type is fixed for a store's life, as in Java.
        self.sync_flush = config.flushDiskType == FlushDiskType.SYNC_FLUSH
        self.sync_master = config.brokerRole == BrokerRole.SYNC_MASTER
        # A put acknowledged with waitStoreMsgOK waits for something: the flush, the slave or both.
        self.sync_put = self.sync_flush or self.sync_master
        self.ha_service = HAService(self)
        self.memory_for_messages = get_message.memory_for_messages(config.accessMessageInMemoryMaxRatio)
        self.delay_level_table = parse_delay_levels(config.messageDelayLevel)
        self.index_dispatch: IndexDispatchProcess | None = None
        self.shutdown_flag = True
        self.disk_full = False
        self.consume_queue_store = ConsumeQueueStore(self.cq_root(), config.mappedFileSizeConsumeQueue,
                                                     self.commit_log, self._space_check,
                                                     config.flushConsumeQueueLeastPages)
        self.consume_queue_table = self.consume_queue_store.consume_queue_table
        self.dispatcher = CommitLogDispatcher(self, message_arriving_listener)
        self.reput_message_service = ReputMessageService(self)
        self.flush_commit_log_service = FlushRealTimeService(self)
        self.group_commit_service = GroupCommitService(self, self.flush_commit_log_service)
        self.flush_consume_queue_service = FlushConsumeQueueService(self)
        self.clean_consume_queue_service = CleanConsumeQueueService(self)
        self.clean_commit_log_service = CleanCommitLogService(self, self.clean_consume_queue_service)
        self.commit_log.queue.space_check = self._space_check
        # Each kind of put's steps for ``_append`` (its ConsumeQueue files, its append, its
        # dispatch), bound once rather than on every put.
        cqs, commit_log, dispatcher = self.consume_queue_store, self.commit_log, self.dispatcher
        self._message_steps = (cqs.reserve_message, commit_log.append_message, dispatcher.dispatch_appended)
        self._batch_steps = (cqs.reserve_batch, commit_log.append_batch, dispatcher.dispatch_batch)
        self._run_steps = (cqs.reserve_run, commit_log.append_run, dispatcher.dispatch_run)
        self._lock_fd: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # Where the index child starts: the end of what the IndexFiles hold (set by recovery).
        self._index_from = 0

    @property
    def message_arriving_listener(self) -> MessageArrivingListener | None:
        return self.dispatcher.message_arriving_listener

    @message_arriving_listener.setter
    def message_arriving_listener(self, listener: MessageArrivingListener | None) -> None:
        self.dispatcher.message_arriving_listener = listener

    def _space_check(self, needed: int) -> None:
        self.clean_commit_log_service.space_check(needed)

    def _abort_file(self) -> str:
        return os.path.join(self.root, "abort")

    def cq_root(self) -> str:
        return os.path.join(self.root, "consumequeue")

    # -- lifecycle --------------------------------------------------------------------------

    async def load(self) -> bool:
        """Load files and recover; True when the previous shutdown was clean.

        Runs in a thread: recovery reads whole files and must not stall a loop that is already
        serving other things (the NameServer in mqstandalone, for one).
        """
        return await asyncio.to_thread(self.load_sync)

    def load_sync(self) -> bool:
        os.makedirs(self.root, exist_ok=True)
        self._lock_fd = lock_store(self.root)
        last_exit_ok = not os.path.exists(self._abort_file())
        self.checkpoint = StoreCheckpoint(os.path.join(self.root, "checkpoint"))
        self.commit_log.queue.load()
        self.consume_queue_store.load()
        recovery = StoreRecovery(self)
        wait_for_previous_child(self.root, 10.0)
        self.index_service.load(last_exit_ok, self.checkpoint.index_msg_timestamp)
        self._index_from = recovery.recover(last_exit_ok)
        with open(self._abort_file(), "w"):
            pass
        log.info("load over, and the result is OK, last shutdown %s", "normal" if last_exit_ok else "abnormal")
        return last_exit_ok

    async def start(self) -> None:
        self.shutdown_flag = False
        loop = asyncio.get_running_loop()
        start_allocator()
        self.commit_log.warmer.start()
        self.commit_log.queue.preallocate_next()
        if self.config.messageIndexEnable and self.config.messageIndexInChildProcess:
            if not CHILD_SUPPORTED:
                log.warning("messageIndexInChildProcess is POSIX-only: the index is built in this process")
            else:
                self.index_service.close()
                self.index_dispatch = IndexDispatchProcess(
                    self.root, self.config.commit_log_dir(), self.config.mappedFileSizeCommitLog,
                    self.config.maxHashSlotNum, self.config.maxIndexNum, self.config.flushIntervalConsumeQueue)
                self.index_dispatch.start(self.commit_log.max_offset, self.commit_log.min_offset,
                                          indexed=min(max(self._index_from, self.commit_log.min_offset),
                                                      self.commit_log.max_offset))
                self.dispatcher.index_inline = False
        self._tasks = [loop.create_task(self.flush_commit_log_service.run()),
                       loop.create_task(self.flush_consume_queue_service.run()),
                       loop.create_task(self.clean_commit_log_service.run())]
        self.check_disk_space()

    async def shutdown(self) -> None:
        self.shutdown_flag = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.group_commit_service.shutdown()
        index_complete = True
        if self.index_dispatch is not None:
            index_complete = await asyncio.to_thread(self.index_dispatch.stop, 30.0)
        await asyncio.to_thread(self._flush_all, index_complete)
        if self.index_dispatch is not None:
            self.index_dispatch.close()
            self.index_dispatch = None
        self.group_commit_service.release_waiters()
        await asyncio.to_thread(self.commit_log.warmer.close)
        self.commit_log.queue.close()
        for queues in self.consume_queue_table.values():
            for cq in queues.values():
                cq.queue.close()
        self.consume_queue_store.drop_made_ahead()
        await asyncio.to_thread(wait_allocator)  # those files removed before the store is gone
        self.index_service.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
            self.checkpoint = None
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._abort_file())
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _flush_all(self, index_complete: bool = True) -> None:
        flush_all(self, index_complete)

    # -- puts -------------------------------------------------------------------------------

    def _refused(self) -> PutMessageResult | None:
        """Why a put is turned away (called only when one of the three conditions holds), or None
        when the disk was full and has room again: a freed disk is seen by the next put, not only
        by the retention timer."""
        if self.shutdown_flag:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="message store is shut down")
        if self.config.brokerRole == BrokerRole.SLAVE:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="message store is a slave")
        self.check_disk_space()
        if not self.disk_full:
            return None
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                remark=self.clean_commit_log_service.disk_full_remark)

    async def put_message(self, msg: MessageExtBrokerInner, wait_store_msg_ok: bool = True) -> PutMessageResult:
        result = self._append(msg, self._message_steps)  # append_message's step, without its call
        if wait_store_msg_ok and self.sync_put:
            # Under SYNC_FLUSH alone, synced's wait without its coroutine: the synced put of
            # bench/store_append.py's puts_sync_64 went through three (this, synced, stored_to).
            append = result.append_result
            if self.sync_master or result.status is not _PUT_OK or append is None:
                return await self.synced(result)
            if not await self.group_commit_service.flushed_to(append.wrote_offset + append.wrote_bytes):
                return PutMessageResult(_FLUSH_DISK_TIMEOUT, append)
        return result

    async def put_messages(self, batch: MessageExtBatch, wait_store_msg_ok: bool = True) -> PutMessageResult:
        """Store a batch; resolves after the flush under SYNC_FLUSH."""
        result = self._append(batch, self._batch_steps)
        if wait_store_msg_ok and self.sync_put:
            return await self.synced(result)
        return result

    async def synced(self, result: PutMessageResult) -> PutMessageResult:
        """``result`` once its record is flushed (SYNC_FLUSH) and on the slave (SYNC_MASTER), or
        what kept it from being so."""
        append = result.append_result
        if result.status is not _PUT_OK or append is None:
            return result
        offset = append.wrote_offset + append.wrote_bytes
        if self.sync_master or not self.sync_flush:
            status = await stored_to(self, offset)
            return result if status is _PUT_OK else PutMessageResult(status, append)
        # SYNC_FLUSH alone: the flush's future awaited here, not through stored_to's coroutine.
        if await self.group_commit_service.flushed_to(offset):
            return result
        return PutMessageResult(_FLUSH_DISK_TIMEOUT, append)

    async def stored_to(self, offset: int) -> PutMessageStatus:
        return await stored_to(self, offset)

    def stored_future(self, offset: int) -> asyncio.Future[PutMessageStatus]:
        return stored_future(self, offset)

    def append_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """``put_message`` without the flush wait: the record is in the mapped file (all that
        ASYNC_FLUSH promises); under SYNC_FLUSH follow it with ``synced``. Lets a caller skip a
        coroutine on the path most sends take."""
        return self._append(msg, self._message_steps)

    def append_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        """``put_messages`` without the flush wait, as ``append_message`` is for one."""
        return self._append(batch, self._batch_steps)

    def append_run(self, entries: Sequence[RunEntry], born_host: Host, store_host: Host) -> PutMessageResult:
        """Messages in one go (``CommitLog.append_run``), each then queued, indexed and announced
        to waiting pulls, with one result for them all: stored together or not at all."""
        return self._append(entries, self._run_steps, (born_host, store_host))

    def _append(self, item: _P, steps: tuple[Callable[[_P], Sequence[ConsumeQueue]], Callable[..., AppendMessageResult],
                                             Callable[[_P, AppendMessageResult], None]],
                hosts: tuple[Host, Host] | None = None) -> PutMessageResult:
        """Every put's steps: refused while shut down, a slave or on a full disk; the ConsumeQueue
        files it needs made first (a refused put leaves none behind); the append and its dispatch
        in one step: nothing can run between a record landing in the log and its queue unit, so a
        reader never sees a queue behind the log it was told about."""
        if (self.shutdown_flag or self.disk_full or self.config.brokerRole == _SLAVE) and \
                (refused := self._refused()) is not None:
            return refused
        reserve, append, dispatch = steps
        made: Sequence[ConsumeQueue] = ()
        try:
            made = reserve(item)
            result = append(item) if hosts is None else append(item, *hosts)
        except OSError as exc:
            self.consume_queue_store.drop_made(*made)
            return self._create_failed(exc)
        if result.status is not _APPENDED:
            self.consume_queue_store.drop_made(*made)
            return not_appended(result)
        dispatch(item, result)
        if self.index_dispatch is not None:
            if result.keyless:
                self.index_dispatch.committed_keyless(result.wrote_offset, result.wrote_offset + result.wrote_bytes)
            else:
                self.index_dispatch.committed(result.wrote_offset + result.wrote_bytes)
        return PutMessageResult(_PUT_OK, result)

    def _create_failed(self, exc: OSError) -> PutMessageResult:
        """A put refused because a store file could not be made; nothing was written. A full
        disk is answered as Java answers it (SERVICE_NOT_AVAILABLE, its remark naming the disk)
        and refuses puts until ``check_disk_space`` sees the room the file wanted; out of
        descriptors (EMFILE) is Java's CREATE_MAPEDFILE_FAILED."""
        if isinstance(exc, DiskFullError):
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    remark=self.clean_commit_log_service.disk_filled(exc))
        log.error("create mapped file failed: %s", exc)
        return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark=f"create mapped file failed: {exc}")

    # -- reads ------------------------------------------------------------------------------

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return self.consume_queue_store.find_consume_queue(topic, queue_id)

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    message_filter: MessageFilter = MATCH_ALL) -> GetMessageResult:
        return get_message.get_message(self, group, topic, queue_id, offset, max_msg_nums, message_filter)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.consume_queue_store.get_max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.consume_queue_store.get_min_offset_in_queue(topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        return self.consume_queue_store.get_commit_log_offset_in_queue(topic, queue_id, cq_offset)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        return self.consume_queue_store.get_offset_in_queue_by_time(topic, queue_id, timestamp)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.consume_queue_store.get_earliest_message_time(topic, queue_id)

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        return self.consume_queue_store.get_message_store_timestamp(topic, queue_id, cq_offset)

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> bytes | None:
        """The stored record at a CommitLog offset (VIEW_MESSAGE_BY_ID)."""
        return get_message.look_message_by_offset(self, commit_log_offset, size)

    async def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[bytes]:
        return await get_message.query_message(self, topic, key, max_num, begin, end)

    # -- replication (a slave's side; docs/ha.md) ----------------------------------------------

    def append_to_commit_log(self, start_offset: int, data: bytes, dispatch: bool = True) -> bool:
        """See ``ReputMessageService.append_to_commit_log``."""
        return self.reput_message_service.append_to_commit_log(start_offset, data, dispatch)

    def dispatch_replicated(self) -> None:
        self.reput_message_service.dispatch_replicated()

    def dispatch_behind_bytes(self) -> int:
        return self.reput_message_service.dispatch_behind_bytes()

    def earliest_message_time(self) -> int:
        """Store time of the CommitLog's first record (Java's getEarliestMessageTime), -1 if none."""
        log_ = self.commit_log
        if log_.max_offset <= log_.min_offset:
            return -1
        head = log_.get_data(log_.min_offset, 4)
        size = int.from_bytes(head, "big", signed=True) if head is not None else 0
        return log_.pickup_store_timestamp(log_.min_offset, size) if size > 0 else -1

    def get_max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def get_min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    def delete_topics(self, topics: set[str]) -> int:
        return self.consume_queue_store.delete_topics(topics)

    def make_consume_queues_ahead(self, topic: str, queue_nums: int) -> int:
        """A topic just created or updated: the first files of its queues made off the event loop
        for its first messages (ConsumeQueueStore.make_ahead); none on a slave, whose queues
        are written by replication, nor on a store not running or refusing puts for a full disk
        (the flag, not a new look at the disk: that cost 250 µs of the loop here while the
        allocator made files)."""
        if self.shutdown_flag or self.disk_full or self.config.brokerRole == _SLAVE:
            return 0
        return self.consume_queue_store.make_ahead(topic, queue_nums)

    # -- retention (clean.py) -----------------------------------------------------------------

    def delete_expired_files_manually(self, now: dt.datetime | None = None) -> int:
        """CommitLog files past ``fileReservedTime`` deleted now rather than at ``deleteWhen``
        (Java's executeDeleteFilesManually, mqadmin deleteExpiredCommitLog)."""
        return self.clean_commit_log_service.delete_expired_files(now or dt.datetime.now(), False)

    def clean_expired_consumer_queue(self) -> int:
        return self.clean_consume_queue_service.clean_expired_consumer_queue()

    def disk_usage_ratio(self) -> float:
        return self.clean_commit_log_service.disk_usage_ratio()

    def check_disk_space(self) -> float:
        return self.clean_commit_log_service.check_disk_space()

    async def clean_resources(self, now: dt.datetime | None = None) -> int:
        return await self.clean_commit_log_service.clean_resources(now)
