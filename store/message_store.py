"""DefaultMessageStore: the store's public face -- puts, reads, recovery, flush and retention.

The put path appends to the CommitLog and dispatches at once (ConsumeQueue unit, index keys,
the arrival listener that wakes long-polling pulls), so a message is readable by queue as soon
as its put returns. Recovery rebuilds exactly that state from the log itself, so the dispatch is
idempotent and a crash at any point loses nothing that was acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import errno
import logging
import os
import shutil
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from rocketmq_py.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Host,
    decode_record,
)
from rocketmq_py.store.checkpoint import StoreCheckpoint
from rocketmq_py.store.commit_log import (
    AppendMessageResult,
    AppendMessageStatus,
    CommitLog,
    MessageExtBatch,
    MessageExtBrokerInner,
    RunEntry,
)
from rocketmq_py.store.config import SCHEDULE_TOPIC, BrokerRole, FlushDiskType, MessageStoreConfig, parse_delay_levels
from rocketmq_py.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rocketmq_py.store.ha.ha_client import SlaveDivergedError
from rocketmq_py.store.ha.ha_service import HAService
from rocketmq_py.store.index_dispatch import (
    CHILD_SUPPORTED,
    IndexDispatchProcess,
    read_indexed_offset,
    wait_for_previous_child,
)
from rocketmq_py.store.index_file import IndexService, record_key_hashes
from rocketmq_py.store.mapped_file import DiskFullError, MappedFile

log = logging.getLogger("rocketmq.store")



class StoreLockedError(RuntimeError):
    """The store directory is held by another running store (Java's "Lock failed, MQ already
    started"): two writers on one CommitLog would corrupt it, so the second refuses to start."""

    def __init__(self, root: str) -> None:
        super().__init__(f"Lock failed, MQ already started: {root} is used by another store")
        self.root = root

class PutMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append_result: AppendMessageResult | None = None
    remark: str | None = None

    @property
    def ok(self) -> bool:
        """Stored (perhaps not yet flushed or replicated, as the status says)."""
        status = self.status
        # Identity tests: an Enum's __hash__ is Python code, and this runs for every put.
        return status is _PUT_OK or status in _STORED


_PUT_OK = PutMessageStatus.PUT_OK
_APPENDED = AppendMessageStatus.PUT_OK
_SLAVE = BrokerRole.SLAVE  # an Enum member read from its class costs 0.1 µs, every put
_QUEUED_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
_STORED = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
                     PutMessageStatus.SLAVE_NOT_AVAILABLE})


class GetMessageStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    buffers: list[bytes] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.buffers)

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.buffers)


class MessageFilter:
    """Filters by the consume queue's tag code; None tags codes (e.g. ``*``) match all."""

    def __init__(self, codes: set[int] | None = None) -> None:
        self.codes = codes

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        if not self.codes or tags_code is None:
            return True
        return tags_code in self.codes


MATCH_ALL = MessageFilter()

# (topic, queueId, logicOffset (next max offset), tagsCode, storeTimestamp)
# (topic, queue id, next queue offset, tag code, store timestamp, properties string): long
# polling wakes the pulls a new message satisfies, by tag code or (SQL92) by properties.
# Properties as the record holds them: a string, or a batch entry's UTF-8 bytes (decoded only by a
# listener that has a use for them: most arrivals find no pull waiting).
MessageArrivingListener = Callable[[str, int, int, int, int, str | bytes], None]


class DefaultMessageStore:
    def __init__(self, config: MessageStoreConfig, message_arriving_listener: MessageArrivingListener | None = None
                 ) -> None:
        self.config = config
        self.root = config.storePathRootDir
        self.commit_log = CommitLog(config)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.index_service = IndexService(os.path.join(self.root, "index"), config.maxHashSlotNum,
                                          config.maxIndexNum)
        self.checkpoint: StoreCheckpoint | None = None
        # Built on each put until start() hands the index to a child process (recovery indexes
        # inline, before any child exists).
        self._index_inline = config.messageIndexEnable
        # Read on every put; the flush type is fixed for a store's life, as in Java.
        self.sync_flush = config.flushDiskType == FlushDiskType.SYNC_FLUSH
        self.sync_master = config.brokerRole == BrokerRole.SYNC_MASTER
        # A put acknowledged with waitStoreMsgOK waits for something: the flush, the slave or both.
        self.sync_put = self.sync_flush or self.sync_master
        self.ha_service = HAService(self)
        # A slave's: where the records it received stop being dispatched (Java's reput offset);
        # set at the first append, recovery having dispatched everything before.
        self._replica_dispatched: int | None = None
        # Unknown RAM: never suggest the slave on its account.
        ram = _physical_memory()
        self._memory_for_messages = ram * config.accessMessageInMemoryMaxRatio // 100 if ram else _NEVER
        self.delay_level_table = parse_delay_levels(config.messageDelayLevel)
        self.index_dispatch: IndexDispatchProcess | None = None
        self.message_arriving_listener = message_arriving_listener
        self.shutdown_flag = True
        self.disk_full = False
        self._disk_full_remark = "the disk is full"
        self._space_needed = 0  # bytes a failed file creation wanted; puts wait until they are free
        self.commit_log.queue.space_check = self._space_check
        self._lock_fd: int | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # (offset the put needs flushed, its future, loop-time deadline), in arrival order.
        self._flush_waiters: list[tuple[int, asyncio.Future[bool], float]] = []
        self._flush_watchdog: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Future[int]] = set()
        self._flushing_to = 0
        self._group_flushed_to = 0  # the end of the last group flush that completed
        # Where the index child starts: the end of what the IndexFiles hold (set by recovery).
        self._index_from = 0
        self._last_flush = time.monotonic()

    # -- paths ------------------------------------------------------------------------------

    def _abort_file(self) -> str:
        return os.path.join(self.root, "abort")

    def _cq_root(self) -> str:
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
        self._lock()
        last_exit_ok = not os.path.exists(self._abort_file())
        self.checkpoint = StoreCheckpoint(os.path.join(self.root, "checkpoint"))
        self.commit_log.queue.load()
        self._load_consume_queues()
        wait_for_previous_child(self.root, 10.0)
        self.index_service.load(last_exit_ok, self.checkpoint.index_msg_timestamp)
        self._recover(last_exit_ok)
        with open(self._abort_file(), "w"):
            pass
        log.info("load over, and the result is OK, last shutdown %s", "normal" if last_exit_ok else "abnormal")
        return last_exit_ok

    def _lock(self) -> None:
        try:
            import fcntl
        except ImportError:
            log.warning("the store lock is POSIX-only: nothing stops a second broker on %s here", self.root)
            return
        fd = os.open(os.path.join(self.root, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreLockedError(self.root) from None
        self._lock_fd = fd

    def _load_consume_queues(self) -> None:
        root = self._cq_root()
        if not os.path.isdir(root):
            return
        for topic in os.listdir(root):
            tdir = os.path.join(root, topic)
            for qid in os.listdir(tdir):
                if qid.lstrip("-").isdigit():
                    cq = self.find_consume_queue(topic, int(qid))
                    cq.load()

    def _recover(self, last_exit_ok: bool) -> None:
        child = self.config.messageIndexEnable and self.config.messageIndexInChildProcess and CHILD_SUPPORTED
        inline, self._index_inline = self._index_inline, self._index_inline and not child
        try:
            self._recover_logs(last_exit_ok)
        finally:
            self._index_inline = inline
        if child:
            # The child builds what the index lacks, from where it ends, once the store starts:
            # where the last child stopped, or before that if IndexFiles are gone.
            indexed = read_indexed_offset(self.root) if last_exit_ok else None
            resume = self._index_resume_offset()
            self._index_from = resume if indexed is None else min(indexed, resume)

    def _recover_logs(self, last_exit_ok: bool) -> None:
        max_phy_of_cq = 0
        for queues in self.consume_queue_table.values():
            for cq in queues.values():
                cq.recover()
                max_phy_of_cq = max(max_phy_of_cq, cq.max_physic_offset)
        if last_exit_ok:
            self._recover_commit_log(normal=True)
        else:
            self._recover_commit_log(normal=False)
        end = self.commit_log.max_offset
        if max_phy_of_cq > end:
            log.warning("maxPhyOffsetOfConsumeQueue(%d) >= processOffset(%d), truncate dirty logic files",
                        max_phy_of_cq, end)
            for queues in self.consume_queue_table.values():
                for cq in queues.values():
                    cq.truncate_dirty_logic_files(end)
        if not self.commit_log.queue.files:
            for queues in self.consume_queue_table.values():
                for cq in queues.values():
                    cq.destroy()
            self.consume_queue_table.clear()
        # Like Java's reput start: queues (or the index) missing records the log holds -- deleted
        # by hand, or never flushed before a crash -- are rebuilt from the log.
        reput_from = max([self.commit_log.min_offset, self.index_service.max_phy_offset] + [
            cq.max_physic_offset for qs in self.consume_queue_table.values() for cq in qs.values()])
        if self._any_queue_missing() or reput_from < self.commit_log.max_offset:
            self._reput(self.commit_log.min_offset if self._any_queue_missing() else reput_from)
        indexed = read_indexed_offset(self.root)
        if last_exit_ok and self._index_inline and indexed is not None \
                and max(indexed, self.commit_log.min_offset) < self.commit_log.max_offset:
            # The index child stopped short of the end last time: finish its work here.
            self._reput(max(indexed, self.commit_log.min_offset), index_only=True)
        min_phy = self.commit_log.min_offset
        table = self.commit_log.topic_queue_table
        table.clear()
        for topic, queues in self.consume_queue_table.items():
            for qid, cq in queues.items():
                table[(topic, qid)] = cq.max_offset_in_queue
                cq.correct_min_offset(min_phy)

    def _any_queue_missing(self) -> bool:
        """True when the log holds records but no consume queue survived at all."""
        return self.commit_log.max_offset > self.commit_log.min_offset and not any(
            cq.queue.files for qs in self.consume_queue_table.values() for cq in qs.values())

    def _reput(self, from_offset: int, index_only: bool = False) -> None:
        """Dispatch every record from ``from_offset`` to the end of the log (idempotent)."""
        for mf in self.commit_log.queue.files:
            if mf.file_from_offset + mf.wrote_position <= from_offset:
                continue
            pos = max(0, from_offset - mf.file_from_offset)
            while pos < mf.wrote_position:
                # Mapped again per record: dispatching may create files and release this mapping.
                size, msg, valid = self.commit_log.check_record(mf.mapping(), pos, mf.wrote_position
                                                                if mf.wrote_position < mf.file_size else mf.file_size)
                if not valid or size <= 0:
                    break
                if msg is not None:
                    if index_only:
                        self._build_index(msg)
                    else:
                        self._dispatch(msg, size, notify=False)
                    pos += size
                else:
                    break
        log.info("reput from %d done", from_offset)

    def _recover_commit_log(self, normal: bool) -> None:
        """Find where the log's valid records end, from the file Java's recovery starts at.

        Normal: the last three files, checked only. Abnormal (recoverAbnormally): from the
        newest file whose first record is no newer than the checkpoint says is durable
        everywhere (isMappedFileMatchedRecover), re-dispatching what the queues lack: a record
        whose queue offset its ConsumeQueue already holds is skipped, as Java's
        putMessagePositionInfo skips it, but without decoding it first."""
        files = self.commit_log.queue.files
        if not files:
            return
        if normal:
            start = max(0, len(files) - 3)
        else:
            start = self._abnormal_recovery_start(files)
        pending = None if normal else {(cq.topic.encode(), qid): cq.max_offset_in_queue
                                       for qs in self.consume_queue_table.values() for qid, cq in qs.items()}
        # The index child, when there is one, resumes where the index ends (start()); inline,
        # the records past that end are indexed here.
        index_from = _NEVER if normal or not self._index_inline else self._index_resume_offset()
        end_offset = files[start].file_from_offset
        for mf in files[start:]:
            pos, whole, to_dispatch = self.commit_log.scan_records(mf.mapping(), 0, mf.file_size, pending,
                                                                   index_from, mf.file_from_offset)
            for at in to_dispatch:
                # Mapped again per record: dispatching may create files and release this mapping.
                size, msg, valid = self.commit_log.check_record(mf.mapping(), at, mf.file_size)
                if msg is None or not valid:  # properties that are not UTF-8: the log ends here
                    pos, whole = at, False
                    break
                self._dispatch(msg, size, notify=False)
            end_offset = mf.file_from_offset + pos
            if not whole:
                break
        # Zero the torn tail so a later scan never mistakes stale bytes for records.
        for mf in files:
            if mf.file_from_offset <= end_offset < mf.file_from_offset + mf.file_size:
                _zero_from(mf, end_offset - mf.file_from_offset)
        self.commit_log.queue.set_position(end_offset)
        log.info("recover commit log %s from file %d, end offset %d", "normally" if normal else "abnormally",
                 files[start].file_from_offset, end_offset)

    def _abnormal_recovery_start(self, files: list[MappedFile]) -> int:
        """The index of the newest file whose first record was stored no later than the
        checkpoint's minimum (Java's isMappedFileMatchedRecover); the first file if none is."""
        assert self.checkpoint is not None
        min_ts = self.checkpoint.min_timestamp(self.config.messageIndexEnable and self.config.messageIndexSafe)
        for i in range(len(files) - 1, -1, -1):
            ts = self.commit_log.pickup_store_timestamp(files[i].file_from_offset, 92)
            if 0 < ts <= min_ts:
                return i
        return 0

    def _index_resume_offset(self) -> int:
        """Where indexing resumes after a crash: past the last record the surviving IndexFiles
        hold (its entries are there; IndexService.load dropped any file newer than the
        checkpoint), or the log's start when no IndexFile survived."""
        end = self.index_service.max_phy_offset
        if not self.index_service.files or end < self.commit_log.min_offset:
            return self.commit_log.min_offset
        data = self.commit_log.get_data(end, 8)
        if data is None:
            return end
        size, magic = struct.unpack(">ii", data)
        return end + size if magic == MESSAGE_MAGIC_CODE and size > 0 else end

    async def start(self) -> None:
        self.shutdown_flag = False
        loop = asyncio.get_running_loop()
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
                self._index_inline = False
        self._tasks = [loop.create_task(self._flush_commit_log_service()),
                       loop.create_task(self._flush_consume_queue_service()),
                       loop.create_task(self._clean_service())]
        self.check_disk_space()

    async def shutdown(self) -> None:
        self.shutdown_flag = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._flushes:
            await asyncio.wait(self._flushes)
        index_complete = True
        if self.index_dispatch is not None:
            index_complete = await asyncio.to_thread(self.index_dispatch.stop, 30.0)
        await asyncio.to_thread(self._flush_all, index_complete)
        if self.index_dispatch is not None:
            self.index_dispatch.close()
            self.index_dispatch = None
        if self._flush_watchdog is not None:
            self._flush_watchdog.cancel()
            self._flush_watchdog = None
        for _, fut, _ in self._flush_waiters:
            if not fut.done():
                fut.set_result(True)
        self._flush_waiters.clear()
        await asyncio.to_thread(self.commit_log.warmer.close)
        self.commit_log.queue.close()
        for queues in self.consume_queue_table.values():
            for cq in queues.values():
                cq.queue.close()
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
        self.commit_log.queue.flush()
        for queues in list(self.consume_queue_table.values()):
            for cq in list(queues.values()):
                cq.flush()
        self.index_service.flush()
        if self.checkpoint is not None:
            ts = self.commit_log.last_store_timestamp
            if ts:
                self.checkpoint.physic_msg_timestamp = ts
                self.checkpoint.logics_msg_timestamp = ts
                self.checkpoint.index_msg_timestamp = ts if index_complete else self._index_flushed_timestamp(ts)
            self.checkpoint.flush()

    def _index_flushed_timestamp(self, ts: int) -> int:
        """Store time up to which the index is on disk: the child's report, or ``ts`` inline."""
        if self.index_dispatch is None:
            return ts
        reported = self.index_dispatch.flushed_timestamp
        if reported:
            return reported
        return self.checkpoint.index_msg_timestamp if self.checkpoint is not None else 0

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
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=self._disk_full_remark)

    def _reserve_queue(self, topic: str, queue_id: int, count: int) -> ConsumeQueue | None:
        """The ConsumeQueue files for ``count`` more units of a queue, made before the CommitLog
        takes their records (``ConsumeQueue.reserve``); the queue when it was made for this put
        (``_drop_made`` removes it again if the put is refused)."""
        queues = self.consume_queue_table.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        made = None
        if cq is None:
            cq = made = self.find_consume_queue(topic, queue_id)
        if not cq.has_room(count):
            try:
                cq.reserve(self.commit_log.topic_queue_table.get((topic, queue_id), 0), count)
            except OSError:
                self._drop_made(made)
                raise
        return made

    def _reserve_run(self, entries: Sequence[RunEntry]) -> list[ConsumeQueue]:
        count = len(entries)  # a bound on any one queue's share of the run
        seen = set()
        made: list[ConsumeQueue] = []
        try:
            for entry in entries:
                if entry[6] & TRANSACTION_ROLLBACK_TYPE in _QUEUED_TYPES:
                    key = entry[0], entry[1]
                    if key not in seen:
                        seen.add(key)
                        cq = self._reserve_queue(key[0], key[1], count)
                        if cq is not None:
                            made.append(cq)
        except OSError:
            self._drop_made(*made)
            raise
        return made

    def _drop_made(self, *queues: ConsumeQueue | None) -> None:
        """Queues made for a put that was refused, removed: a refused put leaves no trace."""
        for cq in queues:
            if cq is None:
                continue
            cq.destroy()
            topic_queues = self.consume_queue_table.get(cq.topic)
            if topic_queues is not None and topic_queues.get(cq.queue_id) is cq:
                del topic_queues[cq.queue_id]
                if not topic_queues:
                    del self.consume_queue_table[cq.topic]
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(self._cq_root(), cq.topic))

    async def put_message(self, msg: MessageExtBrokerInner, wait_store_msg_ok: bool = True) -> PutMessageResult:
        result = self.append_message(msg)
        if wait_store_msg_ok and self.sync_put:
            return await self.synced(result)
        return result

    async def put_messages(self, batch: MessageExtBatch, wait_store_msg_ok: bool = True) -> PutMessageResult:
        """Store a batch; resolves after the flush under SYNC_FLUSH."""
        result = self.append_messages(batch)
        if wait_store_msg_ok and self.sync_put:
            return await self.synced(result)
        return result

    async def synced(self, result: PutMessageResult) -> PutMessageResult:
        """``result`` once its record is flushed (SYNC_FLUSH) and on the slave (SYNC_MASTER), or
        what kept it from being so."""
        append = result.append_result
        if result.status is not _PUT_OK or append is None:
            return result
        status = await self.stored_to(append.wrote_offset + append.wrote_bytes)
        return result if status is _PUT_OK else PutMessageResult(status, append)

    async def stored_to(self, offset: int) -> PutMessageStatus:
        """PUT_OK once the log is flushed (SYNC_FLUSH) and acknowledged by the slave (SYNC_MASTER)
        up to ``offset``, both awaited at once; else FLUSH_DISK_TIMEOUT after syncFlushTimeout,
        FLUSH_SLAVE_TIMEOUT after slaveTimeout, or SLAVE_NOT_AVAILABLE when no slave is connected
        or it is more than haSlaveFallbehindMax behind (the flush's status first, as in Java)."""
        flushed = self.flushed_to(offset) if self.sync_flush else None
        replicated = None
        replica_status = _PUT_OK
        if self.sync_master:
            if self.ha_service.is_slave_ok(offset):
                replicated = self.ha_service.wait_transfer(offset)
            else:
                replica_status = PutMessageStatus.SLAVE_NOT_AVAILABLE
        if flushed is not None and not await flushed:
            if replicated is not None:
                await replicated
            return PutMessageStatus.FLUSH_DISK_TIMEOUT
        if replicated is not None and not await replicated:
            return PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return replica_status

    def append_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        """``put_messages`` without the flush wait, as ``append_message`` is for one.

        Appends and dispatches in one step: nothing can run between a record landing in the log
        and its queue unit, so a reader never sees a queue behind the log it was told about."""
        if (self.shutdown_flag or self.disk_full or self.config.brokerRole == _SLAVE) and \
                (refused := self._refused()) is not None:
            return refused
        made = None
        try:
            if batch.sys_flag & TRANSACTION_ROLLBACK_TYPE in _QUEUED_TYPES:
                made = self._reserve_queue(batch.topic, batch.queue_id, len(batch.entries))
            result = self.commit_log.append_batch(batch)
        except OSError as exc:
            self._drop_made(made)
            return self._create_failed(exc)
        if result.status is not _APPENDED:
            self._drop_made(made)
            return self._not_appended(result)
        self._dispatch_batch(batch, result)
        if self.index_dispatch is not None:
            self.index_dispatch.committed(result.wrote_offset + result.wrote_bytes)
        return PutMessageResult(_PUT_OK, result)

    def append_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """``put_message`` without the flush wait: the record is in the mapped file (all that
        ASYNC_FLUSH promises); under SYNC_FLUSH follow it with ``synced``. Lets a caller skip a
        coroutine on the path most sends take. The same steps as ``append_run``."""
        if (self.shutdown_flag or self.disk_full or self.config.brokerRole == _SLAVE) and \
                (refused := self._refused()) is not None:
            return refused
        made = None
        try:
            if msg.sys_flag & TRANSACTION_ROLLBACK_TYPE in _QUEUED_TYPES:
                made = self._reserve_queue(msg.topic, msg.queue_id, 1)
            result = self.commit_log.append_message(msg)
        except OSError as exc:
            self._drop_made(made)
            return self._create_failed(exc)
        if result.status is not _APPENDED:
            self._drop_made(made)
            return self._not_appended(result)
        self._dispatch(msg, result.wrote_bytes, True)
        if self.index_dispatch is not None:
            self.index_dispatch.committed(result.wrote_offset + result.wrote_bytes)
        return PutMessageResult(_PUT_OK, result)

    def append_run(self, entries: Sequence[RunEntry], born_host: Host, store_host: Host) -> PutMessageResult:
        """Messages in one go (``CommitLog.append_run``), each then queued, indexed and announced
        to waiting pulls, with one result for them all: stored together or not at all. The same
        steps as ``append_messages``."""
        if (self.shutdown_flag or self.disk_full or self.config.brokerRole == _SLAVE) and \
                (refused := self._refused()) is not None:
            return refused
        made: list[ConsumeQueue] = []
        try:
            made = self._reserve_run(entries)
            result = self.commit_log.append_run(entries, born_host, store_host)
        except OSError as exc:
            self._drop_made(*made)
            return self._create_failed(exc)
        if result.status is not _APPENDED:
            self._drop_made(*made)
            return self._not_appended(result)
        self._dispatch_run(entries, result)
        if self.index_dispatch is not None:
            self.index_dispatch.committed(result.wrote_offset + result.wrote_bytes)
        return PutMessageResult(_PUT_OK, result)

    def _create_failed(self, exc: OSError) -> PutMessageResult:
        """A put refused because a store file could not be made; nothing was written. A full
        disk is answered as Java answers it (SERVICE_NOT_AVAILABLE, its remark naming the disk)
        and refuses puts until ``check_disk_space`` sees the room the file wanted; out of
        descriptors (EMFILE) is Java's CREATE_MAPEDFILE_FAILED."""
        if isinstance(exc, DiskFullError):
            self._space_needed = max(self._space_needed, exc.needed)
            self._disk_full_remark = f"the disk is full: {exc.strerror}"
            if not self.disk_full:
                log.error("disk full, store will refuse new messages until %d bytes are free: %s", exc.needed,
                          exc.strerror)
            self.disk_full = True
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=self._disk_full_remark)
        log.error("create mapped file failed: %s", exc)
        return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark=f"create mapped file failed: {exc}")

    @staticmethod
    def _not_appended(result: AppendMessageResult) -> PutMessageResult:
        if result.status == AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED:
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, result,
                                    "properties size exceeded 32767 bytes")
        if result.status == AppendMessageStatus.UNKNOWN_ERROR:
            # The broker refuses such values in the request header (Java's int and long ranges);
            # this is the store's own guard for its other callers.
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, result,
                                    "a field does not fit the record: queue id, flag, sysFlag or reconsume times "
                                    "beyond int32, or a timestamp or offset beyond int64")
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, result,
                                "message size exceeded: body over maxMessageSize or topic over 127 bytes")

    def _dispatch(self, msg: MessageExtBrokerInner, size: int, notify: bool) -> None:
        """One record's queue unit and index keys; ``notify``: a put's (not recovery's), which
        may wake a held pull."""
        tran = msg.sys_flag & TRANSACTION_ROLLBACK_TYPE
        if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
            queues = self.consume_queue_table.get(msg.topic)
            cq = queues.get(msg.queue_id) if queues is not None else None
            if cq is None:
                cq = self.find_consume_queue(msg.topic, msg.queue_id)
            tags_code = msg.tags_code
            if msg.topic == SCHEDULE_TOPIC:
                # A parked delayed message's tag field is its delivery time (docs/store-formats.md#delay-levels).
                tags_code = msg.store_timestamp + self.delay_level_table.get(msg.queue_id + 1, 0)
            cq.put_message_position_info(msg.commit_log_offset, size, tags_code, msg.queue_offset)
            if notify and self.message_arriving_listener is not None:
                self.message_arriving_listener(msg.topic, msg.queue_id, msg.queue_offset + 1, msg.tags_code,
                                               msg.store_timestamp, msg.properties_string)
        if self._index_inline:
            self._build_index(msg)

    def _dispatch_batch(self, batch: MessageExtBatch, result: AppendMessageResult) -> None:
        """``_dispatch`` for a batch: its units go into the ConsumeQueue in one write when they
        fit in the current file, else one by one."""
        units = result.units
        assert units is not None
        topic, queue_id, first = batch.topic, batch.queue_id, result.logics_offset
        if batch.sys_flag & TRANSACTION_ROLLBACK_TYPE in _QUEUED_TYPES:
            cq = self.find_consume_queue(topic, queue_id)
            if not cq.put_units(units, first):
                for i, (offset, size, tags_code) in enumerate(units):
                    cq.put_message_position_info(offset, size, tags_code, first + i)
            listener = self.message_arriving_listener
            if listener is not None:
                store_ts = result.store_timestamp
                for logic_offset, (_flag, _body, props, tags_code) in enumerate(batch.entries, first + 1):
                    listener(topic, queue_id, logic_offset, tags_code, store_ts, props)
        if self._index_inline and batch.sys_flag & TRANSACTION_ROLLBACK_TYPE != TRANSACTION_ROLLBACK_TYPE:
            prefix = f"{topic}#".encode()
            for (_flag, _body, props, _), (offset, _, _) in zip(batch.entries, units, strict=True):
                self._index_record(prefix, props, offset, result.store_timestamp)

    def _dispatch_run(self, entries: Sequence[RunEntry], result: AppendMessageResult) -> None:
        """``_dispatch`` for the records of a run."""
        units = result.units
        assert units is not None
        store_ts = result.store_timestamp
        listener = self.message_arriving_listener
        table = self.consume_queue_table
        for (topic, queue_id, _, _, props, tags_code, sys_flag, _, _, _), (offset, size, _), queue_offset in \
                zip(entries, units, result.queue_offsets, strict=True):
            tran = sys_flag & TRANSACTION_ROLLBACK_TYPE
            if tran == TRANSACTION_NOT_TYPE or tran == TRANSACTION_COMMIT_TYPE:
                queues = table.get(topic)
                cq = queues.get(queue_id) if queues is not None else None
                if cq is None:
                    cq = self.find_consume_queue(topic, queue_id)
                # A parked delayed message's tag field is its delivery time (docs/store-formats.md#delay-levels).
                cq.put_message_position_info(offset, size, tags_code if topic != SCHEDULE_TOPIC else
                                             store_ts + self.delay_level_table.get(queue_id + 1, 0), queue_offset)
                if listener is not None:
                    listener(topic, queue_id, queue_offset + 1, tags_code, store_ts, props)
            if self._index_inline and tran != TRANSACTION_ROLLBACK_TYPE:
                self._index_record(f"{topic}#".encode(), props, offset, store_ts)

    def _build_index(self, msg: MessageExtBrokerInner) -> None:
        if msg.sys_flag & TRANSACTION_ROLLBACK_TYPE != TRANSACTION_ROLLBACK_TYPE:
            self._index_record(f"{msg.topic}#".encode(), msg.properties_string.encode(), msg.commit_log_offset,
                               msg.store_timestamp)

    def _index_record(self, prefix: bytes, props: bytes, offset: int, store_timestamp: int) -> None:
        """Index one record's KEYS and UNIQ_KEY, read from its properties as the record holds them."""
        hashes = record_key_hashes(prefix, props)
        if hashes:
            try:
                self.index_service.put_entries(hashes, [offset] * len(hashes), [store_timestamp] * len(hashes))
            except OSError as exc:
                # The record is stored and queued: it stays readable, only unfindable by key.
                log.error("build index error (a full disk?), keys of the record at %d not indexed: %s", offset, exc)

    # -- flushing ---------------------------------------------------------------------------

    def flushed_to(self, offset: int) -> asyncio.Future[bool]:
        """True once the log is on disk up to ``offset``; False after syncFlushTimeout.

        Group commit: every put waiting when a flush starts shares that one fsync.

        One watchdog timer serves all waiters (not a timer per put: at tens of thousands of
        synced puts a second, creating and cancelling those costs more than the puts)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if offset <= self._group_flushed_to:  # asked after the flush that covers it ended
            fut.set_result(True)
            return fut
        timeout = self.config.syncFlushTimeout / 1000
        self._flush_waiters.append((offset, fut, loop.time() + timeout))
        if self._flush_watchdog is None:
            self._flush_watchdog = loop.call_later(timeout, self._expire_flush_waiters)
        self._start_group_flush()
        return fut

    def _start_group_flush(self) -> None:
        """Start an fsync covering everything appended so far, unless one is running or already
        covers the newest waiter.

        Starting at once (not after every writer made ready has appended) keeps the disk and
        the event loop busy at the same time: while one flush runs, the puts that follow it
        gather into the next. One flush at a time: this disk's fsync cost grows with the bytes
        it writes, and two at once measured slower than one. A flush resolves the waiters up
        to the end it saw when it started."""
        waiters = self._flush_waiters
        if len(self._flushes) >= _MAX_GROUP_FLUSHES or not waiters or waiters[-1][0] <= self._flushing_to:
            return
        target = self._flushing_to = self.commit_log.max_offset
        ts = self.commit_log.last_store_timestamp
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, self.commit_log.queue.flush)
        self._flushes.add(fut)
        fut.add_done_callback(lambda f: self._group_flush_done(f, target, ts))

    def _group_flush_done(self, fut: asyncio.Future[int], target: int, store_timestamp: int) -> None:
        self._flushes.discard(fut)
        if fut.cancelled() or fut.exception() is not None:
            log.error("group commit flush failed: %s", "cancelled" if fut.cancelled() else fut.exception())
            return  # its waiters time out with FLUSH_DISK_TIMEOUT
        self._after_commit_log_flush(store_timestamp)
        self._group_flushed_to = max(self._group_flushed_to, target)
        still = []
        for waiter in self._flush_waiters:
            if waiter[0] <= target:
                _resolve(waiter[1], True)
            else:
                still.append(waiter)
        self._flush_waiters = still
        if not self.shutdown_flag:
            self._start_group_flush()

    def _expire_flush_waiters(self) -> None:
        self._flush_watchdog = None
        now = asyncio.get_running_loop().time()
        keep = []
        for waiter in self._flush_waiters:
            if waiter[2] <= now:
                _resolve(waiter[1], False)
            else:
                keep.append(waiter)
        self._flush_waiters = keep
        if keep:
            self._flush_watchdog = asyncio.get_running_loop().call_later(keep[0][2] - now,
                                                                         self._expire_flush_waiters)

    async def _flush_commit_log_service(self) -> None:
        """ASYNC_FLUSH's periodic flush. Under SYNC_FLUSH the puts drive group commit
        (_start_group_flush), and this still flushes what puts that did not wait left dirty."""
        cfg = self.config
        while True:
            await asyncio.sleep(cfg.flushIntervalCommitLog / 1000)
            thorough = time.monotonic() - self._last_flush >= cfg.flushCommitLogThoroughInterval / 1000
            if thorough or self.commit_log.queue.dirty_bytes() >= cfg.flushCommitLogLeastPages * 4096:
                ts = self.commit_log.last_store_timestamp
                try:
                    await asyncio.to_thread(self.commit_log.queue.flush)
                except OSError as exc:  # retried next round: the service must outlive a bad moment
                    log.error("flush commit log failed: %s", exc)
                    continue
                self._after_commit_log_flush(ts)

    def _after_commit_log_flush(self, store_timestamp: int) -> None:
        """``store_timestamp``: the newest record's store time when the flush started (records
        appended while it ran may not be on disk)."""
        self._last_flush = time.monotonic()
        if self.checkpoint is not None and store_timestamp:
            self.checkpoint.physic_msg_timestamp = store_timestamp

    async def _flush_consume_queue_service(self) -> None:
        cfg = self.config
        last_thorough = time.monotonic()
        while True:
            await asyncio.sleep(cfg.flushIntervalConsumeQueue / 1000)
            ts = self.commit_log.last_store_timestamp
            queues = [cq for qs in self.consume_queue_table.values() for cq in qs.values()]
            try:
                await asyncio.to_thread(_flush_queues, queues)
            except OSError as exc:
                log.error("flush consume queues failed: %s", exc)
                continue
            if time.monotonic() - last_thorough >= cfg.flushConsumeQueueThoroughInterval / 1000:
                last_thorough = time.monotonic()
                await asyncio.to_thread(self.index_service.flush)
                if self.checkpoint is not None and ts:
                    self.checkpoint.logics_msg_timestamp = ts
                    self.checkpoint.index_msg_timestamp = self._index_flushed_timestamp(ts)
                    await asyncio.to_thread(self.checkpoint.flush)
            if self.index_dispatch is not None:
                self.index_dispatch.ensure_running()

    # -- reads ------------------------------------------------------------------------------

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        queues = self.consume_queue_table.get(topic)
        if queues is None:
            queues = self.consume_queue_table[topic] = {}
        cq = queues.get(queue_id)
        if cq is None:
            cq = queues[queue_id] = ConsumeQueue(topic, queue_id, self._cq_root(),
                                                 self.config.mappedFileSizeConsumeQueue)
            cq.queue.space_check = self._space_check
        return cq

    def _existing_cq(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queue_table.get(topic, {}).get(queue_id)

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    message_filter: MessageFilter = MATCH_ALL) -> GetMessageResult:
        cq = self._existing_cq(topic, queue_id)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, next_begin_offset=0)
        min_offset, max_offset = cq.min_offset_in_queue, cq.max_offset_in_queue
        result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, min_offset=min_offset, max_offset=max_offset)
        if max_offset == 0:
            result.next_begin_offset = 0
        elif offset < min_offset:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_offset
        elif offset == max_offset:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_ONE, offset
        elif offset > max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            result.next_begin_offset = min_offset if min_offset == 0 else max_offset
        else:
            self._read_queue(cq, offset, max_msg_nums, message_filter, result)
        return result

    def _read_queue(self, cq: ConsumeQueue, offset: int, max_msg_nums: int, message_filter: MessageFilter,
                    result: GetMessageResult) -> None:
        cfg = self.config
        units = cq.units_from(offset, max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE))
        if units is None:
            result.status = GetMessageStatus.OFFSET_FOUND_NULL
            file_size = cq.file_size // CQ_STORE_UNIT_SIZE
            result.next_begin_offset = (offset // file_size + 1) * file_size
            return
        max_count = min(max_msg_nums, cfg.maxTransferCountOnMessageInMemory)
        min_phy = self.commit_log.min_offset
        total = 0
        scanned = 0
        last_phy = -1
        removing = False
        for phy, size, tags_code in units:
            if len(result.buffers) >= max_count or (
                    result.buffers and total + size > cfg.maxTransferBytesOnMessageInMemory):
                break
            scanned += 1
            if size == 0x7FFFFFFF:
                continue
            if phy < min_phy:
                removing = True
                continue
            if not message_filter.is_matched_by_consume_queue(tags_code):
                continue
            data = self.commit_log.get_data(phy, size)
            if data is None:
                removing = True
                continue
            result.buffers.append(data)
            total += size
            last_phy = phy
        result.next_begin_offset = offset + scanned
        if last_phy >= 0:
            # Java's rule: what lies further behind the log's end than accessMessageInMemoryMaxRatio
            # of RAM is read from disk, and a master may point such a consumer at its slave.
            result.suggest_pulling_from_slave = self.commit_log.max_offset - last_phy > self._memory_for_messages
        if result.buffers:
            result.status = GetMessageStatus.FOUND
        else:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING if removing else GetMessageStatus.NO_MATCHED_MESSAGE

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        return cq.max_offset_in_queue if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        return cq.min_offset_in_queue if cq else -1

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        unit = cq.unit_at(cq_offset) if cq else None
        return unit[0] if unit else 0

    def _unit_store_timestamp(self, cq: ConsumeQueue, index: int) -> int:
        unit = cq.unit_at(index)
        return self.commit_log.pickup_store_timestamp(unit[0], unit[1]) if unit else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Binary search by store time: an exact match, else the nearer neighbour (Java's rule)."""
        cq = self._existing_cq(topic, queue_id)
        if cq is None:
            return 0
        low, high = cq.min_offset_in_queue, cq.max_offset_in_queue - 1
        if high < low:
            return 0
        left, right = -1, -1
        while low <= high:
            mid = (low + high) // 2
            ts = self._unit_store_timestamp(cq, mid)
            if ts < 0:
                return 0
            if ts == timestamp:
                return mid
            if ts < timestamp:
                left, low = mid, mid + 1
            else:
                right, high = mid, mid - 1
        if left != -1 and right != -1:
            left_diff = timestamp - self._unit_store_timestamp(cq, left)
            right_diff = self._unit_store_timestamp(cq, right) - timestamp
            return left if left_diff <= right_diff else right
        if right != -1:
            return right
        return left + 1 if left != -1 else 0

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        if cq is None:
            return -1
        return self._unit_store_timestamp(cq, cq.min_offset_in_queue)

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        return self._unit_store_timestamp(cq, cq_offset) if cq else -1

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> bytes | None:
        """The stored record at a CommitLog offset (VIEW_MESSAGE_BY_ID)."""
        if size is None:
            head = self.commit_log.get_data(commit_log_offset, 4)
            if head is None:
                return None
            size = int.from_bytes(head, "big", signed=True)
            if size <= 0:
                return None
        return self.commit_log.get_data(commit_log_offset, size)

    async def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[bytes]:
        """Records whose KEYS or UNIQ_KEY equal ``key`` (hashes re-checked on the records).
        Read your writes: a key whose put has returned is findable. The wait for the index
        child leaves the event loop free, and a stuck child costs a query one second."""
        if self.index_dispatch is not None:
            await self.index_dispatch.wait_indexed_async(1.0)
            self.index_service.refresh()
        found = []
        for phy in self.index_service.query_offset(topic, key, max_num, begin, end):
            data = self.look_message_by_offset(phy)
            if data is None:
                continue
            msg = decode_record(data, read_body=False)
            keys = (msg.properties.get("KEYS") or "").split(" ")
            if msg.topic == topic and (key in keys or msg.properties.get("UNIQ_KEY") == key):
                found.append(data)
        return found

    # -- replication (a slave's side; docs/ha.md) ----------------------------------------------

    def append_to_commit_log(self, start_offset: int, data: bytes, dispatch: bool = True) -> bool:
        """Bytes a master sent, appended at exactly ``start_offset`` (the log's end, or a file's
        start when the log is empty) and within one file; False, appending nothing, otherwise.
        The records they complete are dispatched as puts are (now, or by ``dispatch_replicated``
        when ``dispatch`` is False: Java's slave acknowledges before its reput dispatches);
        SlaveDivergedError when they are not this log's continuation (the log is then cut back
        to its last whole record)."""
        if self.shutdown_flag:
            log.warning("message store has shutdown, so appendToPhyQueue is forbidden")
            return False
        queue = self.commit_log.queue
        if queue.files:
            if start_offset != queue.max_offset:
                return False
            if self._replica_dispatched is None:
                self._replica_dispatched = queue.max_offset
            mf = queue.get_last_mapped_file()
        else:
            if start_offset % queue.file_size:
                return False
            mf = queue.get_last_mapped_file(start_offset)
            self._replica_dispatched = start_offset
        pos = start_offset - mf.file_from_offset
        if pos != mf.wrote_position or pos + len(data) > mf.file_size:
            return False
        mf.append(data)
        if dispatch:
            self.dispatch_replicated()
        return True

    def dispatch_replicated(self) -> None:
        """Dispatch every whole record received since the last call."""
        queue = self.commit_log.queue
        at = self._replica_dispatched
        if at is None:
            return
        try:
            while True:
                mf = queue.find_mapped_file_by_offset(at)
                if mf is None:
                    break
                pos, limit = at - mf.file_from_offset, mf.wrote_position
                if pos + 8 > limit:
                    break
                total, magic = struct.unpack_from(">ii", mf.mm, pos)
                if magic == BLANK_MAGIC_CODE and pos + total == mf.file_size:
                    if limit < mf.file_size:
                        break
                    at = mf.file_from_offset + mf.file_size
                    continue
                if magic != MESSAGE_MAGIC_CODE or total <= 0 or pos + total > mf.file_size:
                    raise SlaveDivergedError(f"the master's bytes at offset {at} are no record of this log")
                if pos + total > limit:
                    break
                size, msg, valid = self.commit_log.check_record(mf.mm, pos, limit)
                if not valid or msg is None or msg.commit_log_offset != at:
                    raise SlaveDivergedError(f"the master's record at offset {at} does not continue this log "
                                             f"(it names offset {None if msg is None else msg.commit_log_offset})")
                self._dispatch(msg, size, True)
                self.commit_log.last_store_timestamp = msg.store_timestamp
                self.commit_log.topic_queue_table[(msg.topic, msg.queue_id)] = msg.queue_offset + 1
                at += size
        except SlaveDivergedError:
            mf = queue.find_mapped_file_by_offset(at)
            if mf is not None:
                _zero_from(mf, at - mf.file_from_offset)
                mf.wrote_position = at - mf.file_from_offset
            raise
        finally:
            self._replica_dispatched = at
            if self.index_dispatch is not None:
                self.index_dispatch.committed(at)

    def earliest_message_time(self) -> int:
        """Store time of the CommitLog's first record (Java's getEarliestMessageTime), -1 if none."""
        log_ = self.commit_log
        if log_.max_offset <= log_.min_offset:
            return -1
        head = log_.get_data(log_.min_offset, 4)
        size = int.from_bytes(head, "big", signed=True) if head is not None else 0
        return log_.pickup_store_timestamp(log_.min_offset, size) if size > 0 else -1

    def dispatch_behind_bytes(self) -> int:
        """CommitLog bytes not yet in the consume queues: a master dispatches with each put (0);
        a slave what it received past its reput offset."""
        at = self._replica_dispatched
        return max(self.commit_log.max_offset - at, 0) if at is not None else 0

    def get_max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def get_min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    def delete_topics(self, topics: set[str]) -> int:
        count = 0
        for topic in topics:
            queues = self.consume_queue_table.pop(topic, None)
            if not queues:
                continue
            for qid, cq in queues.items():
                cq.destroy()
                self.commit_log.topic_queue_table.pop((topic, qid), None)
                count += 1
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(self._cq_root(), topic))
        return count

    # -- retention --------------------------------------------------------------------------

    def delete_expired_files_manually(self, now: dt.datetime | None = None) -> int:
        """CommitLog files past ``fileReservedTime`` deleted now rather than at ``deleteWhen``
        (Java's executeDeleteFilesManually, mqadmin deleteExpiredCommitLog)."""
        return self._delete_expired_files(now or dt.datetime.now(), False)

    def clean_expired_consumer_queue(self) -> int:
        """Queues whose every unit points below the CommitLog's first offset (their messages are
        gone) destroyed, except the delay levels'; how many (Java's cleanExpiredConsumerQueue)."""
        min_phy = self.commit_log.min_offset
        removed = 0
        for topic, queues in list(self.consume_queue_table.items()):
            if topic == SCHEDULE_TOPIC:
                continue
            for qid, cq in list(queues.items()):
                last = cq.unit_at(cq.max_offset_in_queue - 1) if cq.max_offset_in_queue > 0 else None
                if last is not None and last[0] + last[1] < min_phy:
                    log.info("cleanExpiredConsumerQueue: %s %d consumer queue destroyed", topic, qid)
                    cq.destroy()
                    del queues[qid]
                    self.commit_log.topic_queue_table.pop((topic, qid), None)
                    removed += 1
            if not queues:
                del self.consume_queue_table[topic]
        return removed

    def _disk_usage(self) -> tuple[int, int, int]:
        """(total, used, free) bytes of the CommitLog's filesystem."""
        total, used, free = shutil.disk_usage(self.config.commit_log_dir()
                                              if os.path.isdir(self.config.commit_log_dir()) else self.root)
        return total, used, free

    def disk_usage_ratio(self) -> float:
        total, used, _ = self._disk_usage()
        return used / total if total else 0.0

    def check_disk_space(self) -> float:
        """Refresh the disk-full flag: puts are refused while usage is above the warning ratio, or
        while less is free than a file whose creation failed wanted."""
        total, used, free = self._disk_usage()
        ratio = used / total if total else 0.0
        warning = ratio > self.config.diskSpaceWarningLevelRatio
        full = warning or free < self._space_needed
        if full != self.disk_full:
            if full:
                log.error("physic disk maybe full soon, so reclaim space, %.2f, store will refuse new messages",
                          ratio)
            else:
                log.info("physic disk space OK %.2f, store accepts messages again", ratio)
        if warning:
            self._disk_full_remark = (f"the disk is full: usage {ratio:.2f} above diskSpaceWarningLevelRatio "
                                      f"{self.config.diskSpaceWarningLevelRatio}")
        if not full:
            self._space_needed = 0
        self.disk_full = full
        return ratio

    def _space_check(self, needed: int) -> None:
        """Before a new store file: refused (DiskFullError) on a disk above the warning ratio.
        Not during recovery: the files it makes hold messages the log already has."""
        if self.shutdown_flag:
            return
        self.check_disk_space()
        if self.disk_full:
            raise DiskFullError(self._disk_full_remark, needed)

    def _is_time_to_delete(self, now: dt.datetime) -> bool:
        return f"{now.hour:02d}" in {h.strip().zfill(2) for h in self.config.deleteWhen.split(";") if h.strip()}

    async def _clean_service(self) -> None:
        # Java's first run is after 60 s; here the interval applies from the start so that
        # tests with a short interval see the disk flag move.
        while True:
            await asyncio.sleep(self.config.cleanResourceInterval / 1000)
            try:
                await self.clean_resources()
            except OSError as exc:  # out of descriptors, say: the next round tries again
                log.error("clean resources failed: %s", exc)

    async def clean_resources(self, now: dt.datetime | None = None) -> int:
        """One retention round: expired CommitLog files, then the queues and index behind them."""
        ratio = self.check_disk_space()
        cfg = self.config
        now = now or dt.datetime.now()
        forced = cfg.cleanFileForciblyEnable and ratio > cfg.diskSpaceCleanForciblyRatio
        if not (self._is_time_to_delete(now) or ratio > cfg.diskMaxUsedSpaceRatio / 100 or forced):
            return 0
        return self._delete_expired_files(now, forced)

    def _delete_expired_files(self, now: dt.datetime, forced: bool) -> int:
        cfg = self.config
        files = self.commit_log.queue.files
        expire_before = now.timestamp() - cfg.fileReservedTime * 3600
        deleted = 0
        # Never the last file: it is the one being written.
        while deleted < 10 and len(files) > deleted + 1:
            mf = files[deleted]
            if not forced and os.path.getmtime(mf.path) > expire_before:
                break
            deleted += 1
        if deleted:
            removed = self.commit_log.queue.delete_first_files(deleted)
            names = [os.path.basename(m.path) for m in removed]
            if forced:
                # Java's cleanAtOnce: files go whatever their age, unconsumed messages with them.
                log.warning("disk usage above diskSpaceCleanForciblyRatio %.2f: forcibly deleted commit log files "
                            "%s holding offsets [%d, %d)", cfg.diskSpaceCleanForciblyRatio, names,
                            removed[0].file_from_offset, removed[-1].file_from_offset + removed[-1].file_size)
            else:
                log.info("deleted %d expired commit log files: %s", deleted, names)
            min_phy = self.commit_log.min_offset
            for queues in self.consume_queue_table.values():
                for cq in queues.values():
                    cq.delete_expired_files(min_phy)
            if self.index_dispatch is not None:
                self.index_dispatch.set_min_offset(min_phy)
            else:
                self.index_service.delete_expired(min_phy)
        return deleted


_NEVER = 1 << 62  # an offset no record reaches
_MAX_GROUP_FLUSHES = 1  # fsyncs in flight for SYNC_FLUSH group commit (see _start_group_flush)


_ZERO_CHUNK = bytes(1 << 20)


def _zero_from(mf: MappedFile, pos: int) -> None:
    """Zero ``mf`` from ``pos`` to its end where it holds data. Holes (a file is created sparse,
    or reserved without being written) already read as zeros: writing them would allocate and
    dirty what is left of a 1 GiB file, seconds of a recovery that found a 100 MB log. Where the
    file system cannot say where its holes are, everything from ``pos`` is zeroed."""
    size = mf.file_size
    mm = mf.mapping()
    fd = os.open(mf.path, os.O_RDONLY)  # for SEEK_DATA: mapped files keep no descriptor
    try:
        while pos < size:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
                hole = min(os.lseek(fd, data, os.SEEK_HOLE), size) if data < size else size
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data past pos
                    return
                data, hole = pos, size  # SEEK_DATA not supported here
            except AttributeError:  # no SEEK_DATA on this platform
                data, hole = pos, size
            for start in range(data, hole, len(_ZERO_CHUNK)):
                stop = min(start + len(_ZERO_CHUNK), hole)
                mm[start:stop] = _ZERO_CHUNK[:stop - start]
            pos = hole
    finally:
        os.close(fd)


def _physical_memory() -> int:
    """The machine's RAM in bytes (Java's StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE); 0 where the
    platform cannot say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0


def _flush_queues(queues: list[ConsumeQueue]) -> None:
    for cq in queues:
        cq.flush()


def _resolve(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)
