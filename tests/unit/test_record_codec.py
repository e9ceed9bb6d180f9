"""Stored records decoded: every field through each host-address layout; the client's view with
compressed bodies inflated, the broker's view untouched."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.client.allocate import MessageQueue
from rocketmq_py.client.pull_api_wrapper import decode_pulled as _decode_pulled
from rocketmq_py.remoting.protocol.batch_body import split_batch
from rocketmq_py.remoting.protocol.message import (
    COMPRESSED_FLAG,
    BatchEntry,
    MessageExt,
    RecordError,
    crc32,
    decode_record,
    decode_records,
    encode_batch,
    encode_record,
)


@pytest.mark.parametrize("born", [("10.1.2.3", 5555), ("fe80::1", 6666)])
@pytest.mark.parametrize("store", [("127.0.0.1", 10911), ("2001:db8::7", 10912)])
def test_every_field_round_trips_through_each_host_layout(born: tuple[str, int], store: tuple[str, int]) -> None:
    sent = MessageExt(topic="Tópico", body=b"\x00body", queue_id=3, flag=7, queue_offset=41, commit_log_offset=1 << 40,
                      sys_flag=0x4, born_timestamp=1700000000123, born_host=born, store_timestamp=1700000000456,
                      store_host=store, reconsume_times=2, prepared_transaction_offset=99,
                      properties={"TAGS": "a", "KEYS": "k1 k2"}, body_crc=12345)
    buf = b"pad" + encode_record(sent) + encode_record(sent)
    got = decode_record(buf, 3)
    sent.sys_flag |= (0x10 if ":" in born[0] else 0) | (0x20 if ":" in store[0] else 0)
    sent.store_size = len(buf[3:]) // 2
    assert got == sent
    assert decode_record(buf, 3 + got.store_size) == sent


def record(body: bytes, sys_flag: int) -> bytes:
    return encode_record(MessageExt(topic="T", body=body, sys_flag=sys_flag, properties={"TAGS": "a"}))


def test_compressed_body_inflates_only_when_asked() -> None:
    plain = b"payload " * 1000
    buf = record(zlib.compress(plain, 5), COMPRESSED_FLAG) + record(b"small", 0)
    broker_view = list(decode_records(buf))
    client_view = list(decode_records(buf, decompress=True))
    assert broker_view[0].body == zlib.compress(plain, 5)
    assert [m.body for m in client_view] == [plain, b"small"]
    assert client_view[0].sys_flag & COMPRESSED_FLAG  # the flag stays as stored, as in Java
    assert client_view[0].store_size == broker_view[0].store_size


def test_a_flagged_body_that_does_not_inflate_is_a_record_error() -> None:
    buf = record(b"not zlib at all", COMPRESSED_FLAG)
    assert decode_record(buf).body == b"not zlib at all"
    with pytest.raises(RecordError, match="inflate"):
        decode_record(buf, decompress=True)


def test_a_pull_batch_keeps_the_records_before_an_undecodable_one() -> None:
    buf = record(b"one", 0) + record(b"bad", COMPRESSED_FLAG) + record(b"three", 0)
    assert [m.body for m in _decode_pulled(buf, MessageQueue("T", "b", 0), 0)] == [b"one"]


def test_batch_bodies_split_back_into_their_entries() -> None:
    entries = [BatchEntry(7, b"first", "TAGS\x01a"), BatchEntry(0, b"", ""),
               BatchEntry(1, b"\x00" * 300, "K\x01\u00e9")]
    body = encode_batch(entries)
    assert [(flag, bytes(data), props) for flag, data, props in split_batch(body)] == [
        (e.flag, e.body, e.properties.encode()) for e in entries]
    assert split_batch(b"") == []
    for broken in (body[:-1], body + b"\x00" * 5, body[:10], b"\x7f" + body[1:]):
        with pytest.raises(RecordError):
            split_batch(broken)


@given(st.binary(max_size=4096), st.integers(0, 64), st.integers(0, 64))
def test_the_body_checksum_is_zlibs_crc32(data: bytes, start: int, cut: int) -> None:
    """The stored BODYCRC is Java's CRC32 (zlib's): whichever implementation ``crc32`` is (ISA-L's
    where installed), on bytes and on the memoryviews records are built and checked from."""
    assert crc32(data) == zlib.crc32(data)
    view = memoryview(data)[start:len(data) - cut]
    assert crc32(view) == zlib.crc32(view)
