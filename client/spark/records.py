"""Pull bodies straight into Arrow record batches: the connector's row format.

A Spark Python data source that yields tuples pays for a Python object per cell and a pickle per
row on the way to the JVM; an Arrow RecordBatch crosses in one columnar copy. So the records of a
PULL_MESSAGE body become columns here without a MessageExt per message, and a batch is handed to
Spark every ``rows`` messages.

Python's share per record is the walk a body needs (each record's size, magic code, queue offset
and sysFlag, one unpack) and the record's place; no bytes are copied and no field is read per row.
The rest is done a batch at a time, from the batch's pull bodies joined into one buffer: cut at
the places of every record's parts (the head's runs around its hosts, body, topic, properties)
into one binary array, each part is gathered from it by Arrow's ``take``, and the head's integers
are read out of the gathered runs as arrays of their width (a strided copy, then a byte swap from
big-endian). Positions and sizes come from the one head declaration (RECORD_HEAD_FIELDS), and the
lengths between the parts are checked against each record's size as ``decode_record`` checks
them, before anything is cut by them.

Properties are parsed by Arrow's string kernels into the map column, with tags, keys and msgId
looked up in it; a batch whose properties repeat a name falls back to ``string_to_properties``
row by row (where the last value wins), so the columns are the same either way.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from functools import cache
from itertools import accumulate
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_py.remoting.protocol.message import (
    COMPRESSED_FLAG,
    HOST_V6_FLAGS,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    RECORD_HEAD_FIELDS,
    RECORD_HEADS,
    MessageConst,
    RecordError,
    record_field_at,
    record_head,
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

# A batch goes to Spark once its records hold this many bytes, whatever rowsPerBatch says: 4,096
# rows of 4 MiB bodies would be 16 GiB in one worker, and a binary column's 32-bit offsets end at
# 2 GiB (pa.array then returns chunks, which a RecordBatch does not take).
BATCH_BYTES = 64 << 20

# Every value a compute function is called with is an Arrow scalar made once: a Python value is
# converted on each call, and pyarrow's conversion looks for dateutil every time (an import that
# fails without it), about 70 µs a call here against 3 with a scalar.
_UNIQ = pa.scalar(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, pa.string())
_TAGS = pa.scalar(MessageConst.TAGS, pa.string())
_KEYS = pa.scalar(MessageConst.KEYS, pa.string())


@cache
def _int64(value: int) -> pa.Int64Scalar:
    """``value`` as an Arrow scalar, made once."""
    return pa.scalar(value, pa.int64())


_0, _1, _2, _3, _256, _1000 = map(_int64, (0, 1, 2, 3, 256, 1000))
_SHORT_SIGN = _int64(0x8000)  # the properties' length is a signed short
_HOST_FLAGS = pa.scalar(HOST_V6_FLAGS, pa.int32())
_I32_0, _I32_2 = pa.scalar(0, pa.int32()), pa.scalar(2, pa.int32())

# What the walk of a body reads of each record: the fields before the hosts, where they are in
# every record.
_WALK = record_head(fields=("total_size", "magic_code", "queue_offset", "sys_flag"))
_I16 = struct.Struct(">h")
# The head cut at its hosts into three runs whose layouts are the same under any host flags: from
# a first field to the next host (the last run to the body). A field is read from its run.
_RUNS = (("total_size", "born_host"), ("store_timestamp", "store_host"), ("reconsume_times", None))
_RUN_SPANS = [(record_field_at(first), record_field_at(end) if end else RECORD_HEADS[0].size) for first, end in _RUNS]


def _run_of(name: str) -> tuple[int, int]:
    """The run holding field ``name`` and its place in it."""
    at = record_field_at(name)
    return next((run, at - start) for run, (start, end) in enumerate(_RUN_SPANS) if start <= at < end)


def _by_host_flags(values: dict[int, int]) -> pa.Int64Array:
    """A lookup array by host flags (``take`` by each row's sysFlag & HOST_V6_FLAGS)."""
    return pa.array([values.get(flags, 0) for flags in range(HOST_V6_FLAGS + 1)], pa.int64())


# Where each run but the first starts and where the body does, by host flags.
_RUN_AT = [_by_host_flags({flags: record_field_at(first, flags) for flags in RECORD_HEADS}) for first, _ in _RUNS[1:]]
_BODY_AT = _by_host_flags({flags: head.size for flags, head in RECORD_HEADS.items()})
_PHYSICAL_OFFSET_AT = record_field_at("physical_offset")
_STORE_HOST = {flags: (record_field_at("store_host", flags), record_field_at("reconsume_times", flags))
               for flags in RECORD_HEADS}
_FIELD_CODES = dict(RECORD_HEAD_FIELDS)
_LITTLE_ENDIAN = sys.byteorder == "little"
# Every run is a whole number of 8-byte words, so a field recurs every whole number of its own
# widths (4 or 8) and a run can be read as an array of them.
assert all((end - start) % 8 == 0 for start, end in _RUN_SPANS)


class RecordColumns:
    """The records of pull bodies of one queue, kept as their places in those bodies until
    ``take()`` makes a RecordBatch of them."""

    def __init__(self, broker_name: str) -> None:
        self.broker_name = broker_name
        self._broker_name = pa.scalar(broker_name, pa.string())
        self._clear()

    def _clear(self) -> None:
        self._at = array("q")  # where each record starts in the bodies joined
        self._bodies: list[bytes] = []  # the pull bodies records were kept from
        self._size = 0  # of those bodies
        self._inflated: dict[int, bytes] = {}  # row -> its body inflated, for bodies stored compressed
        self.nbytes = 0  # of the records, their bodies inflated

    def __len__(self) -> int:
        return len(self._at)

    def add_body(self, buf: bytes, start: int, end: int, tags: frozenset[str] | None) -> tuple[int, int]:
        """Take the records of one pull body whose queue offsets lie in [start, end), keeping only
        ``tags`` (the broker filters by tag hash, which may collide: RocketMQ's client checks the
        tag string too). Returns (records seen, highest queue offset seen or -1)."""
        try:
            return self._add(buf, start, end, tags)
        except (struct.error, IndexError, UnicodeDecodeError, zlib.error) as exc:
            raise RecordError(f"corrupt record in a pull body: {exc}") from None

    def _add(self, buf: bytes, start: int, end: int, tags: frozenset[str] | None) -> tuple[int, int]:
        pos, size, seen, last, nbytes = 0, len(buf), 0, -1, 0
        at, base, kept = self._at, self._size, len(self._at)
        while pos < size:
            if size - pos < MIN_RECORD_SIZE:
                raise RecordError("truncated record header")
            total, magic, queue_offset, sys_flag = _WALK.unpack_from(buf, pos)
            if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD_SIZE or pos + total > size:
                raise RecordError(f"bad record at {pos}: magic {magic:#x}, size {total}")
            seen += 1
            last = queue_offset
            if start <= queue_offset < end:
                if sys_flag & COMPRESSED_FLAG or tags is not None:  # the few that need their body's place
                    head = RECORD_HEADS[sys_flag & HOST_V6_FLAGS]
                    body_at = pos + head.size
                    body_end = body_at + head.unpack_from(buf, pos)[-1]
                    if tags is not None and _record_tags(buf, body_end) not in tags:
                        pos += total
                        continue
                    if sys_flag & COMPRESSED_FLAG and body_end > body_at:
                        inflated = self._inflated[len(at)] = zlib.decompress(buf[body_at:body_end])
                        nbytes += len(inflated) - (body_end - body_at)
                at.append(base + pos)
                nbytes += total
            pos += total
        if len(at) > kept:
            self._bodies.append(buf)
            self._size += size
        self.nbytes += nbytes
        return seen, last

    def take(self) -> pa.RecordBatch:
        """The rows kept so far, as a batch of ARROW_SCHEMA; RecordError for a record whose parts
        do not add up to its size or whose text is not UTF-8."""
        try:
            return self._take()
        except (pa.ArrowInvalid, pa.ArrowIndexError) as exc:
            raise RecordError(f"corrupt record in a pull body: {exc}") from None
        finally:
            self._clear()

    def _take(self) -> pa.RecordBatch:
        n = len(self._at)
        if not n:
            return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
        joined = b"".join(self._bodies)
        at = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self._at)])
        # The head's first run (the walk checked that every record holds it), then the others
        # where the host flags put them, once the record is known to hold them.
        runs = [_gather(_cut(joined, [at, pc.add(at, _int64(_RUN_SPANS[0][1]))]), 2, 1, n)]
        head = _Head(runs)
        total, sys_flag = head.column("total_size").cast(pa.int64()), head.column("sys_flag")
        flags = pc.bit_wise_and(sys_flag, _HOST_FLAGS)
        body_at = pc.add(at, pc.take(_BODY_AT, flags))
        record_end = pc.add(at, total)
        _require(pc.less_equal(pc.add(body_at, _3), record_end), "record size does not fit its head")
        ends = []
        for run_at, (start, end) in zip(_RUN_AT, _RUN_SPANS[1:], strict=True):
            run_start = pc.add(at, pc.take(run_at, flags))
            ends += [run_start, pc.add(run_start, _int64(end - start))]
        parts = _cut(joined, ends)  # each run after a host, at parts 1 and 3 of 4
        runs += [_gather(parts, 4, 1, n), _gather(parts, 4, 3, n)]
        body_len = head.column("body_length").cast(pa.int64())
        # After the body: the topic's length byte and topic, the properties' length and properties,
        # which end where the record does (each length read once it is known to lie in the record).
        topic_len_at = pc.add(body_at, body_len)
        _require(pc.and_(pc.greater_equal(body_len, _0), pc.less_equal(pc.add(topic_len_at, _3), record_end)),
                 "body length does not fit")
        data = pa.Array.from_buffers(pa.uint8(), len(joined), [None, pa.py_buffer(joined)])
        topic_at = pc.add(topic_len_at, _1)
        props_len_at = pc.add(topic_at, pc.take(data, topic_len_at).cast(pa.int64()))
        _require(pc.less_equal(pc.add(props_len_at, _2), record_end), "topic length does not fit")
        props_len = pc.add(pc.multiply(pc.take(data, props_len_at).cast(pa.int64()), _256),
                           pc.take(data, pc.add(props_len_at, _1)).cast(pa.int64()))
        props_len = pc.if_else(pc.less(props_len, _SHORT_SIGN), props_len, _0)  # a negative length: none
        props_at = pc.add(props_len_at, _2)
        _require(pc.equal(pc.add(props_at, props_len), record_end), "record size does not match its fields")
        parts = _cut(joined, [body_at, topic_len_at, topic_at, props_len_at, props_at, record_end])
        topic = pc.take(parts, _every(6, 3, n)).cast(pa.string())
        props = properties_column(pc.take(parts, _every(6, 5, n)).cast(pa.string()))
        body = pc.take(parts, _every(6, 1, n)).cast(pa.binary())
        if self._inflated:
            rows = sorted(self._inflated)
            body = pc.replace_with_mask(body, pa.array([row in self._inflated for row in range(n)], pa.bool_()),
                                        pa.array([self._inflated[row] for row in rows], pa.binary()))
        msg_id = pc.map_lookup(props, _UNIQ, "last")
        if msg_id.null_count:  # no UNIQ_KEY (a message from an old client): the offset msgId
            missing = pc.is_null(msg_id)
            msg_id = pc.replace_with_mask(msg_id, missing, pa.array(
                [_offset_msg_id(joined, self._at[row], sys_flag[row].as_py())
                 for row in pc.indices_nonzero(missing).to_pylist()], pa.string()))
        arrays: list[Any] = [
            topic, head.column("queue_id"), pa.repeat(self._broker_name, n),
            head.column("queue_offset"), msg_id, body,
            pc.map_lookup(props, _TAGS, "last"), pc.map_lookup(props, _KEYS, "last"), props,
            _timestamps(head.column("born_timestamp")), _timestamps(head.column("store_timestamp")),
            head.column("reconsume_times"),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


class _Head:
    """The heads of a batch's records as their three runs, each gathered into one buffer of
    equal-sized rows; a field is read from its run, big-endian, for every row at once."""

    def __init__(self, runs: list[memoryview]) -> None:
        self.runs = runs

    def column(self, name: str) -> pa.Array:
        """Field ``name`` of every row (int32 or int64, as declared): the run's rows as an array of
        that width, read every so many items, then swapped into this machine's byte order."""
        code: Literal["i", "q"] = "q" if _FIELD_CODES[name] == "q" else "i"
        run, at = _run_of(name)
        block, (start, end) = self.runs[run], _RUN_SPANS[run]
        stride, size = end - start, struct.calcsize(code)
        rows = len(block) // stride
        values = array(code, bytes(size * rows))
        if rows:
            memoryview(values)[:] = block[at:at + stride * (rows - 1) + size].cast(code)[::stride // size]
        if _LITTLE_ENDIAN:
            values.byteswap()
        return pa.Array.from_buffers(pa.int64() if code == "q" else pa.int32(), rows, [None, pa.py_buffer(values)])


def _gather(parts: pa.BinaryArray, width: int, part: int, rows: int) -> memoryview:
    """Part ``part`` of each of ``rows`` rows of ``width`` parts, gathered into one buffer."""
    taken = pc.take(parts, _every(width, part, rows))
    offsets = memoryview(taken.buffers()[1]).cast("q" if taken.type == pa.large_binary() else "i")
    return memoryview(taken.buffers()[2]).cast("B")[offsets[taken.offset]:offsets[taken.offset + rows]]


def _record_tags(buf: bytes, p: int) -> str | None:
    """The TAGS property of the record whose body ends at ``p`` (for a tag-filtered read)."""
    p += 1 + buf[p]
    (props_len,) = _I16.unpack_from(buf, p)
    return string_to_properties(buf[p + 2:p + 2 + props_len].decode() if props_len > 0 else "").get(MessageConst.TAGS)


def _offset_msg_id(joined: bytes, at: int, sys_flag: int) -> str:
    """The offset msgId (create_offset_msg_id's) of the record at ``at``: its store host and
    commit-log offset as they are stored."""
    host_at, host_end = _STORE_HOST[sys_flag & HOST_V6_FLAGS]
    offset_at = at + _PHYSICAL_OFFSET_AT
    return (joined[at + host_at:at + host_end] + joined[offset_at:offset_at + 8]).hex().upper()


def _require(condition: pa.BooleanArray, what: str) -> None:
    if condition.false_count:
        raise RecordError(f"corrupt record in a pull body: {what}")


def _cut(joined: bytes | pa.Buffer, ends: list[pa.Array], text: bool = False) -> pa.Array:
    """``joined`` as a binary array cut at ``ends`` row by row: part j of row k, at
    k * len(ends) + j, runs from row k's end j - 1 (for j = 0: row k - 1's last end, or the start)
    to its end j. The ends only grow: they lie in records that follow one another. With ``text``
    the parts are strings, unchecked: for UTF-8 text cut at ASCII characters only."""
    width, rows = len(ends), len(ends[0])
    typecode: Literal["i", "q"]
    if len(joined) < 1 << 31:
        typecode, arrow_type, offset_type = "i", pa.string() if text else pa.binary(), pa.int32()
    else:
        typecode, arrow_type, offset_type = "q", pa.large_string() if text else pa.large_binary(), pa.int64()
    offsets = array(typecode, bytes(struct.calcsize(typecode) * (width * rows + 1)))
    into = memoryview(offsets)
    for j, column in enumerate(ends):
        column = column.cast(offset_type)
        into[1 + j::width] = memoryview(column.buffers()[1]).cast(typecode)[column.offset:column.offset + rows]
    return pa.Array.from_buffers(arrow_type, width * rows, [None, pa.py_buffer(offsets), pa.py_buffer(joined)])


def _every(step: int, first: int, rows: int) -> pa.Int64Array:
    """The indices first, first + step, ... of ``rows`` rows of ``step`` parts."""
    return pc.subtract(pc.cumulative_sum(pa.repeat(_int64(step), rows)), _int64(step - first))


def _timestamps(millis: pa.Int64Array) -> pa.Array:
    """Milliseconds since the epoch as Spark's timestamps (microseconds, UTC)."""
    return pc.multiply_checked(millis, _1000).cast(_TS)


def properties_column(texts: pa.StringArray) -> pa.MapArray:
    """The map column of records' properties texts, by ``string_to_properties``' rules: entries
    split at PROPERTY_SEPARATOR, each a name and a value split at the first NAME_VALUE_SEPARATOR,
    an entry without both (or an empty one) skipped.

    Entries are split once; each is then cut where its first NAME_VALUE_SEPARATOR is (one search
    per entry) rather than split again into lists: the second split, the filter of its lists and
    the gather of their pieces cost more than every other step here together."""
    entries = pc.split_pattern(texts, PROPERTY_SEPARATOR)
    flat = entries.values  # every entry, their texts one after another
    if len(flat) == 0:
        return pa.MapArray.from_arrays(pa.repeat(_I32_0, len(texts) + 1), pa.array([], pa.string()),
                                       pa.array([], pa.string()))
    sep_at = pc.find_substring(flat, NAME_VALUE_SEPARATOR).cast(pa.int64())  # in bytes; -1 for none
    lengths = pc.binary_length(flat).cast(pa.int64())
    # An entry is kept with a name (the separator past its start) and a value (not at its end).
    kept = pc.and_(pc.greater(sep_at, _0), pc.less(pc.add(sep_at, _1), lengths))
    offsets = pa.Array.from_buffers(pa.int32(), len(flat) + 1, [None, flat.buffers()[1]], offset=flat.offset)
    first = offsets[0].as_py()
    data = flat.buffers()[2].slice(first, offsets[-1].as_py() - first)
    starts = pc.subtract(offsets.slice(0, len(flat)).cast(pa.int64()), _int64(first))
    name_end = pc.add(starts, sep_at)  # each entry as its name, the separator and its value
    parts = _cut(data, [name_end, pc.add(name_end, _1), pc.add(starts, lengths)], text=True)
    if kept.false_count:
        taken = pc.multiply(pc.indices_nonzero(kept), _3)
        names, values = pc.take(parts, taken), pc.take(parts, pc.add(taken, _2))
    else:
        names, values = pc.take(parts, _every(3, 0, len(flat))), pc.take(parts, _every(3, 2, len(flat)))
    # Where each row's kept entries end: the running count of kept entries at each row's end.
    counts = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(kept.cast(pa.int32()))])
    ends = pc.take(counts, entries.offsets)
    if len(names) > 1:
        # A name twice in one row? (row, name) pairs as integers: strictly increasing, as they are
        # when every row names its properties in the same order, they are distinct; otherwise
        # they are counted.
        rows = pc.list_parent_indices(entries).filter(kept).cast(pa.int64())
        codes = pc.dictionary_encode(names)
        pairs_of = pc.add(pc.multiply(rows, _int64(len(codes.dictionary))), codes.indices.cast(pa.int64()))
        rising = pc.less(pairs_of.slice(0, len(pairs_of) - 1), pairs_of.slice(1))
        if rising.false_count and len(pc.unique(pairs_of)) != len(pairs_of):
            return _properties_by_row(texts)
    return pa.MapArray.from_arrays(ends, names, values)


def _properties_by_row(texts: pa.StringArray) -> pa.MapArray:
    """The map column through ``string_to_properties``, a row at a time: the plain path, for
    properties that name something twice (the last value wins, as in a dict)."""
    dicts = [string_to_properties(t) for t in texts.to_pylist()]
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

