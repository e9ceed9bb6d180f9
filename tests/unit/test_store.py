"""The message store: record layout, rolling files, recovery of torn tails, queues, index, retention."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import socket
import struct
import time
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.remoting.protocol.batch_body import StoredEntry
from rocketmq_py.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    decode_offset_msg_id,
    decode_record,
    encode_record,
    host_bytes,
    tags_string_to_tags_code,
)
from rocketmq_py.store.commit_log import (
    AppendMessageResult,
    AppendMessageStatus,
    CommitLog,
    MessageExtBatch,
    MessageExtBrokerInner,
    RunEntry,
)
from rocketmq_py.store.config import FlushDiskType
from rocketmq_py.store.message_store import DefaultMessageStore, GetMessageStatus, MessageFilter, PutMessageStatus
from tests.store_helpers import STORE_HOST, batch, index_caught_up, message, small_config


def independent_decode(buf: bytes) -> dict[str, Any]:
    """A decoder written from docs/store-formats.md#message-record, sharing no code with the store."""
    total, magic, crc, qid, flag, qoff, phys, sysflag, born_ts = struct.unpack_from(">iiiiiqqiq", buf, 0)
    p = 48
    born_len = 16 if sysflag & 0x10 else 4
    born = (socket.inet_ntop(socket.AF_INET6 if born_len == 16 else socket.AF_INET, buf[p:p + born_len]),
            struct.unpack_from(">i", buf, p + born_len)[0])
    p += born_len + 4
    (store_ts,) = struct.unpack_from(">q", buf, p)
    p += 8
    store_len = 16 if sysflag & 0x20 else 4
    p += store_len + 4
    reconsume, prepared, body_len = struct.unpack_from(">iqi", buf, p)
    p += 16
    body = buf[p:p + body_len]
    p += body_len
    tlen = buf[p]
    topic = buf[p + 1:p + 1 + tlen].decode()
    p += 1 + tlen
    (plen,) = struct.unpack_from(">h", buf, p)
    props = buf[p + 2:p + 2 + plen].decode()
    assert p + 2 + plen == total == len(buf)
    assert magic == MESSAGE_MAGIC_CODE and crc == zlib.crc32(body) & 0x7FFFFFFF
    return {"queueId": qid, "flag": flag, "queueOffset": qoff, "physicalOffset": phys, "sysFlag": sysflag,
            "bornTimestamp": born_ts, "bornHost": born, "storeTimestamp": store_ts, "reconsumeTimes": reconsume,
            "prepared": prepared, "body": body, "topic": topic, "properties": props}


@pytest.mark.parametrize("born", [("10.1.2.3", 5555), ("fe80::1", 6666)])
async def test_records_match_the_spec_layout(store: DefaultMessageStore, born: tuple[str, int]) -> None:
    msg = message("TopicA", b"hello world", queue_id=2, tags="TagA", keys="k1 k2", uniq="U1", born_host=born,
                  sys_flag=0x1)  # the compressed flag is stored as given
    msg.flag = 7
    msg.reconsume_times = 3
    result = await store.put_message(msg)
    assert result.status == PutMessageStatus.PUT_OK
    res = result.append_result
    assert res is not None
    got = store.get_message("g", "TopicA", 2, 0, 32)
    assert got.status == GetMessageStatus.FOUND and got.next_begin_offset == 1
    (record,) = got.buffers
    d = independent_decode(record)
    assert d["body"] == b"hello world" and d["topic"] == "TopicA" and d["queueId"] == 2 and d["flag"] == 7
    assert d["physicalOffset"] == res.wrote_offset and d["queueOffset"] == 0 and d["reconsumeTimes"] == 3
    assert d["bornHost"] == born and d["bornTimestamp"] == 1700000000123
    assert d["sysFlag"] & 0x1 and bool(d["sysFlag"] & 0x10) == (":" in born[0])
    assert d["properties"] == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U1"
    assert decode_offset_msg_id(res.msg_id) == (STORE_HOST, res.wrote_offset)
    assert store.look_message_by_offset(res.wrote_offset) == record


@pytest.mark.parametrize("born", [("10.1.2.3", 5555), ("fe80::1", 6666)])
async def test_a_store_time_is_read_from_a_records_first_bytes(store: DefaultMessageStore,
                                                                born: tuple[str, int]) -> None:
    """The earliest message time (runtime info) reads 80 bytes and abnormal recovery 92, as
    Java's callers do: less than a whole record, the store timestamp within them."""
    res = (await store.put_message(message("TopicA", b"x" * 300, born_host=born))).append_result
    assert res is not None
    for size in (80, 92):
        assert store.commit_log.pickup_store_timestamp(res.wrote_offset, size) == res.store_timestamp > 0
    assert store.commit_log.pickup_store_timestamp(res.wrote_offset, 20) == -1, "too short to hold it"


def test_offset_message_ids_are_spelled_as_java_spells_them() -> None:
    """A put's offset message id, or a batch's comma-joined: each the store host and the record's
    offset in upper-case hex (Java's MessageDecoder.createMessageId, UtilAll.bytes2string), each
    batch's ids with its own host whichever host answered before."""
    hosts = [host_bytes(("10.1.2.3", 5555)), host_bytes(("fe80::abcd:12", 10911)), host_bytes(("172.16.0.254", 65535))]
    for offsets in ([0], [0xABCDEF0123], [5, 0x7FFFFFFFFFFFFFFF], [0xFA + 1127 * i for i in range(32)]):
        for host in hosts + hosts[::-1]:
            result = AppendMessageResult(AppendMessageStatus.PUT_OK, offsets[0], 1, 0, 0, len(offsets), host, offsets)
            assert result.msg_id == ",".join(f"{host.hex().upper()}{offset:016X}" for offset in offsets)


async def test_batch_records_get_consecutive_offsets(store: DefaultMessageStore) -> None:
    bodies = [f"m{i}".encode() for i in range(5)]
    for born in (("10.1.2.3", 5555), ("::1", 5555)):
        before = store.get_max_offset_in_queue("Batch", 0)
        result = await store.put_messages(batch("Batch", bodies, properties=[f"KEYS\x01b{i}" for i in range(5)],
                                                born_host=born))
        assert result.status == PutMessageStatus.PUT_OK and result.append_result is not None
        ids = result.append_result.msg_id.split(",")
        got = store.get_message("g", "Batch", 0, before, 32)
        decoded = [independent_decode(b) for b in got.buffers]
        assert [d["queueOffset"] for d in decoded] == list(range(before, before + 5))
        assert result.append_result.logics_offset == before and result.append_result.msg_num == 5
        assert [d["body"] for d in decoded] == bodies
        assert [d["properties"] for d in decoded] == [f"KEYS\x01b{i}" for i in range(5)]
        assert all(d["bornHost"] == born and d["prepared"] == 0 for d in decoded)
        offsets = [d["physicalOffset"] for d in decoded]
        assert [decode_offset_msg_id(i)[1] for i in ids] == offsets
        sizes = [len(b) for b in got.buffers]
        assert all(offsets[i] + sizes[i] == offsets[i + 1] for i in range(4))


async def test_batch_with_an_oversize_entry_changes_nothing(store: DefaultMessageStore) -> None:
    end = store.commit_log.max_offset
    big = await store.put_messages(batch("Batch", [b"ok", b"x" * (store.config.maxMessageSize + 1)]))
    props = await store.put_messages(batch("Batch", [b"ok"], properties=["P\x01" + "v" * 32767]))
    assert (big.status, props.status) == (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
    assert store.commit_log.max_offset == end and store.get_max_offset_in_queue("Batch", 0) == 0


async def test_batches_fill_consume_queue_files_across_their_ends(store: DefaultMessageStore) -> None:
    """A batch is written to the ConsumeQueue in one go; one that would cross the end of a
    50-unit file goes unit by unit. Every unit must match its record."""
    sent: list[tuple[bytes, str]] = []
    for n in range(20):
        tags = "TagA" if n % 2 else "TagB"
        bodies = [f"{n}-{k}".encode() for k in range(7)]
        assert (await store.put_messages(batch("CQBatch", bodies, tags=tags))).status == PutMessageStatus.PUT_OK
        sent.extend((body, f"TAGS\x01{tags}") for body in bodies)
    assert len(store.find_consume_queue("CQBatch", 0).queue.files) == 3
    got: list[dict[str, Any]] = []
    offset = 0
    while (result := store.get_message("g", "CQBatch", 0, offset, 32)).status == GetMessageStatus.FOUND:
        got.extend(independent_decode(b) for b in result.buffers)
        offset = result.next_begin_offset
    assert [(d["body"], d["properties"]) for d in got] == sent
    assert [d["queueOffset"] for d in got] == list(range(len(sent)))
    only_a = store.get_message("g", "CQBatch", 0, 0, 32, MessageFilter({tags_string_to_tags_code("TagA")}))
    tag_a = [independent_decode(b)["body"] for b in only_a.buffers]
    assert tag_a == [f"{n}-{k}".encode() for n in range(1, 20, 2) for k in range(7)][:len(tag_a)] and tag_a


async def test_rolling_files_and_reads_across_them(store: DefaultMessageStore) -> None:
    bodies = [os.urandom(900 + i % 300) for i in range(300)]
    for i, body in enumerate(bodies):
        assert (await store.put_message(message("Roll", body, queue_id=i % 3))).ok
    files = store.commit_log.queue.files
    assert len(files) >= 4, "64 KiB files must have rolled"
    # Each full file ends with a BLANK record (docs/store-formats.md#blank-record).
    for mf in files[:-1]:
        pos = 0
        while True:
            total, magic = struct.unpack_from(">ii", mf.mm, pos)
            if magic == BLANK_MAGIC_CODE:
                assert pos + total == mf.file_size
                break
            assert magic == MESSAGE_MAGIC_CODE
            pos += total
    read: list[tuple[int, bytes]] = []
    for qid in range(3):
        offset = 0
        while True:
            got = store.get_message("g", "Roll", qid, offset, 32)
            if got.status != GetMessageStatus.FOUND:
                assert got.status == GetMessageStatus.OFFSET_OVERFLOW_ONE
                break
            read.extend((independent_decode(b)["physicalOffset"], independent_decode(b)["body"]) for b in got.buffers)
            offset = got.next_begin_offset
    assert [b for _, b in sorted(read)] == bodies  # type: ignore[type-var]


async def test_tag_filter_and_offset_statuses(store: DefaultMessageStore) -> None:
    for i in range(10):
        await store.put_message(message("F", b"x", tags="TagA" if i % 2 else "TagB"))

    only_a = MessageFilter({tags_string_to_tags_code("TagA")})
    got = store.get_message("g", "F", 0, 0, 32, only_a)
    assert got.message_count == 5 and got.next_begin_offset == 10
    assert store.get_message("g", "F", 0, 10, 32).status == GetMessageStatus.OFFSET_OVERFLOW_ONE
    assert store.get_message("g", "F", 0, 11, 32).status == GetMessageStatus.OFFSET_OVERFLOW_BADLY
    assert store.get_message("g", "F", 1, 0, 32).status == GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    none_match = store.get_message("g", "F", 0, 0, 32, MessageFilter({12345}))
    assert none_match.status == GetMessageStatus.NO_MATCHED_MESSAGE and none_match.next_begin_offset == 10


async def test_key_and_timestamp_lookup(store: DefaultMessageStore) -> None:
    stamps = []
    for i in range(40):
        r = await store.put_message(message("K", f"v{i}".encode(), keys=f"order-{i} shared", uniq=f"UNIQ{i}"))
        stamps.append(r.append_result.store_timestamp)  # type: ignore[union-attr]
        if i % 10 == 9:
            await asyncio.sleep(0.02)  # spread store times so the search has something to find
    await index_caught_up(store)
    found = await store.query_message("K", "order-17", 32, 0, 2**62)
    assert [decode_record(b).body for b in found] == [b"v17"]
    assert len(await store.query_message("K", "shared", 32, 0, 2**62)) == 32, "bounded by maxNum"
    assert [decode_record(b).body for b in await store.query_message("K", "UNIQ3", 32, 0, 2**62)] == [b"v3"]
    assert await store.query_message("K", "nope", 32, 0, 2**62) == []
    idx = store.get_offset_in_queue_by_time("K", 0, stamps[25])
    assert stamps[idx] == stamps[25]
    assert store.get_offset_in_queue_by_time("K", 0, stamps[0] - 10_000) == 0
    assert store.get_earliest_message_time("K", 0) == stamps[0]


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _last_record_span(s: DefaultMessageStore) -> tuple[int, int]:
    mf = s.commit_log.queue.last()
    assert mf is not None
    pos = 0
    last = 0
    while pos < mf.wrote_position:
        last = pos
        pos += struct.unpack_from(">i", mf.mm, pos)[0]
    return mf.file_from_offset + last, pos - last


async def _crashed_store(root: str, n: int) -> tuple[int, int, bytes]:
    """Write n messages and stop without a clean shutdown (the abort file stays)."""
    s = DefaultMessageStore(small_config(root))
    await s.load()
    await s.start()
    for i in range(n):
        await s.put_message(message("Torn", f"message-{i}".encode() * 3, keys=f"k{i}", uniq=f"U{i}"))
    start, size = _last_record_span(s)
    for task in s._tasks:
        task.cancel()
    if s.index_dispatch is not None:
        s.index_dispatch.kill()
    mf = s.commit_log.queue.last()
    assert mf is not None
    tail = bytes(mf.mm[start - mf.file_from_offset:start - mf.file_from_offset + size])
    s.commit_log.queue.close()
    for qs in s.consume_queue_table.values():
        for cq in qs.values():
            cq.queue.close()
    os.close(s._lock_fd)  # type: ignore[arg-type]
    return start, size, tail


async def test_torn_tail_at_every_byte_keeps_the_intact_prefix(tmp_path: str) -> None:
    root = os.path.join(str(tmp_path), "torn")
    start, size, _ = await _crashed_store(root, 5)
    path = os.path.join(root, "commitlog", f"{0:020d}")
    pristine = _read(path)
    for cut in range(size):
        damaged = bytearray(pristine)
        damaged[start + cut:start + size] = bytes(size - cut)
        _write(path, bytes(damaged))
        _write(os.path.join(root, "abort"), b"")
        # The index is built inline here: a child per round would only add start-up time.
        s = DefaultMessageStore(small_config(root, messageIndexInChildProcess=False))
        assert not await s.load()
        assert s.commit_log.max_offset == start, f"cut at byte {cut}"
        assert s.get_max_offset_in_queue("Torn", 0) == 4
        await s.start()
        r = await s.put_message(message("Torn", b"next"))
        assert r.append_result is not None and r.append_result.wrote_offset == start
        assert r.append_result.logics_offset == 4
        await s.shutdown()
        _write(path, pristine)


async def test_broken_crc_is_cut_off(tmp_path: str) -> None:
    root = os.path.join(str(tmp_path), "crc")
    start, _, _ = await _crashed_store(root, 3)
    path = os.path.join(root, "commitlog", f"{0:020d}")
    data = bytearray(_read(path))
    data[start + 84 + 4] ^= 0xFF  # a byte of the body: the CRC no longer matches
    _write(path, bytes(data))
    s = DefaultMessageStore(small_config(root))
    await s.load()
    assert s.commit_log.max_offset == start and s.get_max_offset_in_queue("Torn", 0) == 2
    await s.start()
    await s.shutdown()


async def test_queues_and_index_rebuilt_after_deletion(tmp_path: str) -> None:
    root = str(tmp_path)
    s = DefaultMessageStore(small_config(root))
    await s.load()
    await s.start()
    for i in range(120):
        await s.put_message(message("R", f"r{i}".encode() * 50, queue_id=i % 4, keys=f"key{i}"))
    await s.shutdown()
    import shutil

    shutil.rmtree(os.path.join(root, "consumequeue"))
    shutil.rmtree(os.path.join(root, "index"))
    s = DefaultMessageStore(small_config(root))
    await s.load()
    await s.start()
    try:
        assert [s.get_max_offset_in_queue("R", q) for q in range(4)] == [30, 30, 30, 30]
        got = s.get_message("g", "R", 3, 29, 32)
        assert decode_record(got.buffers[0]).body == b"r119" * 50
        await index_caught_up(s)
        assert [decode_record(b).body for b in await s.query_message("R", "key77", 4, 0, 2**62)] == [b"r77" * 50]
    finally:
        await s.shutdown()


async def test_retention_deletes_expired_files_and_keeps_the_active_one(tmp_path: str) -> None:
    now = dt.datetime.now() + dt.timedelta(seconds=1)
    s = DefaultMessageStore(small_config(str(tmp_path), fileReservedTime=0, deleteWhen=f"{now.hour:02d}"))
    await s.load()
    await s.start()
    try:
        for _ in range(200):
            await s.put_message(message("Old", os.urandom(1000)))
        files = len(s.commit_log.queue.files)
        assert files >= 3
        assert await s.clean_resources(now + dt.timedelta(hours=1)) == 0, "outside deleteWhen nothing is deleted"
        deleted = await s.clean_resources(now + dt.timedelta(seconds=1))
        assert deleted == files - 1 and len(s.commit_log.queue.files) == 1
        min_offset = s.get_min_offset_in_queue("Old", 0)
        assert min_offset > 0
        got = s.get_message("g", "Old", 0, 0, 32)
        assert got.status == GetMessageStatus.OFFSET_TOO_SMALL and got.next_begin_offset == min_offset
        assert s.get_message("g", "Old", 0, min_offset, 32).status == GetMessageStatus.FOUND
        assert (await s.put_message(message("Old", b"still writable"))).ok
    finally:
        await s.shutdown()


async def test_full_disk_refuses_puts_until_space_returns(store: DefaultMessageStore) -> None:
    assert (await store.put_message(message("D", b"before"))).ok
    store.config.diskSpaceWarningLevelRatio = 0.0  # any usage is now "full"
    store.check_disk_space()
    refused = await store.put_message(message("D", b"refused"))
    assert refused.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and "disk is full" in (refused.remark or "")
    assert store.get_max_offset_in_queue("D", 0) == 1, "a refused put changes nothing"
    store.config.diskSpaceWarningLevelRatio = 0.99
    store.check_disk_space()
    assert (await store.put_message(message("D", b"after"))).ok


async def test_bad_puts_are_refused_without_change(store: DefaultMessageStore) -> None:
    store.config.maxMessageSize = 100
    too_big = await store.put_message(message("B", b"x" * 101))
    assert too_big.status == PutMessageStatus.MESSAGE_ILLEGAL
    long_topic = await store.put_message(message("T" * 128, b"x"))
    assert long_topic.status == PutMessageStatus.MESSAGE_ILLEGAL
    big_props = await store.put_message(message("B", b"x", extra={"p": "v" * 33000}))
    assert big_props.status == PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.commit_log.max_offset == 0


def _run(*msgs: MessageExtBrokerInner) -> list[RunEntry]:
    return [(m.topic, m.queue_id, m.body, m.flag, m.properties_string.encode(), m.tags_code, m.sys_flag,
             m.born_timestamp, m.reconsume_times, m.prepared_transaction_offset) for m in msgs]


async def test_a_run_is_stored_in_order_queued_and_read_back_like_single_puts(store: DefaultMessageStore) -> None:
    msgs = [message("R", f"run-{i}".encode(), queue_id=i % 2, tags=f"t{i}") for i in range(5)]
    single = await store.put_message(message("R", b"first", queue_id=1))
    result = store.append_run(_run(*msgs), msgs[0].born_host, STORE_HOST)
    append = result.append_result
    assert result.status == PutMessageStatus.PUT_OK and append is not None
    assert append.msg_num == 5 and append.queue_offsets == [0, 1, 1, 2, 2]
    assert append.offsets == sorted(append.offsets) and append.offsets[0] == store.commit_log.max_offset - \
        append.wrote_bytes
    assert single.append_result is not None and append.offsets[0] > single.append_result.wrote_offset
    for queue_id, bodies in ((0, [b"run-0", b"run-2", b"run-4"]), (1, [b"first", b"run-1", b"run-3"])):
        got = store.get_message("g", "R", queue_id, 0, 32)
        records = [independent_decode(b) for b in got.buffers]
        assert [r["body"] for r in records] == bodies
        assert [r["queueOffset"] for r in records] == list(range(3))
        # One store time for the run; each record's own tag hash, as its consume queue unit holds.
        run_records = [r for r in records if r["body"] != b"first"]
        assert {r["storeTimestamp"] for r in run_records} == {append.store_timestamp}
    tagged = store.get_message("g", "R", 0, 0, 32, MessageFilter({tags_string_to_tags_code("t2")}))
    assert [independent_decode(b)["body"] for b in tagged.buffers] == [b"run-2"]


@pytest.mark.parametrize("born", [("10.1.2.3", 5555), ("fe80::1", 6666)])
async def test_every_builder_writes_the_record_encode_record_writes(store: DefaultMessageStore,
                                                                   born: tuple[str, int]) -> None:
    """The single put's, the batch's and the run's builders each pack the head in their own loop
    (docs/hot-modules.md: a shared pack function cost 9% per batched record); each is pinned here
    to encode_record, the layout's reference builder, over the same declaration."""
    msg = message("B", b"one", tags="t", keys="k1", uniq="U1", born_host=born)
    msg.flag, msg.reconsume_times, msg.prepared_transaction_offset = 3, 2, 77
    assert (await store.put_message(msg)).ok
    assert (await store.put_messages(batch("B", [b"two", b""], properties=["KEYS\x01b", ""], born_host=born))).ok
    run = message("B", b"four" * 100, tags="r", born_host=born, sys_flag=0x1)
    assert store.append_run(_run(run), born, STORE_HOST).ok
    got = store.get_message("g", "B", 0, 0, 32)
    assert len(got.buffers) == 4
    for record in got.buffers:
        assert encode_record(decode_record(record)) == bytes(record)
    assert [independent_decode(bytes(b))["prepared"] for b in got.buffers] == [77, 0, 0, 0]


async def test_a_run_that_does_not_fit_goes_whole_to_the_next_file_and_one_too_large_is_refused(
        store: DefaultMessageStore) -> None:
    file_size = store.config.mappedFileSizeCommitLog
    while store.commit_log.max_offset < file_size - 3000:
        assert (await store.put_message(message("F", os.urandom(1000)))).ok
    before = store.commit_log.max_offset
    msgs = [message("F", os.urandom(1000)) for _ in range(3)]
    result = store.append_run(_run(*msgs), msgs[0].born_host, STORE_HOST)
    assert result.status == PutMessageStatus.PUT_OK and result.append_result is not None
    assert result.append_result.offsets[0] == file_size, "the run starts the next file; the last one ends blank"
    tail = store.commit_log.get_data(before, 8)
    assert tail is not None and struct.unpack(">ii", tail)[1] == BLANK_MAGIC_CODE
    after, queued = store.commit_log.max_offset, store.get_max_offset_in_queue("F", 0)
    too_large = _run(*(message("F", os.urandom(20_000)) for _ in range(4)))  # 80 KB: no file holds it
    refused = store.append_run(too_large, msgs[0].born_host, STORE_HOST)
    assert refused.status == PutMessageStatus.MESSAGE_ILLEGAL
    assert store.commit_log.max_offset == after and store.get_max_offset_in_queue("F", 0) == queued


async def test_sync_flush_group_commit(tmp_path: str) -> None:
    s = DefaultMessageStore(small_config(str(tmp_path), flushDiskType=FlushDiskType.SYNC_FLUSH,
                                         mappedFileSizeCommitLog=1024 * 1024))
    await s.load()
    await s.start()
    try:
        import rocketmq_py.store.mapped_file as mapped_file

        calls = 0
        real = mapped_file._datasync

        def counting(fd: int) -> None:
            nonlocal calls
            calls += 1
            real(fd)

        mapped_file._datasync = counting  # type: ignore[assignment]
        try:
            results = await asyncio.gather(*(s.put_message(message("S", os.urandom(1024))) for _ in range(64)))
        finally:
            mapped_file._datasync = real  # type: ignore[assignment]
        assert all(r.status == PutMessageStatus.PUT_OK for r in results)
        assert 1 <= calls < 64 / 4, f"{calls} fsyncs for 64 concurrent sync puts"
        assert s.commit_log.queue.flushed_where == s.commit_log.max_offset
    finally:
        await s.shutdown()


async def test_sync_flush_writers_released_together_share_the_next_fsync(
        tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """64 writers putting one after another under SYNC_FLUSH: the puts a flush releases append again
    in the next turn of the loop and share one fsync, asked for at the end of that turn
    (GroupCommitService.start_flush), where a flush started at the first of them split the
    writers into two groups and took two fsyncs a round; and no put returns before an fsync that
    covers its record has ended."""
    s = DefaultMessageStore(small_config(str(tmp_path), flushDiskType=FlushDiskType.SYNC_FLUSH,
                                         mappedFileSizeCommitLog=4 * 1024 * 1024))
    await s.load()
    await s.start()
    try:
        calls = 0
        log_queue = s.commit_log.queue
        real = log_queue.flush

        def counting(least_pages: int = 0) -> int:  # the CommitLog's flushes, not the consume queues'
            nonlocal calls
            calls += 1
            return real(least_pages)

        monkeypatch.setattr(log_queue, "flush", counting)
        rounds = 20

        async def writer() -> None:
            for _ in range(rounds):
                r = await s.put_message(message("S", os.urandom(512)))
                assert r.status == PutMessageStatus.PUT_OK and r.append_result is not None
                end = r.append_result.wrote_offset + r.append_result.wrote_bytes
                assert s.commit_log.queue.flushed_where >= end, "acknowledged before its record was flushed"

        await asyncio.gather(*(writer() for _ in range(64)))
        # One fsync a round, and room for the periodic flush (FlushRealTimeService) to run too.
        assert rounds <= calls <= rounds + 3, f"{calls} fsyncs for {rounds} rounds of 64 sync puts"
    finally:
        await s.shutdown()


async def test_sync_flush_timeout(tmp_path: str) -> None:
    s = DefaultMessageStore(small_config(str(tmp_path), flushDiskType=FlushDiskType.SYNC_FLUSH, syncFlushTimeout=50))
    await s.load()
    await s.start()
    import time

    import rocketmq_py.store.mapped_file as mapped_file

    real = mapped_file._datasync
    mapped_file._datasync = lambda fd: time.sleep(0.3)  # type: ignore[assignment]
    try:
        r = await s.put_message(message("S", b"slow disk"))
        assert r.status == PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert s.get_max_offset_in_queue("S", 0) == 1, "the message is stored even when the flush is late"
    finally:
        mapped_file._datasync = real  # type: ignore[assignment]
        await s.shutdown()


async def test_sync_flush_timeout_follows_config_update(tmp_path: str) -> None:
    """syncFlushTimeout changed on a running store (UPDATE_BROKER_CONFIG sets it on the model)
    applies to the next put, though group commit reads it once a turn of the loop, not per put."""
    s = DefaultMessageStore(small_config(str(tmp_path), flushDiskType=FlushDiskType.SYNC_FLUSH,
                                         syncFlushTimeout=5000))
    await s.load()
    await s.start()
    import time

    import rocketmq_py.store.mapped_file as mapped_file

    real = mapped_file._datasync
    try:
        assert (await s.put_message(message("S", b"quick disk"))).status == PutMessageStatus.PUT_OK
        s.config.syncFlushTimeout = 50
        mapped_file._datasync = lambda fd: time.sleep(0.3)  # type: ignore[assignment]
        r = await s.put_message(message("S", b"slow disk"))
        assert r.status == PutMessageStatus.FLUSH_DISK_TIMEOUT, "the put waited out the old timeout"
        s.config.syncFlushTimeout = 5000
        r = await s.put_message(message("S", b"slow disk, patient broker"))
        assert r.status == PutMessageStatus.PUT_OK
        assert s.commit_log.queue.flushed_where >= r.append_result.wrote_offset + r.append_result.wrote_bytes
    finally:
        mapped_file._datasync = real  # type: ignore[assignment]
        await s.shutdown()


async def test_second_store_on_same_dir_refused(store: DefaultMessageStore) -> None:
    other = DefaultMessageStore(store.config)
    with pytest.raises(RuntimeError, match="Lock failed"):
        await other.load()


async def test_consume_queues_flush_once_they_have_least_pages(tmp_path: str) -> None:
    """A consume queue is synced by the periodic flush once flushConsumeQueueLeastPages pages were
    written since its last sync (or its file is full), and by the thorough flush whatever it holds,
    as Java's FlushConsumeQueueService: 10,000 topics of 8 queues, each with a unit written each
    second, would otherwise be 80,000 fdatasyncs a second."""
    cfg = small_config(str(tmp_path), mappedFileSizeConsumeQueue=6_000_000, flushIntervalConsumeQueue=3_600_000,
                       messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    try:
        assert store.append_message(message("Few", b"1")).ok
        for _ in range(500):  # 10,000 bytes of units: more than two pages
            assert store.append_message(message("Many", b"m")).ok
        few, many = store.consume_queue_store.existing("Few", 0), store.consume_queue_store.existing("Many", 0)
        assert few is not None and many is not None
        few.flush(cfg.flushConsumeQueueLeastPages)
        many.flush(cfg.flushConsumeQueueLeastPages)
        assert few.queue.files[0].flushed_position == 0, "one unit is not two pages"
        assert many.queue.files[0].flushed_position == 500 * 20
        few.flush()  # the thorough flush
        assert few.queue.files[0].flushed_position == 20
    finally:
        await store.shutdown()


async def test_a_large_body_is_stored_whole_and_recovered(tmp_path: str) -> None:
    """A body from 64 KiB on is written into the file apart from the record's other fields (one
    pwritev of head, body and tail): the record reads back through the mapping at once as a small
    one's layout says, the file holds the bytes the mapping shows, and a restart's scan (sizes
    and body CRC checked) keeps it."""
    cfg = small_config(str(tmp_path), mappedFileSizeCommitLog=8 << 20, messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    bodies = [os.urandom(size) for size in (100, 64 * 1024 - 1, 64 * 1024, 1 << 20)]
    for body in bodies:
        assert store.append_message(message("Large", body, tags="t", keys="k")).ok
    mf = store.commit_log.queue.files[-1]
    fd = os.open(mf.path, os.O_RDONLY)
    try:
        assert os.pread(fd, mf.wrote_position, 0) == mf.mm[:mf.wrote_position]
    finally:
        os.close(fd)
    for restart in (False, True):
        if restart:
            await store.shutdown()
            # As after a crash: recovery scans every record and checks its CRC.
            os.close(os.open(os.path.join(str(tmp_path), "abort"), os.O_CREAT | os.O_WRONLY))
            store = DefaultMessageStore(cfg)
            await store.load()
            await store.start()
        decoded = [decode_record(store.get_message("g", "Large", 0, i, 1).buffers[0]) for i in range(len(bodies))]
        assert [m.body for m in decoded] == bodies, restart
        assert store.commit_log.queue.files[-1].read_ahead_to > 0, "a pull asks the disk for what follows"
        assert all(m.topic == "Large" and m.properties.get("TAGS") == "t" for m in decoded)
    await store.shutdown()


def _bodies(store: DefaultMessageStore, topic: str, offset: int = 0, count: int = 1 << 30) -> list[bytes]:
    """Up to ``count`` bodies of queue 0 of ``topic`` from ``offset``, pulled as consumers pull."""
    bodies: list[bytes] = []
    while len(bodies) < count and (got := store.get_message("g", topic, 0, offset, 32)).status == \
            GetMessageStatus.FOUND:
        bodies.extend(independent_decode(b)["body"] for b in got.buffers)
        offset = got.next_begin_offset
    return bodies[:count]


async def test_batches_written_a_page_at_a_time_read_back_at_once_and_after_a_crash(tmp_path: str) -> None:
    """Writes of a page or more go into the file by pwrite, not through the mapping
    (MappedFile.write): readers of the mapping see the records at once, the file holds the bytes
    the mapping shows, a restart's scan keeps every record, and a file that rolled keeps no
    descriptor for writing."""
    cfg = small_config(str(tmp_path), mappedFileSizeCommitLog=256 * 1024, messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    groups = [[os.urandom(900 + 37 * n + k) for k in range(8)] for n in range(60)]  # 7-10 KiB a batch
    for group in groups:
        result = await store.put_messages(batch("Paged", group, tags="t"))
        assert result.status == PutMessageStatus.PUT_OK and result.append_result is not None
        assert result.append_result.wrote_bytes >= 4096
        assert _bodies(store, "Paged", result.append_result.logics_offset, len(group)) == group, \
            "read through the mapping at once"
    files = store.commit_log.queue.files
    assert len(files) >= 2, "256 KiB files must have rolled"
    for mf in files:
        fd = os.open(mf.path, os.O_RDONLY)
        try:
            assert os.pread(fd, mf.wrote_position, 0) == mf.mm[:mf.wrote_position]
        finally:
            os.close(fd)
    assert all(mf._write_fd is None for mf in files[:-1])
    await store.shutdown()
    os.close(os.open(os.path.join(str(tmp_path), "abort"), os.O_CREAT | os.O_WRONLY))  # as after a crash
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    assert _bodies(store, "Paged") == [body for group in groups for body in group]
    await store.shutdown()


# Properties as a batch's entries hold them: shared (one object), equal but separate objects, of one
# length with different UNIQ_KEYs (the producers' usual), of other lengths, with or without a name
# the index reads.
_SHARED = b"TAGS\x01a"


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(st.one_of(st.just(_SHARED), st.sampled_from([b"TAGS\x01a", b"", b"TAGS\x01bb", b"A\x011"]).map(
    bytearray).map(bytes), st.text("0123456789ABCDEF", min_size=4, max_size=4).map(
    lambda u: f"TAGS\x01a\x02UNIQ_KEY\x01{u}".encode()), st.just(b"TAGS\x01a\x02KEYS\x01k")), min_size=1, max_size=8))
async def test_a_batch_stores_each_entry_s_own_properties_and_says_whether_any_holds_an_indexed_name(
        tmp_path_factory: Any, picks: list[bytes]) -> None:
    """The batch builder reuses the previous entry's checks and lengths when its properties are
    the same object, and makes the topic-and-length part once per length: every record still
    is encode_record's, with its entry's properties, and the put is keyless exactly when no
    properties hold the index's names."""
    store = DefaultMessageStore(small_config(str(tmp_path_factory.mktemp("store")), messageIndexInChildProcess=False))
    await store.load()
    await store.start()
    try:
        entries: list[StoredEntry] = [(i, f"body-{i}".encode(), props, i) for i, props in enumerate(picks)]
        result = store.append_messages(MessageExtBatch("KB", 0, entries, born_timestamp=1700000000123,
                                                       born_host=("10.1.2.3", 5555), store_host=STORE_HOST))
        append = result.append_result
        assert result.status is PutMessageStatus.PUT_OK and append is not None
        assert append.keyless == (not any(b"KEY" in props for props in picks))
        for offset, (flag, body, props, _) in zip(append.offsets, entries, strict=True):
            record = store.look_message_by_offset(offset)
            assert record is not None
            assert encode_record(decode_record(record)) == bytes(record)
            assert independent_decode(bytes(record))["body"] == body
            assert bytes(record).endswith(len(props).to_bytes(2, "big") + props)
            assert decode_record(record).flag == flag
    finally:
        await store.shutdown()


@pytest.mark.parametrize(("units_per_file", "counts"), [(50, [3, 40, 30]), (5000, [1030, 2])])
async def test_a_batch_s_consume_queue_units_are_its_records_in_one_write_or_one_by_one(
        tmp_path: str, units_per_file: int, counts: list[int]) -> None:
    """A batch's units go into its queue in one pack when they fit in the current file (a Struct
    per count, or per unit past 1,024 units) and one by one across a file's end: every unit is
    its record's offset, size and tag hash, at its queue offset."""
    store = DefaultMessageStore(small_config(str(tmp_path), mappedFileSizeConsumeQueue=units_per_file * 20,
                                             mappedFileSizeCommitLog=1 << 20, messageIndexInChildProcess=False))
    await store.load()
    await store.start()
    try:
        queue_offset = 0
        for n, count in enumerate(counts):
            entries: list[StoredEntry] = [(0, f"b{n}-{i}".encode() * (1 + i % 3), b"TAGS\x01t", -1 - i)
                                          for i in range(count)]
            result = store.append_messages(MessageExtBatch("CQ", 0, entries, store_host=STORE_HOST))
            append = result.append_result
            assert result.status is PutMessageStatus.PUT_OK and append is not None
            assert append.logics_offset == queue_offset
            cq = store.find_consume_queue("CQ", 0)
            for i, offset in enumerate(append.offsets):
                record = store.look_message_by_offset(offset)
                assert record is not None
                assert cq.unit_at(queue_offset + i) == (offset, len(record), -1 - i)
            queue_offset += count
        assert store.get_max_offset_in_queue("CQ", 0) == queue_offset
    finally:
        await store.shutdown()


@pytest.mark.parametrize("first", [0, 2**32 - 4, 2**32 - 3, 2**40])
async def test_a_batch_s_records_hold_their_queue_offsets_below_and_past_2_32(tmp_path: str, first: int) -> None:
    """The batch builder packs the queue offsets of a batch below 2**32 as an unsigned int32 after
    four zero bytes, and others as an int64: the records are encode_record's either way."""
    store = DefaultMessageStore(small_config(str(tmp_path), messageIndexInChildProcess=False))
    await store.load()
    await store.start()
    try:
        store.commit_log.topic_queue_table[("Q32", 0)] = first
        entries: list[StoredEntry] = [(0, f"body-{i}".encode(), b"TAGS\x01a", 7) for i in range(4)]
        append = store.commit_log.append_batch(MessageExtBatch("Q32", 0, entries, store_host=STORE_HOST))
        assert append.status.value == "PUT_OK" and append.logics_offset == first
        for i, offset in enumerate(append.offsets):
            record = store.look_message_by_offset(offset)
            assert record is not None
            assert decode_record(record).queue_offset == first + i
            assert encode_record(decode_record(record)) == bytes(record)
        assert store.commit_log.topic_queue_table[("Q32", 0)] == first + 4
    finally:
        await store.shutdown()


@pytest.mark.parametrize("then", ["a put to its queue", "a full file"])
async def test_a_batch_built_for_one_place_and_stored_at_another_is_re_addressed(tmp_path: str, then: str) -> None:
    """A batch's records are built for where they would go when built (CommitLog.batch_maker, as
    the broker's walk of a batch body builds them); stored elsewhere (another put took that
    place and queue offset, or the file ended and the next one begins), each record holds its
    own physical and queue offsets and is encode_record's, and its unit is its record's."""
    store = DefaultMessageStore(small_config(str(tmp_path), messageIndexInChildProcess=False))
    await store.load()
    await store.start()
    try:
        commit_log = store.commit_log
        assert (await store.put_message(message("Moved", b"x" * 100))).ok
        stored = batch("Moved", [f"body-{i}".encode() * 50 for i in range(5)], tags="t")
        maker = stored.maker = commit_log.batch_maker(stored)
        stored.records = CommitLog._build_batch(stored.entries, maker)
        if then == "a put to its queue":
            assert (await store.put_message(message("Moved", b"y" * 100))).ok
        else:  # the current file filled to within the batch's size
            while commit_log.max_offset + stored.records[2] + 8 <= commit_log.queue.file_size:
                assert (await store.put_message(message("Other", b"z" * 1000))).ok
        end = commit_log.max_offset
        result = store.append_messages(stored)
        append = result.append_result
        assert result.status is PutMessageStatus.PUT_OK and append is not None
        assert append.wrote_offset != maker.offset and append.logics_offset == (1 if then == "a full file" else 2)
        assert append.wrote_offset == (commit_log.queue.file_size if then == "a full file" else end)
        cq = store.find_consume_queue("Moved", 0)
        for i, offset in enumerate(append.offsets):
            record = store.look_message_by_offset(offset)
            assert record is not None
            decoded = decode_record(record)
            assert (decoded.commit_log_offset, decoded.queue_offset) == (offset, append.logics_offset + i)
            assert encode_record(decoded) == bytes(record) and decoded.body == f"body-{i}".encode() * 50
            assert cq.unit_at(append.logics_offset + i) == (offset, len(record), tags_string_to_tags_code("t"))
    finally:
        await store.shutdown()


async def test_a_batch_stored_after_a_later_put_is_stamped_no_earlier_than_that_put(
        tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's store time is taken with its maker (CommitLog.batch_maker, when the broker walks
    its body). A put stored between that and the batch's append, 5 ms later, comes first in the
    CommitLog; the batch's records and result are then stamped with that put's time, not before
    it (Java stamps a batch inside its put lock): store times never go backwards along the
    CommitLog. A batch with no put between keeps its maker's time, though the clock moved on."""
    now = [1800000000.0005]  # half a millisecond in: int(now * 1000) is not at a float's mercy
    monkeypatch.setattr(time, "time", lambda: now[0])
    store = DefaultMessageStore(small_config(str(tmp_path), messageIndexInChildProcess=False))
    await store.load()
    await store.start()
    try:
        commit_log = store.commit_log
        late = batch("Stamped", [f"body-{i}".encode() * 20 for i in range(3)], tags="t")
        maker = late.maker = commit_log.batch_maker(late)
        late.records = CommitLog._build_batch(late.entries, maker)
        now[0] += 0.005
        put = await store.put_message(message("Stamped", b"y" * 100))
        assert put.ok and put.append_result is not None
        before = put.append_result.store_timestamp
        assert before == maker.store_ts + 5 == commit_log.last_store_timestamp
        result = store.append_messages(late)
        append = result.append_result
        assert result.status is PutMessageStatus.PUT_OK and append is not None
        assert append.wrote_offset > put.append_result.wrote_offset and append.logics_offset == 1
        assert append.store_timestamp == before == commit_log.last_store_timestamp
        stamps = []
        for i, offset in enumerate(append.offsets):
            record = store.look_message_by_offset(offset)
            assert record is not None
            decoded = decode_record(record)
            assert (decoded.commit_log_offset, decoded.queue_offset) == (offset, 1 + i)
            assert encode_record(decoded) == bytes(record) and decoded.body == f"body-{i}".encode() * 20
            stamps.append(decoded.store_timestamp)
        assert stamps == [before] * 3
        # No put between: the maker's time, and the records as built.
        on_time = batch("Stamped", [b"z" * 50], tags="t")
        maker = on_time.maker = commit_log.batch_maker(on_time)
        on_time.records = CommitLog._build_batch(on_time.entries, maker)
        built = b"".join(on_time.records[0])
        now[0] += 0.002
        append = store.append_messages(on_time).append_result
        assert append is not None and append.store_timestamp == maker.store_ts == before
        record = store.look_message_by_offset(append.wrote_offset)
        assert record is not None and bytes(record) == built
    finally:
        await store.shutdown()
