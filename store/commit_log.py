"""CommitLog: every message of every topic, appended in arrival order (store-formats.md §2).

One writer (the event loop's put path, never suspended mid-append) assigns physical offsets,
queue offsets and store times, and copies the record into the mapped file. A record that does
not fit in the current file with 8 bytes to spare ends the file with a BLANK record and goes
into the next file, so a record never spans two files.
"""

from __future__ import annotations

import logging
import struct
import time
import zlib
from dataclasses import dataclass, field
from enum import Enum

from remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    Host,
    MessageConst,
    RecordError,
    decode_record,
    host_bytes,
    properties_to_string,
    tags_string_to_tags_code,
    transaction_type,
)
from store.config import MessageStoreConfig
from store.mapped_file import MappedFileQueue

log = logging.getLogger("rocketmq.store")

END_FILE_MIN_BLANK_LENGTH = 8
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767


class AppendMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass
class MessageExtBrokerInner:
    """A message as the broker hands it to the store."""

    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    properties_string: str = ""
    tags_code: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_host: Host = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # Filled by the store:
    store_timestamp: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    keys: list[str] = field(default_factory=list)
    uniq_key: str | None = None


@dataclass
class AppendMessageResult:
    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    # (message, record size) for each record written, for the dispatcher.
    written: list[tuple[MessageExtBrokerInner, int]] = field(default_factory=list)


_PREFIX = struct.Struct(">iiiiiqqiq")  # total .. bornTimestamp
_MID = struct.Struct(">iqi")  # reconsumeTimes, preparedTransactionOffset, bodyLength
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_BLANK = struct.Struct(">ii")


def _encode(msg: MessageExtBrokerInner, topic: bytes, props: bytes, offset: int, queue_offset: int,
            store_ts: int, born: bytes, store: bytes, sys_flag: int) -> bytes:
    body = msg.body
    size = 91 + len(body) + len(topic) + len(props) + (len(born) - 8) + (len(store) - 8)
    return b"".join((
        _PREFIX.pack(size, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, msg.queue_id, msg.flag, queue_offset,
                     offset, sys_flag, msg.born_timestamp),
        born, _I64.pack(store_ts), store,
        _MID.pack(msg.reconsume_times, msg.prepared_transaction_offset, len(body)), body,
        bytes((len(topic),)), topic, _I16.pack(len(props)), props))


class CommitLog:
    def __init__(self, config: MessageStoreConfig) -> None:
        self.config = config
        self.queue = MappedFileQueue(config.commit_log_dir(), config.mappedFileSizeCommitLog)
        # "topic-queueId" -> next queue offset, rebuilt from the consume queues at start.
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.last_store_timestamp = 0
        self._host_cache: dict[Host, bytes] = {}

    def _host(self, host: Host) -> bytes:
        b = self._host_cache.get(host)
        if b is None:
            b = self._host_cache[host] = host_bytes(host)
        return b

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset if self.queue.files else 0

    def append(self, msgs: list[MessageExtBrokerInner]) -> AppendMessageResult:
        """Append one message, or a batch (all in one file, consecutive queue offsets)."""
        file_size = self.queue.file_size
        encoded = []
        total = 0
        for msg in msgs:
            topic = msg.topic.encode()
            props = msg.properties_string.encode()
            if len(topic) > MAX_TOPIC_LENGTH:
                return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
            if len(props) > MAX_PROPERTIES_LENGTH:
                return AppendMessageResult(AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED)
            if len(msg.body) > self.config.maxMessageSize:
                return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
            born, store = self._host(msg.born_host), self._host(msg.store_host)
            size = 91 + len(msg.body) + len(topic) + len(props) + (len(born) - 8) + (len(store) - 8)
            encoded.append((msg, topic, props, born, store, size))
            total += size
        if total + END_FILE_MIN_BLANK_LENGTH > file_size:
            return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)

        mf = self.queue.get_last_mapped_file(0)
        if mf.wrote_position + total + END_FILE_MIN_BLANK_LENGTH > file_size:
            remaining = file_size - mf.wrote_position
            mf.mm[mf.wrote_position:mf.wrote_position + 8] = _BLANK.pack(remaining, BLANK_MAGIC_CODE)
            mf.wrote_position = file_size
            mf = self.queue.get_last_mapped_file(0)

        store_ts = int(time.time() * 1000)
        base = mf.file_from_offset + mf.wrote_position
        offset = base
        parts = []
        ids = []
        result = AppendMessageResult(AppendMessageStatus.PUT_OK, wrote_offset=base, store_timestamp=store_ts,
                                     msg_num=len(msgs))
        table = self.topic_queue_table
        for i, (msg, topic, props, born, store, size) in enumerate(encoded):
            key = (msg.topic, msg.queue_id)
            tran = transaction_type(msg.sys_flag)
            queue_offset = table.get(key, 0) if tran in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) else 0
            sys_flag = msg.sys_flag | (0x10 if len(born) == 20 else 0) | (0x20 if len(store) == 20 else 0)
            parts.append(_encode(msg, topic, props, offset, queue_offset, store_ts, born, store, sys_flag))
            msg.store_timestamp, msg.queue_offset, msg.commit_log_offset = store_ts, queue_offset, offset
            if tran in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
                table[key] = queue_offset + 1
            if i == 0:
                result.logics_offset = queue_offset
            ids.append(store.hex().upper() + f"{offset:016X}")
            result.written.append((msg, size))
            offset += size
        mf.append(parts[0] if len(parts) == 1 else b"".join(parts))
        result.wrote_bytes = total
        result.msg_id = ",".join(ids)
        self.last_store_timestamp = store_ts
        return result

    # -- reads ------------------------------------------------------------------------------

    def get_data(self, offset: int, size: int) -> bytes | None:
        mf = self.queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            return None
        return mf.read(pos, size)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        data = self.get_data(offset, size)
        if data is None or len(data) < 64:
            return -1
        born_v6 = struct.unpack_from(">i", data, 36)[0] & 0x10
        return struct.unpack_from(">q", data, 56 + (12 if born_v6 else 0))[0]

    # -- recovery ---------------------------------------------------------------------------

    def check_record(self, mm: object, pos: int, limit: int) -> tuple[int, MessageExtBrokerInner | None, bool]:
        """(size, message or None for BLANK, valid). Invalid ends the log at ``pos``."""
        if pos + 8 > limit:
            return 0, None, False
        total, magic = _BLANK.unpack_from(mm, pos)  # type: ignore[arg-type]
        if magic == BLANK_MAGIC_CODE:
            return total, None, pos + total == limit
        if magic != MESSAGE_MAGIC_CODE or total <= 0 or pos + total > limit:
            return 0, None, False
        try:
            ext = decode_record(memoryview(mm)[pos:pos + total], 0,  # type: ignore[arg-type]
                                check_crc=self.config.checkCRCOnRecover, strict=True)
        except RecordError:
            return 0, None, False
        inner = MessageExtBrokerInner(
            topic=ext.topic, body=b"", queue_id=ext.queue_id, flag=ext.flag,
            properties_string=properties_to_string(ext.properties), sys_flag=ext.sys_flag,
            store_timestamp=ext.store_timestamp, queue_offset=ext.queue_offset,
            commit_log_offset=ext.commit_log_offset, prepared_transaction_offset=ext.prepared_transaction_offset)
        inner.keys = (ext.properties.get(MessageConst.KEYS) or "").split(MessageConst.KEY_SEPARATOR)
        inner.uniq_key = ext.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        inner.tags_code = tags_string_to_tags_code(ext.properties.get(MessageConst.TAGS))
        return total, inner, True
