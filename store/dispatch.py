"""CommitLogDispatcher: a stored record's ConsumeQueue unit, index keys and arrival notice (Java's
CommitLogDispatcherBuildConsumeQueue and CommitLogDispatcherBuildIndex), and ReputMessageService,
a slave's dispatch of the records its master sent.

A master dispatches inside the put (nothing runs between a record landing in the log and its
queue unit, so a reader never sees a queue behind the log it was told about); recovery and a
slave dispatch what the log holds past the queues. Dispatching is idempotent.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rocketmq_py.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    QUEUED_TRANSACTION_TYPES,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketmq_py.store.commit_log import AppendMessageResult, MessageExtBatch, MessageExtBrokerInner, RunEntry
from rocketmq_py.store.config import SCHEDULE_TOPIC
from rocketmq_py.store.ha.ha_client import SlaveDivergedError
from rocketmq_py.store.index_file import record_key_hashes
from rocketmq_py.store.recovery import zero_from

if TYPE_CHECKING:
    from rocketmq_py.store.message_store import DefaultMessageStore

log = logging.getLogger("rocketmq.store")

# (topic, queue id, next queue offset, tag code, store timestamp, properties string): long
# polling wakes the pulls a new message satisfies, by tag code or (SQL92) by properties.
# Properties as the record holds them: a string, or a batch entry's UTF-8 bytes (decoded only by a
# listener that has a use for them: most arrivals find no pull waiting). It answers whether pulls
# still wait on that queue: when none do, a batch's later entries are not announced (nothing can
# be held while the batch is dispatched).
MessageArrivingListener = Callable[[str, int, int, int, int, str | bytes], bool]


class CommitLogDispatcher:
    """Builds the consume queues and (inline) the index from stored records."""

    def __init__(self, store: DefaultMessageStore, listener: MessageArrivingListener | None) -> None:
        self.store = store
        self.consume_queue_table = store.consume_queue_table  # the store's: one table, never replaced
        self.find_consume_queue = store.consume_queue_store.find_consume_queue
        self.delay_level_table = store.delay_level_table
        self.index_service = store.index_service
        self.message_arriving_listener = listener
        # Built on each put until start() hands the index to a child process (recovery indexes
        # inline, before any child exists).
        self.index_inline = store.config.messageIndexEnable

    def dispatch(self, msg: MessageExtBrokerInner, size: int, notify: bool) -> None:
        """One record's queue unit and index keys; ``notify``: a put's (not recovery's), which
        may wake a held pull."""
        if msg.sys_flag & TRANSACTION_ROLLBACK_TYPE in QUEUED_TRANSACTION_TYPES:
            queues = self.consume_queue_table.get(msg.topic)
            cq = queues.get(msg.queue_id) if queues is not None else None
            if cq is None:
                cq = self.find_consume_queue(msg.topic, msg.queue_id)
            cq.put_message_position_info(msg.commit_log_offset, size, msg.tags_code if msg.topic != SCHEDULE_TOPIC else
                                         self.delivery_time(msg.queue_id, msg.store_timestamp), msg.queue_offset)
            if notify and self.message_arriving_listener is not None:
                self.message_arriving_listener(msg.topic, msg.queue_id, msg.queue_offset + 1, msg.tags_code,
                                               msg.store_timestamp, msg.properties_string)
        if self.index_inline:
            self.build_index(msg)

    def dispatch_appended(self, msg: MessageExtBrokerInner, result: AppendMessageResult) -> None:
        """``dispatch`` for a put's record, whose arrival may wake a held pull."""
        self.dispatch(msg, result.wrote_bytes, True)

    def dispatch_batch(self, batch: MessageExtBatch, result: AppendMessageResult) -> None:
        """``dispatch`` for a batch: its units go into the ConsumeQueue in one write when they
        fit in the current file, else one by one."""
        fields = result.unit_fields
        assert fields is not None and batch.records is not None  # append_batch's
        parts = batch.records[0]  # four per record, its properties last
        topic, queue_id, first = batch.topic, batch.queue_id, result.logics_offset
        if batch.sys_flag & TRANSACTION_ROLLBACK_TYPE in QUEUED_TRANSACTION_TYPES:
            cq = self.find_consume_queue(topic, queue_id)
            if not cq.put_unit_fields(fields, first):
                for i in range(0, len(fields), 3):
                    cq.put_message_position_info(fields[i], fields[i + 1], fields[i + 2], first + i // 3)
            listener = self.message_arriving_listener
            if listener is not None:
                store_ts = result.store_timestamp
                for unit in range(0, len(fields), 3):  # mostly the first only: no list of all made first
                    if not listener(topic, queue_id, first + 1 + unit // 3, fields[unit + 2], store_ts,
                                    bytes(parts[unit // 3 * 4 + 3])):
                        break
        if self.index_inline and batch.sys_flag & TRANSACTION_ROLLBACK_TYPE != TRANSACTION_ROLLBACK_TYPE:
            prefix = f"{topic}#".encode()
            for props, offset in zip(parts[3::4], result.offsets, strict=True):
                self.index_record(prefix, bytes(props), offset, result.store_timestamp)

    def dispatch_run(self, entries: Sequence[RunEntry], result: AppendMessageResult) -> None:
        """``dispatch`` for the records of a run."""
        units = result.units
        assert units is not None
        store_ts = result.store_timestamp
        listener = self.message_arriving_listener
        table = self.consume_queue_table
        for (topic, queue_id, _, _, props, tags_code, sys_flag, _, _, _), (offset, size, _), queue_offset in \
                zip(entries, units, result.queue_offsets, strict=True):
            tran = sys_flag & TRANSACTION_ROLLBACK_TYPE
            if tran in QUEUED_TRANSACTION_TYPES:
                queues = table.get(topic)
                cq = queues.get(queue_id) if queues is not None else None
                if cq is None:
                    cq = self.find_consume_queue(topic, queue_id)
                cq.put_message_position_info(offset, size, tags_code if topic != SCHEDULE_TOPIC else
                                             self.delivery_time(queue_id, store_ts), queue_offset)
                if listener is not None:
                    listener(topic, queue_id, queue_offset + 1, tags_code, store_ts, props)
            if self.index_inline and tran != TRANSACTION_ROLLBACK_TYPE:
                self.index_record(f"{topic}#".encode(), props, offset, store_ts)

    def delivery_time(self, queue_id: int, store_timestamp: int) -> int:
        """A SCHEDULE_TOPIC_XXXX unit's tag field: not a tag hash but the parked message's delivery
        time, its queue being its delay level - 1 (docs/store-formats.md#delay-levels)."""
        return store_timestamp + self.delay_level_table.get(queue_id + 1, 0)

    def build_index(self, msg: MessageExtBrokerInner) -> None:
        if msg.sys_flag & TRANSACTION_ROLLBACK_TYPE != TRANSACTION_ROLLBACK_TYPE:
            self.index_record(f"{msg.topic}#".encode(), msg.properties_string.encode(), msg.commit_log_offset,
                              msg.store_timestamp)

    def index_record(self, prefix: bytes, props: bytes, offset: int, store_timestamp: int) -> None:
        """Index one record's KEYS and UNIQ_KEY, read from its properties as the record holds them."""
        hashes = record_key_hashes(prefix, props)
        if hashes:
            try:
                self.index_service.put_entries(hashes, [offset] * len(hashes), [store_timestamp] * len(hashes))
            except OSError as exc:
                # The record is stored and queued: it stays readable, only unfindable by key.
                log.error("build index error (a full disk?), keys of the record at %d not indexed: %s", offset, exc)


class ReputMessageService:
    """A slave's side of replication (docs/ha.md): the master's bytes appended to the CommitLog,
    then dispatched from the reput offset on."""

    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store
        # Where the records received stop being dispatched (Java's reput offset); set at the
        # first append, recovery having dispatched everything before.
        self.reput_from_offset: int | None = None

    def append_to_commit_log(self, start_offset: int, data: bytes, dispatch: bool = True) -> bool:
        """Bytes a master sent, appended at exactly ``start_offset`` (the log's end, or a file's
        start when the log is empty) and within one file; False, appending nothing, otherwise.
        The records they complete are dispatched as puts are (now, or by ``dispatch_replicated``
        when ``dispatch`` is False: Java's slave acknowledges before its reput dispatches);
        SlaveDivergedError when they are not this log's continuation (the log is then cut back
        to its last whole record)."""
        if self.store.shutdown_flag:
            log.warning("message store has shutdown, so appendToPhyQueue is forbidden")
            return False
        queue = self.store.commit_log.queue
        if queue.files:
            if start_offset != queue.max_offset:
                return False
            if self.reput_from_offset is None:
                self.reput_from_offset = queue.max_offset
            mf = queue.get_last_mapped_file()
        else:
            if start_offset % queue.file_size:
                return False
            mf = queue.get_last_mapped_file(start_offset)
            self.reput_from_offset = start_offset
        pos = start_offset - mf.file_from_offset
        if pos != mf.wrote_position or pos + len(data) > mf.file_size:
            return False
        mf.append(data)
        if dispatch:
            self.dispatch_replicated()
        return True

    def dispatch_replicated(self) -> None:
        """Dispatch every whole record received since the last call."""
        store = self.store
        commit_log = store.commit_log
        queue = commit_log.queue
        at = self.reput_from_offset
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
                size, msg, valid = commit_log.check_record(mf.mm, pos, limit)
                if not valid or msg is None or msg.commit_log_offset != at:
                    raise SlaveDivergedError(f"the master's record at offset {at} does not continue this log "
                                             f"(it names offset {None if msg is None else msg.commit_log_offset})")
                store.dispatcher.dispatch(msg, size, True)
                commit_log.last_store_timestamp = msg.store_timestamp
                commit_log.topic_queue_table[(msg.topic, msg.queue_id)] = msg.queue_offset + 1
                at += size
        except SlaveDivergedError:
            mf = queue.find_mapped_file_by_offset(at)
            if mf is not None:
                zero_from(mf, at - mf.file_from_offset)
                mf.wrote_position = at - mf.file_from_offset
            raise
        finally:
            self.reput_from_offset = at
            if store.index_dispatch is not None:
                store.index_dispatch.committed(at)

    def dispatch_behind_bytes(self) -> int:
        """CommitLog bytes not yet in the consume queues: a master dispatches with each put (0);
        a slave what it received past its reput offset."""
        at = self.reput_from_offset
        return max(self.store.commit_log.max_offset - at, 0) if at is not None else 0
