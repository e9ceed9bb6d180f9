"""Pull bodies straight into Arrow record batches: the connector's row format.

A Spark Python data source that yields tuples pays for a Python object per cell and a pickle per
row on the way to the JVM; an Arrow RecordBatch crosses in one columnar copy. So the records of a
PULL_MESSAGE body are cut into column lists here without building a MessageExt per message, and a
batch is handed to Spark every ``rows`` messages.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pyarrow as pa

from rocketmq_py.remoting.protocol.message import (
    COMPRESSED_FLAG,
    HOST_V6_FLAGS,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
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
        self.msg_id: list[str] = []
        self.body: list[bytes] = []
        self.tags: list[str | None] = []
        self.keys: list[str | None] = []
        # The properties map column, flat: names, values, and where each row's entries end.
        self.prop_names: list[str] = []
        self.prop_values: list[str] = []
        self.prop_ends: list[int] = [0]
        self.born: list[int] = []
        self.stored: list[int] = []
        self.reconsume: list[int] = []

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
        pos, size, seen, last = 0, len(buf), 0, -1
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
            props = string_to_properties(buf[p + 2:p + 2 + props_len].decode()) if props_len > 0 else {}
            pos = record_end
            tag = props.get(_TAGS)
            if tags is not None and tag not in tags:
                continue
            body = buf[body_at:body_at + body_len]
            if sys_flag & COMPRESSED_FLAG:
                body = zlib.decompress(body)
            msg_id = props.get(_UNIQ)
            if msg_id is None:
                msg_id = store_raw.hex().upper() + f"{phys:016X}"
            self.topic.append(topic)
            self.queue_id.append(queue_id)
            self.queue_offset.append(queue_offset)
            self.msg_id.append(msg_id)
            self.body.append(body)
            self.tags.append(tag)
            self.keys.append(props.get(_KEYS))
            self.prop_names.extend(props)
            self.prop_values.extend(props.values())
            self.prop_ends.append(len(self.prop_names))
            self.born.append(born_ts * 1000)
            self.stored.append(store_ts * 1000)
            self.reconsume.append(reconsume)
        return seen, last

    def take(self) -> pa.RecordBatch:
        n = len(self)
        arrays: list[Any] = [
            pa.array(self.topic, pa.string()), pa.array(self.queue_id, pa.int32()),
            pa.array([self.broker_name] * n, pa.string()), pa.array(self.queue_offset, pa.int64()),
            pa.array(self.msg_id, pa.string()), pa.array(self.body, pa.binary()),
            pa.array(self.tags, pa.string()), pa.array(self.keys, pa.string()),
            pa.MapArray.from_arrays(pa.array(self.prop_ends, pa.int32()), pa.array(self.prop_names, pa.string()),
                                    pa.array(self.prop_values, pa.string())),
            pa.array(self.born, pa.int64()).cast(_TS), pa.array(self.stored, pa.int64()).cast(_TS),
            pa.array(self.reconsume, pa.int32()),
        ]
        self._clear()
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def tags_of(expression: str | None) -> frozenset[str] | None:
    """The tag set of a subExpression (``TagA || TagB``); None for every tag (``*``)."""
    expression = (expression or "").strip()
    if expression in ("", "*"):
        return None
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    if not tags:
        raise ValueError(f"invalid subExpression: {expression!r}")
    return tags

