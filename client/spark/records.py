"""Pull bodies straight into Arrow record batches: the connector's row format.

A Spark Python data source that yields tuples pays for a Python object per cell and a pickle per
row on the way to the JVM; an Arrow RecordBatch crosses in one columnar copy. So the records of a
PULL_MESSAGE body are cut into column lists here without building a MessageExt per message, and a
batch is handed to Spark every ``rows`` messages.

Properties are the costly part of a record (a dict, its strings and three look-ups were a third
of the decoding): each record's raw properties are kept as they are, and a batch's are parsed at
once by Arrow's string kernels into the map column, with tags, keys and msgId looked up in it.
A batch whose properties repeat a name falls back to ``string_to_properties`` row by row (where
the last value wins), so the columns are the same either way.
"""

from __future__ import annotations

import struct
import zlib
from itertools import accumulate
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_py.remoting.protocol.message import (
    COMPRESSED_FLAG,
    HOST_V6_FLAGS,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    RECORD_HEADS,
    SYS_FLAG_AT,
    MessageConst,
    RecordError,
    string_to_properties,
)

# The DataFrame schema of a read (the column list), in Spark's DDL.
SCHEMA_DDL = (
    "topic string, queueId int, brokerName string, queueOffset long, msgId string, body binary, "
    "tags string, keys string, properties map<string,string>, bornTimestamp timestamp, "
    "storeTimestamp timestamp, reconsumeTimes int"
)

# Spark maps TimestampType to microseconds in UTC on the Arrow side.
_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("queueId", pa.int32()), ("brokerName", pa.string()), ("queueOffset", pa.int64()),
    ("msgId", pa.string()), ("body", pa.binary()), ("tags", pa.string()), ("keys", pa.string()),
    ("properties", pa.map_(pa.string(), pa.string())), ("bornTimestamp", _TS), ("storeTimestamp", _TS),
    ("reconsumeTimes", pa.int32()),
])

_TOTAL_MAGIC = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_UNIQ = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_TAGS = MessageConst.TAGS
_KEYS = MessageConst.KEYS

# A batch goes to Spark once its bodies hold this many bytes, whatever rowsPerBatch says: 8,192
# rows of 4 MiB bodies would be 32 GiB in one worker, and a binary column's 32-bit offsets end at
# 2 GiB (pa.array then returns chunks, which a RecordBatch does not take).
BATCH_BYTES = 64 << 20


class RecordColumns:
    """Column lists being filled from pull bodies of one queue; ``take()`` makes a RecordBatch."""

    def __init__(self, broker_name: str) -> None:
        self.broker_name = broker_name
        self._topics: dict[bytes, str] = {}
        self._clear()

    def _clear(self) -> None:
        self.topic: list[str] = []
        self.queue_id: list[int] = []
        self.queue_offset: list[int] = []
        self.properties: list[bytes] = []  # raw, as stored: parsed a batch at a time by take()
        self.phys: list[int] = []  # with store_host, the offset msgId of a message without UNIQ_KEY
        self.store_host: list[bytes] = []
        self.body: list[bytes] = []
        self.born: list[int] = []
        self.stored: list[int] = []
        self.reconsume: list[int] = []
        self.nbytes = 0  # of the bodies, as handed to Spark (inflated)

    def __len__(self) -> int:
        return len(self.queue_offset)

    def add_body(self, buf: bytes, start: int, end: int, tags: frozenset[str] | None) -> tuple[int, int]:
        """Append the records of one pull body whose queue offsets lie in [start, end), keeping
        only ``tags`` (the broker filters by tag hash, which may collide: RocketMQ's client checks
        the tag string too). Returns (records seen, highest queue offset seen or -1)."""
        try:
            return self._add(buf, start, end, tags)
        except (struct.error, IndexError, UnicodeDecodeError, zlib.error) as exc:
            raise RecordError(f"corrupt record in a pull body: {exc}") from None

    def _add(self, buf: bytes, start: int, end: int, tags: frozenset[str] | None) -> tuple[int, int]:
        pos, size, seen, last, nbytes = 0, len(buf), 0, -1, 0
        topics = self._topics
        heads = RECORD_HEADS
        while pos < size:
            if size - pos < MIN_RECORD_SIZE:
                raise RecordError("truncated record header")
            total, magic = _TOTAL_MAGIC.unpack_from(buf, pos)
            if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD_SIZE or pos + total > size:
                raise RecordError(f"bad record at {pos}: magic {magic:#x}, size {total}")
            (sys_flag,) = _I32.unpack_from(buf, pos + SYS_FLAG_AT)
            head = heads[sys_flag & HOST_V6_FLAGS]
            (_, _, _, queue_id, _, queue_offset, phys, _, born_ts, _, store_ts, store_raw, reconsume, _,
             body_len) = head.unpack_from(buf, pos)
            seen += 1
            last = queue_offset
            record_end = pos + total
            if not start <= queue_offset < end:
                pos = record_end
                continue
            body_at = pos + head.size
            p = body_at + body_len
            topic_raw = buf[p + 1:p + 1 + buf[p]]
            topic = topics.get(topic_raw)
            if topic is None:
                topic = topics[topic_raw] = topic_raw.decode()
            p += 1 + len(topic_raw)
            (props_len,) = _I16.unpack_from(buf, p)
            raw = buf[p + 2:p + 2 + props_len] if props_len > 0 else b""
            pos = record_end
            if tags is not None and string_to_properties(raw.decode()).get(_TAGS) not in tags:
                continue
            body = buf[body_at:body_at + body_len]
            if sys_flag & COMPRESSED_FLAG:
                body = zlib.decompress(body)
            self.topic.append(topic)
            self.queue_id.append(queue_id)
            self.queue_offset.append(queue_offset)
            self.properties.append(raw)
            self.phys.append(phys)
            self.store_host.append(store_raw)
            self.body.append(body)
            nbytes += len(body)
            self.born.append(born_ts * 1000)
            self.stored.append(store_ts * 1000)
            self.reconsume.append(reconsume)
        self.nbytes += nbytes
        return seen, last

    def take(self) -> pa.RecordBatch:
        n = len(self)
        try:
            props = properties_column(self.properties)
        except pa.ArrowInvalid as exc:  # properties that are not UTF-8
            raise RecordError(f"corrupt record in a pull body: {exc}") from None
        msg_id = pc.map_lookup(props, _UNIQ, "last")
        if msg_id.null_count:  # no UNIQ_KEY (a message from an old client): the offset msgId
            msg_id = pa.array([m if m is not None else host.hex().upper() + f"{phys:016X}"
                               for m, host, phys in zip(msg_id.to_pylist(), self.store_host, self.phys, strict=True)],
                              pa.string())
        arrays: list[Any] = [
            pa.array(self.topic, pa.string()), pa.array(self.queue_id, pa.int32()),
            pa.array([self.broker_name] * n, pa.string()), pa.array(self.queue_offset, pa.int64()),
            msg_id, pa.array(self.body, pa.binary()),
            pc.map_lookup(props, _TAGS, "last"), pc.map_lookup(props, _KEYS, "last"), props,
            pa.array(self.born, pa.int64()).cast(_TS), pa.array(self.stored, pa.int64()).cast(_TS),
            pa.array(self.reconsume, pa.int32()),
        ]
        self._clear()
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def properties_column(raw: list[bytes]) -> pa.MapArray:
    """The map column of records' raw properties, by ``string_to_properties``' rules: entries
    split at PROPERTY_SEPARATOR, each a name and a value split at the first NAME_VALUE_SEPARATOR,
    an entry without both (or an empty one) skipped; ArrowInvalid for text that is not UTF-8."""
    texts = pa.array(raw, pa.string())
    entries = pc.split_pattern(texts, PROPERTY_SEPARATOR)
    pairs = pc.split_pattern(entries.values, NAME_VALUE_SEPARATOR, max_splits=1)
    kept = pc.equal(pc.list_value_length(pairs), 2)
    pairs = pairs.filter(kept)
    names, values = pc.list_element(pairs, 0), pc.list_element(pairs, 1)
    filled = pc.and_(pc.greater(pc.binary_length(names), 0), pc.greater(pc.binary_length(values), 0))
    if filled.false_count:
        names, values = names.filter(filled), values.filter(filled)
        kept = pc.replace_with_mask(kept, kept, filled)
    # Where each row's kept entries end: the running count of kept entries at each row's end.
    counts = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(kept.cast(pa.int32()))])
    ends = pc.take(counts, entries.offsets)
    if len(names) > 1:
        # A name twice in one row: (row, name) pairs, as integers, fewer distinct than there are.
        rows = pc.list_parent_indices(entries).filter(kept).cast(pa.int64())
        codes = pc.dictionary_encode(names)
        pairs_of = pc.add(pc.multiply(rows, len(codes.dictionary)), codes.indices.cast(pa.int64()))
        if pc.count_distinct(pairs_of).as_py() != len(pairs_of):
            return _properties_by_row(raw)
    return pa.MapArray.from_arrays(ends, names, values)


def _properties_by_row(raw: list[bytes]) -> pa.MapArray:
    """The map column through ``string_to_properties``, a row at a time: the plain path, for
    properties that name something twice (the last value wins, as in a dict)."""
    dicts = [string_to_properties(r.decode()) for r in raw]
    return pa.MapArray.from_arrays(pa.array(list(accumulate(map(len, dicts), initial=0)), pa.int32()),
                                   pa.array([name for d in dicts for name in d], pa.string()),
                                   pa.array([value for d in dicts for value in d.values()], pa.string()))


def tags_of(expression: str | None) -> frozenset[str] | None:
    """The tag set of a subExpression (``TagA || TagB``); None for every tag (``*``)."""
    expression = (expression or "").strip()
    if expression in ("", "*"):
        return None
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    if not tags:
        raise ValueError(f"invalid subExpression: {expression!r}")
    return tags

