"""The connector's pure parts, no Spark session or sockets: options, admission control, range
splitting and the record decoder."""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketmq_py.client.spark.options import (
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    SPARK_OPTIONS,
    OptionError,
    sink_options,
    source_options,
)
from rocketmq_py.client.spark.partitions import QueueRange, split_ranges
from rocketmq_py.client.spark.records import RecordColumns, properties_column
from rocketmq_py.client.spark.source import cap_offsets
from rocketmq_py.remoting.protocol.message import (
    COMPRESSED_FLAG,
    MessageExt,
    RecordError,
    create_offset_msg_id,
    encode_record,
    string_to_properties,
)

BASE = {"namesrvAddr": "127.0.0.1:9876", "topic": "T"}


def test_source_options_defaults_and_case_insensitivity() -> None:
    o = source_options({"NAMESRVADDR": "h:1", "Topic": "T", "subexpression": "A || B"}, streaming=True)
    assert o.namesrv_addr == "h:1" and o.starting_offsets == "latest" and o.tags == frozenset({"A", "B"})
    assert o.fail_on_data_loss and o.pull_group == "TOOLS_CONSUMER"
    assert (o.pull_batch_size, o.pulls_in_flight, o.rows_per_batch) == (32, 8, 4096)  # as the README lists them
    assert source_options(BASE, streaming=False).starting_offsets == "earliest"


@pytest.mark.parametrize(("options", "message"), [
    ({"topic": "T"}, "namesrvAddr is required"),
    ({"namesrvAddr": "h:1"}, "topic is required"),
    ({**BASE, "startingOffsets": "[1]"}, "must map"),
    ({**BASE, "startingOffsets": '{"broker-a": 1}'}, "brokerName:queueId"),
    ({**BASE, "startingOffsets": '{"broker-a:0": -5}'}, "negative"),
    ({**BASE, "endingOffsets": "earliest"}, "cannot be 'earliest'"),
    ({**BASE, "startingOffsets": "latest"}, "batch read"),
    ({**BASE, "startingTimestamp": "1", "startingOffsets": "earliest"}, "not both"),
    ({**BASE, "minPartitions": "0"}, "minPartitions must be >= 1"),
    ({**BASE, "failOnDataLoss": "maybe"}, "true or false"),
    ({**BASE, "subExpression": "||"}, "invalid subExpression"),
])
def test_bad_source_options_are_refused_with_their_name(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        source_options(options, streaming=False)


def test_a_misspelled_option_is_refused_with_the_known_ones() -> None:
    with pytest.raises(OptionError) as caught:
        source_options({**BASE, "startingOffset": "latest"}, streaming=True)
    assert "unknown rocketmq source option startingoffset" in str(caught.value)
    assert all(name in str(caught.value) for name in SOURCE_OPTIONS)
    with pytest.raises(OptionError, match="unknown rocketmq sink option batchsizes; known: namesrvAddr"):
        sink_options({"namesrvAddr": "h:1", "batchSizes": "4"})


@given(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20))
def test_any_option_not_documented_is_refused(name: str) -> None:
    known = {n.lower() for n in SOURCE_OPTIONS + SINK_OPTIONS} | SPARK_OPTIONS
    if name.lower() in known:
        return
    with pytest.raises(OptionError, match="unknown rocketmq source option"):
        source_options({**BASE, name: "1"}, streaming=False)
    with pytest.raises(OptionError, match="unknown rocketmq sink option"):
        sink_options({"namesrvAddr": "h:1", name: "1"})
    # Spark's own keys pass
    assert source_options({**BASE, "path": "x", "checkpointLocation": "/c"}, streaming=True).topic == "T"


def test_ending_options_are_refused_for_streams() -> None:
    with pytest.raises(OptionError, match="for batch reads"):
        source_options({**BASE, "endingOffsets": "latest"}, streaming=True)


def test_sink_options() -> None:
    assert sink_options({"namesrvAddr": "h:1"}).batch_size == 64
    with pytest.raises(OptionError, match="batchSize"):
        sink_options({"namesrvAddr": "h:1", "batchSize": "x"})


@given(st.dictionaries(st.sampled_from([f"b:{i}" for i in range(6)]), st.tuples(st.integers(0, 500),
                                                                                 st.integers(0, 500)),
                       min_size=1), st.integers(1, 400))
def test_cap_offsets_never_exceeds_the_limit_and_never_goes_backwards(ranges: dict[str, tuple[int, int]],
                                                                      limit: int) -> None:
    start = {k: min(a, b) for k, (a, b) in ranges.items()}
    end = {k: max(a, b) for k, (a, b) in ranges.items()}
    capped = cap_offsets(start, end, limit)
    taken = sum(capped[k] - start[k] for k in end)
    assert taken == min(limit, sum(end[k] - start[k] for k in end))
    assert all(start[k] <= capped[k] <= end[k] for k in end)


def test_split_ranges_covers_every_offset_once() -> None:
    ranges = [QueueRange("T", "b", "a:1", 0, 0, 100), QueueRange("T", "b", "a:1", 1, 10, 13),
              QueueRange("T", "b", "a:1", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    parts = split_ranges(ranges, 10)
    assert len(parts) >= 10
    covered = sorted((p.queue_id, o) for p in parts for o in range(p.start, p.end))
    assert covered == [(0, o) for o in range(100)] + [(1, o) for o in range(10, 13)]


def test_record_columns_decode_range_tags_and_compressed_bodies() -> None:
    records = []
    for i in range(6):
        body, flag = (zlib.compress(b"z" * 5000), COMPRESSED_FLAG) if i == 4 else (f"m{i}".encode(), 0)
        records.append(encode_record(MessageExt(topic="T", body=body, queue_id=3, queue_offset=10 + i,
                                                sys_flag=flag, born_timestamp=1000 + i, store_timestamp=2000 + i,
                                                store_host=("10.0.0.1", 10911),
                                                properties={"TAGS": "A" if i % 2 == 0 else "B", "KEYS": f"k{i}"})))
    cols = RecordColumns("broker-x")
    seen, last = cols.add_body(b"".join(records), 11, 16, frozenset({"A"}))
    assert (seen, last) == (6, 15)
    # The records kept, their bodies as handed to Spark (inflated).
    assert cols.nbytes == len(records[2]) + len(records[4]) - len(zlib.compress(b"z" * 5000)) + 5000
    batch = cols.take().to_pydict()
    assert batch["queueOffset"] == [12, 14] and batch["body"] == [b"m2", b"z" * 5000]
    assert batch["brokerName"] == ["broker-x"] * 2 and batch["queueId"] == [3, 3]
    assert batch["keys"] == ["k2", "k4"] and batch["tags"] == ["A", "A"]
    assert batch["msgId"][0].startswith("0A000001") and len(batch["msgId"][0]) == 32  # offset msg id
    assert batch["bornTimestamp"][0].timestamp() == 1.002
    assert len(cols) == 0 and cols.nbytes == 0


# Property texts as any writer may store them: names and values from a few letters, the two
# separators anywhere (empty entries, entries without a value, a value holding NAME_VALUE_SEPARATOR),
# repeated names, non-ASCII text.
_PROPERTY_TEXT = st.lists(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "\x01", "\x02", "", "é", "v1", "x\x01y"]),
                          max_size=12).map("".join)


@given(st.lists(_PROPERTY_TEXT, min_size=1, max_size=20))
def test_properties_column_is_string_to_properties_row_by_row(texts: list[str]) -> None:
    """The batch parse (Arrow kernels) against the plain one, string_to_properties per row:
    the same entries in the same order, and tags, keys and msgId looked up the same way."""
    raw = [t.encode() for t in texts]
    expected = [string_to_properties(t) for t in texts]
    assert properties_column(pa.array(texts, pa.string())).to_pylist() == [list(d.items()) for d in expected]
    cols = RecordColumns("broker-x")
    body = b"".join(encode_record(MessageExt(topic="T", body=b"b", queue_offset=i, store_host=("10.0.0.1", 10911),
                                             commit_log_offset=i), properties=r) for i, r in enumerate(raw))
    cols.add_body(body, 0, len(raw), None)
    batch = cols.take().to_pydict()
    assert batch["tags"] == [d.get("TAGS") for d in expected]
    assert batch["keys"] == [d.get("KEYS") for d in expected]
    assert batch["msgId"] == [d.get("UNIQ_KEY", create_offset_msg_id(("10.0.0.1", 10911), i))
                              for i, d in enumerate(expected)]


# Well-formed properties as writers store them: names from a small pool (so rows share names, in
# the same or other orders, and a row may repeat one), values that may hold NAME_VALUE_SEPARATOR,
# with or without the trailing PROPERTY_SEPARATOR Java's messageProperties2String leaves.
_ENTRY = st.tuples(st.sampled_from(["UNIQ_KEY", "WAIT", "TAGS", "KEYS", "é", "値"]),
                   st.text(st.sampled_from("ab1é\x01"), min_size=1, max_size=6))
_WELL_FORMED = st.tuples(st.lists(_ENTRY, max_size=5), st.booleans()).map(
    lambda row: "".join(f"{n}\x01{v}\x02" for n, v in row[0])[:None if row[1] or not row[0] else -1])


@given(st.lists(_WELL_FORMED, min_size=1, max_size=30), st.integers(0, 3))
def test_properties_column_of_well_formed_rows_any_order_and_repeats(texts: list[str], skip: int) -> None:
    """Rows naming their properties in one order, in several, or one name twice: the map column
    is string_to_properties' row by row (the last value of a repeated name), also for a slice."""
    column = pa.array(["unused\x01x"] * skip + texts, pa.string()).slice(skip)
    assert properties_column(column).to_pylist() == [list(string_to_properties(t).items()) for t in texts]


def test_properties_that_are_not_utf8_are_a_record_error() -> None:
    cols = RecordColumns("broker-x")
    cols.add_body(encode_record(MessageExt(topic="T", body=b"b"), properties=b"TAGS\x01\xff"), 0, 1, None)
    with pytest.raises(RecordError):
        cols.take()
