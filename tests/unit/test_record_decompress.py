"""The client's view of a stored record: compressed bodies inflated, the broker's view untouched."""

from __future__ import annotations

import zlib

import pytest

from client.allocate import MessageQueue
from client.lite_pull_consumer import _decode_pulled
from remoting.protocol.message import (
    COMPRESSED_FLAG,
    MessageExt,
    RecordError,
    decode_record,
    decode_records,
    encode_record,
)


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
