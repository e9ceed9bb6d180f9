"""The connector's bulk decode (RecordColumns) against the SDK's, record by record.

RecordColumns walks a pull body once and builds each column for a whole batch at once; the SDK's
``decode_record`` decodes one record into a MessageExt. For any records, both must give the same
rows, and bytes that one refuses (RecordError) the other refuses too.
"""

from __future__ import annotations

import random
import struct
import zlib
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketmq_py.client.spark.records import RecordColumns
from rocketmq_py.remoting.protocol.message import (
    COMPRESSED_FLAG,
    MessageConst,
    MessageExt,
    RecordError,
    decode_records,
    encode_record,
    record_field_at,
)

_HOST = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str)
_PORT = st.integers(0, 65535)
# Property texts as any writer may store them: the separators anywhere (empty entries, entries
# without a value, a value holding NAME_VALUE_SEPARATOR), repeated names, the names the columns
# are looked up by, non-ASCII and control characters.
_PROPERTIES = st.lists(st.one_of(
    st.sampled_from([MessageConst.TAGS, MessageConst.KEYS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "\x01",
                     "\x02", "", "é", "値", "\x00", "😀", "v1", "x\x01y"]),
    st.text(max_size=8)), max_size=12).map("".join)
# Bodies empty, small or large (random bytes from a seed: hypothesis draws every byte otherwise).
_BODY = st.one_of(st.binary(max_size=64),
                  st.tuples(st.integers(64 << 10, 300 << 10), st.integers(0)).map(
                      lambda size_seed: random.Random(size_seed[1]).randbytes(size_seed[0])))
_TOPIC = st.text(st.characters(codec="utf-8"), min_size=1, max_size=40).filter(
    lambda t: len(t.encode()) <= 255)


@st.composite
def _records(draw: st.DrawFn, small: bool = False) -> tuple[bytes, bool]:
    """One stored record as a pull body carries it, and whether it was written compressed."""
    body = draw(st.binary(max_size=64) if small else _BODY)
    compressed = draw(st.booleans())
    return encode_record(MessageExt(
        topic=draw(_TOPIC), body=zlib.compress(body) if compressed else body,
        queue_id=draw(st.integers(-2**31, 2**31 - 1)), queue_offset=draw(st.integers(0, 2**62)),
        commit_log_offset=draw(st.integers(-2**63, 2**63 - 1)),
        sys_flag=COMPRESSED_FLAG if compressed else 0, born_timestamp=draw(st.integers(-2**52, 2**52)),
        born_host=(draw(_HOST), draw(_PORT)), store_timestamp=draw(st.integers(-2**52, 2**52)),
        store_host=(draw(_HOST), draw(_PORT)), reconsume_times=draw(st.integers(-2**31, 2**31 - 1)),
        flag=draw(st.integers(-2**31, 2**31 - 1)), body_crc=draw(st.integers(-2**31, 2**31 - 1))),
        properties=draw(_PROPERTIES).encode()), compressed


def _expected(msgs: list[MessageExt]) -> dict[str, list[Any]]:
    """The columns of ``msgs`` as the SDK's decoder sees them."""
    return {
        "topic": [m.topic for m in msgs], "queueId": [m.queue_id for m in msgs],
        "brokerName": ["broker-x"] * len(msgs), "queueOffset": [m.queue_offset for m in msgs],
        "msgId": [m.msg_id for m in msgs], "body": [m.body for m in msgs], "tags": [m.tags for m in msgs],
        "keys": [m.keys for m in msgs], "properties": [list(m.properties.items()) for m in msgs],
        "bornTimestamp": [m.born_timestamp * 1000 for m in msgs],
        "storeTimestamp": [m.store_timestamp * 1000 for m in msgs],
        "reconsumeTimes": [m.reconsume_times for m in msgs],
    }


def _columns(batch: pa.RecordBatch) -> dict[str, list[Any]]:
    """The batch's columns, timestamps as their microseconds."""
    return {name: (column.cast(pa.int64()) if pa.types.is_timestamp(column.type) else column).to_pylist()
            for name, column in zip(batch.schema.names, batch.columns, strict=True)}


def _bulk(bodies: list[bytes], start: int = -2**63, end: int = 2**63,
          tags: frozenset[str] | None = None) -> pa.RecordBatch:
    columns = RecordColumns("broker-x")
    for body in bodies:
        columns.add_body(body, start, end, tags)
    return columns.take()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.lists(_records(), min_size=1, max_size=6), min_size=1, max_size=4))
def test_bulk_decode_gives_the_sdks_rows(pulls: list[list[tuple[bytes, bool]]]) -> None:
    """Pull bodies of any records (IPv4 and IPv6 hosts, empty, large and compressed bodies, odd
    properties, no UNIQ_KEY) give, row for row, what decode_record gives with the body inflated."""
    bodies = [b"".join(record for record, _ in pull) for pull in pulls]
    expected = [m for body in bodies for m in decode_records(body, decompress=True)]
    assert _columns(_bulk(bodies)) == _expected(expected)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_records(), min_size=1, max_size=8), st.integers(0, 8), st.integers(0, 8),
       st.sets(st.sampled_from(["", "A", "é", "x\x01y"]), max_size=2))
def test_range_and_tags_keep_the_sdks_rows(records: list[tuple[bytes, bool]], first: int, count: int,
                                           tags: set[str]) -> None:
    """Records numbered by queue offset: those in [first, first + count) with one of ``tags``
    (or any, for no tags), as the SDK's decoder and its tag check would keep them."""
    numbered = bytearray(b"".join(record for record, _ in records))
    at = 0
    for offset, (record, _) in enumerate(records):  # queue offsets 0, 1, 2...
        struct.pack_into(">q", numbered, at + record_field_at("queue_offset"), offset)
        at += len(record)
    body = bytes(numbered)
    wanted = frozenset(tags) or None
    kept = [m for m in decode_records(body, decompress=True)
            if first <= m.queue_offset < first + count and (wanted is None or m.tags in wanted)]
    assert _columns(_bulk([body], first, first + count, wanted)) == _expected(kept)


def _length_bytes(record: bytes) -> list[int]:
    """Where the record's sizes and lengths lie: its total size, sysFlag (the host flags), body
    length, topic length and properties length -- what a walk and a cut go by."""
    msg = next(decode_records(record))
    sys_flag_at, body_length_at = record_field_at("sys_flag"), record_field_at("body_length", msg.sys_flag)
    topic_length_at = body_length_at + 4 + len(msg.body)
    props_length_at = topic_length_at + 1 + len(msg.topic.encode())
    return [0, 1, 2, 3, sys_flag_at + 3, *range(body_length_at, body_length_at + 4), topic_length_at,
            props_length_at, props_length_at + 1]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_records(small=True), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(0), st.booleans(), st.integers(0), st.integers(0, 255)), min_size=1, max_size=3))
def test_corrupt_bytes_are_refused_as_the_sdk_refuses_them(records: list[tuple[bytes, bool]],
                                                          changes: list[tuple[int, bool, int, int]]) -> None:
    """Bytes changed in a pull body (a size or length of some record's, or any byte): where the
    SDK's decoder refuses the body, so does the bulk decode, with a RecordError; where the SDK's
    decodes it, the bulk decode gives the same rows or a RecordError (it also refuses timestamps
    past Spark's range), never another error."""
    body = bytearray(b"".join(record for record, _ in records))
    starts = [sum(len(record) for record, _ in records[:i]) for i in range(len(records))]
    for which, in_lengths, where, value in changes:
        record = records[which % len(records)][0]
        lengths = _length_bytes(record)
        at = lengths[where % len(lengths)] if in_lengths else where % len(record)
        body[starts[which % len(records)] + at] = value
    try:
        expected: list[MessageExt] | None = list(decode_records(bytes(body), decompress=True))
    except RecordError:
        expected = None
    if expected is None:
        with pytest.raises(RecordError):
            _bulk([bytes(body)])
        return
    try:
        batch = _bulk([bytes(body)])
    except RecordError:
        return
    assert _columns(batch) == _expected(expected)
