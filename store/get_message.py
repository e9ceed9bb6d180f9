"""Reads by queue and by key: Java's DefaultMessageStore.getMessage (a pull's messages, found
through the ConsumeQueue) and queryMessage (by KEYS or UNIQ_KEY, through the index), kept
apart from the facade, which answers with them."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rocketmq_py.remoting.protocol.message import decode_record
from rocketmq_py.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rocketmq_py.store.message_result import MATCH_ALL, GetMessageResult, GetMessageStatus, MessageFilter
from rocketmq_py.store.recovery import NEVER

if TYPE_CHECKING:
    from rocketmq_py.store.message_store import DefaultMessageStore


def memory_for_messages(ratio: int) -> int:
    """Bytes of the log a read may lie behind its end and still be served from memory
    (accessMessageInMemoryMaxRatio percent of RAM); unknown RAM never suggests the slave."""
    ram = _physical_memory()
    return ram * ratio // 100 if ram else NEVER


def get_message(store: DefaultMessageStore, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                message_filter: MessageFilter = MATCH_ALL) -> GetMessageResult:
    cq = store.consume_queue_store.existing(topic, queue_id)
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
        _read_queue(store, cq, offset, max_msg_nums, message_filter, result)
    return result


def _read_queue(store: DefaultMessageStore, cq: ConsumeQueue, offset: int, max_msg_nums: int,
                message_filter: MessageFilter, result: GetMessageResult) -> None:
    cfg = store.config
    units = cq.units_from(offset, max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE))
    if units is None:
        result.status = GetMessageStatus.OFFSET_FOUND_NULL
        file_size = cq.file_size // CQ_STORE_UNIT_SIZE
        result.next_begin_offset = (offset // file_size + 1) * file_size
        return
    max_count = min(max_msg_nums, cfg.maxTransferCountOnMessageInMemory)
    # Read once, not per unit: the config is a pydantic model (each read goes through its
    # __getattr__ hook) and, in the mypyc build, the store a compiled object whose attributes the
    # interpreter reads by the generic lookup.
    max_bytes = cfg.maxTransferBytesOnMessageInMemory
    commit_log = store.commit_log
    min_phy = commit_log.min_offset
    buffers = result.buffers
    total = 0
    scanned = 0
    last_phy = -1
    removing = False
    read_ahead = True
    for phy, size, tags_code in units:
        if len(buffers) >= max_count or (buffers and total + size > max_bytes):
            break
        scanned += 1
        if size == 0x7FFFFFFF:
            continue
        if phy < min_phy:
            removing = True
            continue
        if not message_filter.is_matched_by_consume_queue(tags_code):
            continue
        if read_ahead:  # from the pull's first record on: the records it reads and those after
            commit_log.read_ahead(phy)
            read_ahead = False
        data = commit_log.get_data(phy, size)
        if data is None:
            removing = True
            continue
        buffers.append(data)
        total += size
        last_phy = phy
    result.next_begin_offset = offset + scanned
    if last_phy >= 0:
        # Java's rule: what lies further behind the log's end than accessMessageInMemoryMaxRatio
        # of RAM is read from disk, and a master may point such a consumer at its slave.
        result.suggest_pulling_from_slave = commit_log.max_offset - last_phy > store.memory_for_messages
    if buffers:
        result.status = GetMessageStatus.FOUND
    else:
        result.status = GetMessageStatus.MESSAGE_WAS_REMOVING if removing else GetMessageStatus.NO_MATCHED_MESSAGE


def look_message_by_offset(store: DefaultMessageStore, commit_log_offset: int, size: int | None = None) -> bytes | None:
    """The stored record at a CommitLog offset (VIEW_MESSAGE_BY_ID)."""
    if size is None:
        head = store.commit_log.get_data(commit_log_offset, 4)
        if head is None:
            return None
        size = int.from_bytes(head, "big", signed=True)
        if size <= 0:
            return None
    return store.commit_log.get_data(commit_log_offset, size)


async def query_message(store: DefaultMessageStore, topic: str, key: str, max_num: int, begin: int,
                        end: int) -> list[bytes]:
    """Records whose KEYS or UNIQ_KEY equal ``key`` (hashes re-checked on the records).
    Read your writes: a key whose put has returned is findable. The wait for the index
    child leaves the event loop free, and a stuck child costs a query one second."""
    if store.index_dispatch is not None:
        await store.index_dispatch.wait_indexed_async(1.0)
        store.index_service.refresh()
    found = []
    for phy in store.index_service.query_offset(topic, key, max_num, begin, end):
        data = look_message_by_offset(store, phy)
        if data is None:
            continue
        msg = decode_record(data, read_body=False)
        keys = (msg.properties.get("KEYS") or "").split(" ")
        if msg.topic == topic and (key in keys or msg.properties.get("UNIQ_KEY") == key):
            found.append(data)
    return found


def _physical_memory() -> int:
    """The machine's RAM in bytes (Java's StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE); 0 where the
    platform cannot say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0
