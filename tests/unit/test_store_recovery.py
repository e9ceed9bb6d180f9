"""Recovery's fast paths pinned to the slow ones they replace, and the file recovery starts from."""

from __future__ import annotations

import asyncio
import mmap
import os
import struct
import tempfile
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_py.remoting.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MessageConst,
    RecordError,
    decode_record,
    decode_records,
    properties_to_string,
    string_to_properties,
    tags_string_to_tags_code,
)
from rocketmq_py.store.commit_log import CommitLog
from rocketmq_py.store.consume_queue import _UNIT, CQ_STORE_UNIT_SIZE, _valid_prefix
from rocketmq_py.store.message_result import GetMessageStatus, PutMessageStatus
from rocketmq_py.store.message_store import DefaultMessageStore
from tests.store_helpers import batch, index_caught_up, message, restarted, small_config
from tests.unit.test_store import _crashed_store, _read, _write

LOG_SIZE = 64 * 1024


def _patch(path: str, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def _reference_end(log: CommitLog, mm: mmap.mmap, limit: int) -> tuple[int, bool]:
    """Where the record-by-record walk (``check_record``, a full strict decode) ends a file."""
    pos = 0
    while pos < limit:
        size, msg, valid = log.check_record(mm, pos, limit)
        if not valid:
            return pos, False
        if msg is None:
            return limit, True
        pos += size
    return pos, True


@cache
def _log_file() -> bytes:
    """A 64 KiB CommitLog file written by the store: IPv4 and IPv6 hosts, bodies of every size
    from 1 byte, properties or none, and a BLANK filler at its end."""
    import asyncio
    import tempfile

    async def write(root: str) -> bytes:
        s = DefaultMessageStore(small_config(root, messageIndexInChildProcess=False))
        await s.load()
        await s.start()
        i = 0
        while len(s.commit_log.queue.files) < 2:
            await s.put_message(message("Scan" if i % 3 else "ScanOther", os.urandom(1 + i * 37 % 900),
                                        queue_id=i % 3, keys=f"k{i}" if i % 2 else None,
                                        born_host=("fe80::1", 1) if i % 5 == 0 else ("10.1.2.3", 5555)))
            i += 1
        data = bytes(s.commit_log.queue.files[0].mm)
        await s.shutdown()
        return data

    with tempfile.TemporaryDirectory() as root:
        return asyncio.run(write(root))


_damage = st.lists(st.tuples(st.integers(0, LOG_SIZE - 1), st.integers(0, 255)), min_size=1, max_size=3)


@settings(max_examples=300)
@given(damage=_damage, zero_from=st.one_of(st.none(), st.integers(0, LOG_SIZE - 1)))
def test_the_scan_ends_a_file_where_the_record_by_record_walk_does(damage: list[tuple[int, int]],
                                                                   zero_from: int | None) -> None:
    """Bytes changed anywhere (or a tail zeroed, as a torn write leaves it): the scan stops at
    the same record as a strict decode of each, but for one case the scan does not test: a
    property byte that is no longer UTF-8 (the CRC covers the body only)."""
    log = CommitLog(small_config("unused"))  # no file is opened before load()
    with mmap.mmap(-1, LOG_SIZE) as mm:
        mm[:] = _log_file()
        for at, value in damage:
            mm[at] = value
        if zero_from is not None:
            mm[zero_from:] = bytes(LOG_SIZE - zero_from)
        want = _reference_end(log, mm, LOG_SIZE)
        got, whole, to_dispatch = log.scan_records(mm, 0, LOG_SIZE, None, 1 << 62, 0)
        if (got, whole) != want:
            assert got > want[0], "the scan never stops earlier than the walk"
            try:
                decode_record(memoryview(mm)[want[0]:], 0, check_crc=True, strict=True)
            except RecordError as exc:
                assert "utf-8" in str(exc), (got, whole, want, str(exc))
        assert to_dispatch == []


# Bytes changed in a record: at an offset from its start, or (negative) from its end, where its
# topic and properties are; values a torn or foreign record often holds among them.
_record_damage = st.lists(st.tuples(st.integers(-48, 400), st.sampled_from([0, 1, 0x80, 0xC3, 0xFF])
                                    | st.integers(0, 255)), min_size=1, max_size=3)


@settings(max_examples=200)
@given(damage=_record_damage)
def test_check_record_reads_a_record_as_the_strict_decode_does(damage: list[tuple[int, int]]) -> None:
    """check_record's lean read (no body copy, no properties dict) against a full strict decode,
    on each record of a store-written file damaged the same way: the same verdict, and what
    dispatch reads."""
    log = CommitLog(small_config("unused"))  # no file is opened before load()
    clean = _log_file()
    pos = 0
    while True:
        total, magic = struct.unpack_from(">ii", clean, pos)
        if magic == BLANK_MAGIC_CODE:
            break
        data = bytearray(clean[pos:pos + total + 64])
        for at, value in damage:
            data[at % total] = value
        size, msg, valid = log.check_record(data, 0, len(data))
        got_total, got_magic = struct.unpack_from(">ii", data)
        try:
            if got_magic != MESSAGE_MAGIC_CODE or got_total <= 0 or got_total > len(data):
                raise RecordError("no record here")
            ext = decode_record(memoryview(data)[:got_total], 0, check_crc=True, strict=True)
        except RecordError:
            assert not valid or got_magic == BLANK_MAGIC_CODE
        else:
            assert valid and msg is not None
            assert (size, msg.topic, msg.queue_id, msg.flag, msg.sys_flag, msg.store_timestamp, msg.queue_offset,
                    msg.commit_log_offset, msg.prepared_transaction_offset, msg.body) == (
                ext.store_size, ext.topic, ext.queue_id, ext.flag, ext.sys_flag, ext.store_timestamp,
                ext.queue_offset, ext.commit_log_offset, ext.prepared_transaction_offset, b"")
            assert string_to_properties(msg.properties_string) == ext.properties
            assert msg.tags_code == tags_string_to_tags_code(ext.properties.get(MessageConst.TAGS))
        pos += total


def test_the_scan_lists_what_the_queues_lack() -> None:
    log = CommitLog(small_config("unused"))  # no file is opened before load()
    with mmap.mmap(-1, LOG_SIZE) as mm:
        mm[:] = _log_file()
        everything: dict[tuple[bytes, int], int] = {}
        _, whole, all_positions = log.scan_records(mm, 0, LOG_SIZE, everything, 1 << 62, 0)
        assert whole and len(all_positions) > 20
        records = [decode_record(memoryview(mm)[at:], 0) for at in all_positions]
        assert everything == {(t.encode(), q): 1 + max(r.queue_offset for r in records
                                                       if (r.topic, r.queue_id) == (t, q))
                              for t, q in {(r.topic, r.queue_id) for r in records}}
        # Queue Scan/1 holds its first two units; the index ends at the tenth record.
        pending = {(b"Scan", 1): 2, (b"Scan", 2): 10**9, (b"ScanOther", 0): 10**9}
        _, _, listed = log.scan_records(mm, 0, LOG_SIZE, pending, all_positions[10], 0)
        assert listed == [at for i, (at, r) in enumerate(zip(all_positions, records, strict=True))
                          if i >= 10 or ((r.topic, r.queue_id) == ("Scan", 1) and r.queue_offset >= 2)]


def _naive_prefix(data: bytes) -> int:
    pos = 0
    while pos + CQ_STORE_UNIT_SIZE <= len(data):
        offset, size, _ = _UNIT.unpack_from(data, pos)
        if offset < 0 or size <= 0:
            break
        pos += CQ_STORE_UNIT_SIZE
    return pos


_units = st.tuples(st.integers(-(2**63), 2**63 - 1), st.one_of(st.integers(-(2**31), 2**31 - 1),
                                                               st.sampled_from([0, 1, 0x7FFFFFFF, -1])),
                   st.integers(-(2**63), 2**63 - 1))


@settings(max_examples=200)
@given(good=st.integers(0, 9000), bad=st.lists(st.tuples(st.integers(0, 9999), _units), max_size=3))
def test_consume_queue_recovery_stops_at_the_first_bad_unit(good: int, bad: list[tuple[int, tuple[int, int, int]]]
                                                           ) -> None:
    """The block test finds the unit a unit-by-unit walk stops at, wherever it is."""
    units = 10_000
    data = bytearray(units * CQ_STORE_UNIT_SIZE)
    for i in range(good):
        _UNIT.pack_into(data, i * CQ_STORE_UNIT_SIZE, 1000 + i * 100, 100, i)
    for i, unit in bad:
        _UNIT.pack_into(data, i * CQ_STORE_UNIT_SIZE, *unit)
    with mmap.mmap(-1, len(data)) as mm:
        mm[:] = data
        assert _valid_prefix(mm, len(data)) == _naive_prefix(bytes(data))


async def test_abnormal_recovery_starts_at_the_file_the_checkpoint_vouches_for(tmp_path: str) -> None:
    """Java's isMappedFileMatchedRecover: the newest file whose first record is no newer than
    the checkpoint's minimum (less 3 s). A record broken in an older file is not read again;
    broken in that file, it ends the log."""
    root = str(tmp_path)
    config = small_config(root, mappedFileSizeCommitLog=LOG_SIZE, messageIndexInChildProcess=False)
    s = DefaultMessageStore(config)
    await s.load()
    await s.start()
    i = 0
    while len(s.commit_log.queue.files) < 4:
        await s.put_message(message("Start", f"m{i}".encode() * 40, queue_id=i % 2))
        i += 1
    end = s.commit_log.max_offset
    await s.shutdown()
    paths = [os.path.join(root, "commitlog", f"{k * LOG_SIZE:020d}") for k in range(4)]
    # IPv4 born hosts: a record's store time is at byte 56.
    first_stored = [struct.unpack_from(">q", _read(path), 56)[0] for path in paths]
    data = _read(paths[1])
    (first_size,) = struct.unpack_from(">i", data)
    _patch(paths[1], first_size + 88, bytes([data[first_size + 88] ^ 0xFF]))  # the second record's body

    async def crash_and_load(checkpoint_ts: int) -> int:
        _patch(os.path.join(root, "checkpoint"), 0, struct.pack(">qqq", checkpoint_ts, checkpoint_ts, checkpoint_ts))
        _write(os.path.join(root, "abort"), b"")
        again = DefaultMessageStore(config)
        assert not await again.load()
        recovered = again.commit_log.max_offset
        await again.start()
        await again.shutdown()
        return recovered

    # The checkpoint vouches for file 2: the record broken in file 1 is not read.
    assert await crash_and_load(first_stored[2] + 3000) == end
    # It vouches for file 1 only: the log ends at that record.
    assert await crash_and_load(first_stored[1] + 3000) == LOG_SIZE + first_size


async def test_abnormal_recovery_restores_the_units_a_queue_lost(tmp_path: str) -> None:
    root = str(tmp_path)
    start, size, _ = await _crashed_store(root, 5)
    cq_path = os.path.join(root, "consumequeue", "Torn", "0", f"{0:020d}")
    units = _read(cq_path)[:5 * CQ_STORE_UNIT_SIZE]
    _patch(cq_path, 2 * CQ_STORE_UNIT_SIZE, bytes(3 * CQ_STORE_UNIT_SIZE))  # three units lost
    s = DefaultMessageStore(small_config(root))
    assert not await s.load()
    try:
        assert s.get_max_offset_in_queue("Torn", 0) == 5
        cq = s.find_consume_queue("Torn", 0)
        assert [cq.unit_at(i) for i in range(5)] == list(_UNIT.iter_unpack(units))
        assert s.commit_log.max_offset == start + size
    finally:
        await s.start()
        await s.shutdown()


async def test_after_a_crash_the_index_child_indexes_what_the_index_lacks(tmp_path: str) -> None:
    root = str(tmp_path)
    await _crashed_store(root, 30)
    s = DefaultMessageStore(small_config(root))
    assert not await s.load()
    await s.start()
    try:
        await index_caught_up(s)
        for i in range(30):
            found = await s.query_message("Torn", f"k{i}", 8, 0, 2**62)
            assert [decode_record(b).body for b in found] == [f"message-{i}".encode() * 3], f"key k{i}"
    finally:
        await s.shutdown()


async def test_recovery_zeroes_stale_bytes_past_the_end_of_the_log(tmp_path: str) -> None:
    root = str(tmp_path)
    start, size, _ = await _crashed_store(root, 5)
    path = os.path.join(root, "commitlog", f"{0:020d}")
    file_size = len(_read(path))
    _patch(path, start + size // 2, bytes(size - size // 2))  # the last record torn
    _patch(path, file_size - 4096, b"\xAB" * 4096)  # bytes far past it, as a lost page in between leaves
    s = DefaultMessageStore(small_config(root))
    assert not await s.load()
    await s.start()
    await s.shutdown()
    assert _read(path)[start:] == bytes(file_size - start)


def _resident_kib(path: str) -> int | None:
    """The resident kB of this process's mapping of ``path`` (/proc/self/smaps), None when unmapped."""
    rss = None
    with open("/proc/self/smaps") as f:
        current = False
        for line in f:
            if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                current = line.rstrip("\n").endswith(path)
            elif current and line.startswith("Rss:"):
                rss = (rss or 0) + int(line.split()[1])
    return rss


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux's /proc tells what is resident")
@pytest.mark.parametrize("crash", [False, True])
async def test_recovery_leaves_no_scanned_page_resident(tmp_path: str, crash: bool) -> None:
    """After recovery has scanned the CommitLog (normally its last three files, after a crash
    from the checkpoint's), the files before the last are unmapped and the last's pages dropped
    from the mapping: nothing it read is held, so a dropped page cache makes reads cold. Every
    message stays readable."""
    cfg = small_config(str(tmp_path), mappedFileSizeCommitLog=1 << 20, messageIndexInChildProcess=False)
    store = DefaultMessageStore(cfg)
    await store.load()
    await store.start()
    bodies = [os.urandom(10_000) for _ in range(350)]  # 3.4 MiB: four files
    for i, body in enumerate(bodies):
        assert store.append_message(message("Cold", body, queue_id=i % 4)).ok
    await store.shutdown()
    if crash:
        os.close(os.open(os.path.join(str(tmp_path), "abort"), os.O_CREAT | os.O_WRONLY))
    store = DefaultMessageStore(cfg)
    await store.load()
    try:
        files = store.commit_log.queue.files
        assert len(files) == 4
        assert [mf.mapped for mf in files] == [False, False, False, True]
        assert _resident_kib(files[-1].path) == 0
        await store.start()
        got = []
        for q in range(4):
            offset = 0
            while (found := store.get_message("g", "Cold", q, offset, 32)).buffers:
                got += [decode_record(b).body for b in found.buffers]
                offset = found.next_begin_offset
        assert sorted(got) == sorted(bodies)
    finally:
        await store.shutdown()


async def _put_and_restart(root: str, puts: list[tuple[bool, str]]) -> None:
    s = DefaultMessageStore(small_config(root, messageIndexInChildProcess=False))
    await s.load()
    await s.start()
    acked: dict[int, bytes] = {}
    for i, (batched, value) in enumerate(puts):
        body = b"%d" % i
        if batched:
            props = properties_to_string({"x": value, MessageConst.TAGS: "T"})
            result = await s.put_messages(batch("Props", [body], properties=[props]))
        else:
            result = await s.put_message(message("Props", body, tags="T", extra={"x": value}))
        if "\0" in value:
            assert result.status == PutMessageStatus.MESSAGE_ILLEGAL and "NUL" in (result.remark or ""), result
        else:
            assert result.status == PutMessageStatus.PUT_OK, result
            assert result.append_result is not None
            acked[result.append_result.logics_offset] = body
    s = await restarted(s)
    try:
        assert s.get_max_offset_in_queue("Props", 0) == len(acked)
        for offset, body in acked.items():
            got = s.get_message("g", "Props", 0, offset, 1)
            assert got.status == GetMessageStatus.FOUND, (offset, got.status)
            (msg,) = decode_records(got.buffers[0])
            assert msg.queue_offset == offset and msg.body == body
    finally:
        await s.shutdown()


@settings(max_examples=25, deadline=None)
@given(puts=st.lists(st.tuples(st.booleans(), st.text(max_size=4)), min_size=1, max_size=6))
def test_a_clean_restart_keeps_every_acknowledged_put_whatever_its_properties(puts: list[tuple[bool, str]]) -> None:
    """Recovery reads a NUL byte in a record's properties as a torn record's unwritten tail and
    ends the log there, so a record stored with one was cut off the log at the next start with
    every record after it (tests/integration/test_hostile_requests.py lost acknowledged sends
    that way): such a put is refused, and everything acknowledged survives the restart."""
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(_put_and_restart(root, [*puts, (False, "\0"), (False, "last")]))
