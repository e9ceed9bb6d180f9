"""The SEND_BATCH_MESSAGE body walked into the CommitLog's records (docs/store-formats.md#batch-body).

Each entry is laid out as a record's first fields: total size, magic code, body CRC, flag and body
length (five big-endian int32), the body, a properties length (int16) and the properties. A batch
is most of a broker's per-message work, so one walk checks the structure and builds the records
the store writes (as Java's batch encoder does): each entry's record head packed and its parts
appended as the entry is read, with the store's checks of it, no entry made for a second loop. The
walk is a hot module (docs/hot-modules.md) in two spellings: ``walk_by_struct``, the plain one,
reads each entry's integers with one Struct call each, the fastest an interpreter can;
``walk_by_bytes`` reads them a byte at a time, which mypyc compiles to array reads (a third of the
walk's time) and an interpreter runs at half the speed. ``split_batch_merged`` is whichever suits
the build that runs; tests/unit/test_batch_body.py pins the two to each other, and to the store's
records built from the entries one by one (CommitLog._build_batch).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, NamedTuple

from rocketmq_py.common.build import compiled
from rocketmq_py.remoting.protocol.message import MESSAGE_MAGIC_CODE, RecordError, crc32

# An entry as the store takes it (MessageExtBatch.entries): flag, body (a view into the batch
# body: a batch's records are built from it without a copy), properties as stored, tag hash.
StoredEntry = tuple[int, bytes | memoryview, bytes, int]


class Maker(NamedTuple):
    """What a batch's records are built with (CommitLog.batch_maker, for where they go now). The
    walks unpack it whole, positionally, in their order: one unpack rather than a field read each."""

    pack: Callable[..., bytes]  # the record head's pack
    shared: bytes  # the fields every record shares, packed
    queue_id: int
    offset: int  # the first record's physical offset
    queue_offset: int  # the first record's queue offset
    step: int  # the queue offset's step from one record to the next: 0 or 1
    topic: bytes  # the topic field: its length byte and name
    fixed: int  # a record's size less its body, topic field and properties
    max_body: int  # the largest body
    indexed: bytes  # the part of the names the index reads
    store_ts: int  # the store timestamp packed in ``shared``
    refusal: int  # the first refusal already found (below; 0: none)


# A batch's records: their parts (four each: head, body, topic field with the properties' length,
# properties), their ConsumeQueue units' fields one after another (offset, size, tag hash), their
# size, whether no entry's properties name a key the index reads, and the first refusal of the
# store's (below; 0: none; nothing is stored then).
Built = tuple[list[bytes | memoryview], list[int], int, bool, int]
# The store's refusals, the first of which a walk reports: a body over the largest (or a topic too
# long), properties holding NUL, properties over MAX_PROPERTIES_LENGTH, a field the record cannot hold.
REFUSED_SIZE, REFUSED_NUL, REFUSED_PROPERTIES_SIZE, REFUSED_FIELD = 1, 2, 3, 4
MAX_PROPERTIES_LENGTH: Final = 32767  # a record's properties length is an int16
# What the caller makes of an entry's properties as sent: the properties as stored and the tags' hash.
# The walk assumes one thing of it: properties holding one UNIQ_KEY of ASCII letters and digits, merged
# into themselves followed by a suffix, get the same suffix and hash whatever that value (``_merged``).
Merge = Callable[[bytes], tuple[bytes, int]]

# An entry's total size, flag and body length: its magic code and body CRC are skipped (``x``), not
# made into ints nothing reads (the store computes the CRC of what it stores). ``walk_by_struct``
# reads it with the properties' length after an empty body (``2x``), so that the read itself
# refuses an entry of fewer than its fixed bytes (struct.error) and the walk computes no length left.
_ENTRY_HEAD = struct.Struct(">i8xii")
_ENTRY_HEAD_FIXED = struct.Struct(">i8xii2x")
_I16 = struct.Struct(">h")
# ``walk_by_struct``'s readers of an entry's properties length and properties in one call, by the
# length they expect (the entry before's: a batch's entries mostly have properties of one length);
# made once per length, the cache forgotten past _PROPS_READERS_KEPT lengths. A walk stops guessing
# after _PROPS_GUESSES wrong guesses, each a read wasted.
PropsReader = Callable[[bytes, int], tuple[int, bytes]]
_PROPS_READERS: dict[int, PropsReader] = {}
_PROPS_READERS_KEPT = 256
_PROPS_GUESSES = 3
# The fixed bytes of an entry: its five int32 and the properties length.
_ENTRY_FIXED = 22
# An entry's own message id, as its name and separator (MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX).
# Final: compiled, a constant rather than a dictionary lookup at each use.
_UNIQ_KEY: Final = b"UNIQ_KEY\x01"
_PAIR_SEPARATOR: Final = b"\x02"  # PROPERTY_SEPARATOR
_PAIR_END: Final = 2  # the same, as a byte of the properties


# Properties like merged ones but for their UNIQ_KEY's value, as ``_merged`` found them: their
# length, what precedes the value (ending with the UNIQ_KEY's name), what follows it, what merging
# appended and the tags' hash. A walk checks each entry against the last such properties before
# anything else, at the cost of a comparison of lengths when none were found.
Like = tuple[int, bytes, bytes, bytes, int]
_NOT_LIKE: Final[Like] = (-1, b"", b"", b"", 0)


def _merged(props: bytes, merge: Merge, merged: dict[bytes, tuple[bytes, int]],
            keyed: dict[bytes, tuple[bytes, int]]) -> tuple[tuple[bytes, int], Like | None]:
    """``merge(props)``, or what it gives once more when the properties differ from merged ones
    only by their UNIQ_KEY's value; ``merged`` and ``keyed`` remember for the rest of the walk.
    With it, the properties' ``Like`` when they may be looked up without their value.

    Producers (the SDK's, Java's) give each entry of a batch its own UNIQ_KEY, so an entry's
    properties are never another's and each would be merged anew, though merging reads only the
    other names. Properties holding one UNIQ_KEY whose value is ASCII letters and digits (a
    producer's id is hexadecimal) are therefore looked up without that value, in ``keyed``: what merging
    appended to the first such properties is appended again. Anything else, or a merge that did
    not append (``merge`` refusing, or rewriting the properties), is merged on its own, as
    before. tests/unit/test_send_batch.py pins this to merging every entry on its own."""
    head, name, tail = props.partition(_UNIQ_KEY)
    rest = None  # the properties without the UNIQ_KEY's value, when they may be looked up so
    after = b""  # what follows the value
    if name and (not head or head[-1] == _PAIR_END):
        if tail.isalnum():  # the last property, as the SDK sends it
            rest = head + name
        else:
            # find, not in: a bytes object's `in` first tries its operand as an int, and fails at a cost.
            value, sep, after = tail.partition(_PAIR_SEPARATOR)
            if value.isalnum() and after.find(_UNIQ_KEY) < 0:
                after = sep + after
                rest = head + name + after
    if rest is not None:
        known = keyed.get(rest)
        if known is None:
            stored = merge(props)
            if not stored[0].startswith(props):
                return stored, None
            known = keyed[rest] = stored[0][len(props):], stored[1]
        else:
            stored = props + known[0], known[1]
        return stored, (len(props), head + name, after, known[0], known[1])
    stored = merged[props] = merge(props)
    return stored, None


# A ``Like`` as a walk keeps it: with where the value starts and ends, the topic field and the size
# less its body of the properties as stored.
LikeFound = tuple[int, bytes, bytes, bytes, int, int, int, bytes, int]
# What ``_stored`` gives: the properties as stored, their tags' hash, topic field (with their length)
# and a record's size less its body; the walk's first refusal, whether an entry's properties hold a
# key the index reads and the merge's first error, each as it stands after these properties; and
# their ``LikeFound``, if any.
Stored = tuple[bytes, int, bytes, int, int, bool, RecordError | None, LikeFound | None]


def _stored(props: bytes, merge: Merge, merged: dict[bytes, tuple[bytes, int]], keyed: dict[bytes, tuple[bytes, int]],
            topic: bytes, topic_lens: dict[int, bytes], fixed: int, indexed: bytes, refusal: int, has_key: bool,
            refused: RecordError | None) -> Stored:
    """An entry's ``props`` as stored and checked, for both walks: merged (``_merged``) unless
    already in ``merged``, a refused merge's error kept as the walk's first and the properties
    stored as sent; their NUL bytes and length checked into the walk's first ``refusal``; their
    topic field made once per length (``topic_lens``). A walk calls it once per distinct
    properties, not for properties like the last ``LikeFound`` (each entry's own UNIQ_KEY): one
    call per batch of bench/broker_send.py's bodies, shared or keyed."""
    stored, fresh = merged.get(props), None
    if stored is None:
        try:
            stored, fresh = _merged(props, merge, merged, keyed)
        except RecordError as exc:
            refused = refused or exc
            stored = merged[props] = props, 0
    stored_props, code = stored
    if stored_props.find(b"\0") >= 0 and not refusal:
        refusal = REFUSED_NUL
    stored_len = len(stored_props)
    cached = topic_lens.get(stored_len)
    if cached is None:
        if stored_len > MAX_PROPERTIES_LENGTH:
            refusal = refusal or REFUSED_PROPERTIES_SIZE
            cached = topic + bytes(2)
        else:
            cached = topic_lens[stored_len] = topic + _I16.pack(stored_len)
    sized = fixed + len(cached) + stored_len
    has_key = has_key or stored_props.find(indexed) >= 0
    found: LikeFound | None = None
    if fresh is not None:
        like_len, like_head, like_tail, like_suffix, like_code = fresh
        found = (like_len, like_head, like_tail, like_suffix, like_code, len(like_head), like_len - len(like_tail),
                 cached, sized)
    return stored_props, code, cached, sized, refusal, has_key, refused, found


# split_batch's records: a head holding the entry's flag where a record's is (after four int32), the
# rest of it anything (the offsets and shared fields of a maker of nothing).
_SPLIT_HEAD = struct.Struct(">5i2q0si")
_FLAG_AT = 16
_I32 = struct.Struct(">i")
_SPLIT_MAKER: Final = Maker(_SPLIT_HEAD.pack, b"", 0, 0, 0, 0, b"", 0, 0x7FFFFFFF, b"", 0, 0)


def split_batch(body: bytes) -> list[tuple[int, bytes | memoryview, bytes]]:
    """``(flag, body, raw properties)`` of each entry of a batch body, its structure checked."""
    (parts, _, _, _, _), _ = split_batch_merged(body, _as_sent, _SPLIT_MAKER)
    return [(_I32.unpack_from(parts[at], _FLAG_AT)[0], parts[at + 1], bytes(parts[at + 3]))
            for at in range(0, len(parts), 4)]


def _as_sent(props: bytes) -> tuple[bytes, int]:
    return props, 0


def _props_reader(length: int) -> PropsReader:
    """A reader of the properties length at a place and the ``length`` bytes after it."""
    reader = _PROPS_READERS.get(length)
    if reader is None:
        if len(_PROPS_READERS) >= _PROPS_READERS_KEPT:
            _PROPS_READERS.clear()
        reader = _PROPS_READERS[length] = struct.Struct(f">h{length}s").unpack_from
    return reader


def walk_by_struct(body: bytes, merge: Merge, maker: Maker, keyed: dict[bytes, tuple[bytes, int]] | None = None
                   ) -> tuple[Built, RecordError | None]:
    """The records of a batch body's entries, built with ``maker`` (Maker) and each entry's
    properties as ``merge`` makes them, the body's structure checked (RecordError), with the
    first RecordError ``merge`` raised, if any.

    ``merge`` is called once per distinct properties (entries mostly repeat a few: the same
    tags), or once per properties that differ only by their UNIQ_KEY's value (``_merged``), and
    its error is returned, not raised, so the caller can answer a malformed structure
    anywhere in the body before it; the entry it refused keeps its properties as sent. The
    store's checks of a record (its body's size, its properties' NUL bytes and length, each
    distinct properties checked once) give the first refusal in the records, after the whole
    body is walked, so that a broken structure is the answer wherever it is. One loop reads an
    entry and builds its record: entries made for a second loop to build from cost that loop,
    their tuples and the checks again (a whole broker under bench/broker_send.py's batches, about
    27,000 instructions per batch of 32, docs/hot-modules.md). ``keyed``, when given, is what
    earlier walks with the same ``merge`` found of properties differing only by their UNIQ_KEY's
    value (``_merged``), and is added to."""
    pack, shared, queue_id, offset, queue_offset, step, topic, fixed, max_body, indexed, _, refusal = maker
    checksum, magic = crc32, MESSAGE_MAGIC_CODE
    parts: list[bytes | memoryview] = []
    fields: list[int] = []
    base = offset
    topic_lens: dict[int, bytes] = {}  # the topic field by the properties' length
    has_key = False
    merged: dict[bytes, tuple[bytes, int]] = {}
    if keyed is None:
        keyed = {}
    refused: RecordError | None = None
    like_len, like_head, like_tail, like_suffix, like_code = _NOT_LIKE
    like_at = like_end = like_sized = 0
    like_topic = b""
    # The properties of the entry before, as sent and as stored, its tag hash, topic field and size
    # less its body.
    last, last_props, last_code, topic_len, sized = None, b"", 0, b"", 0
    fresh: LikeFound | None
    unpack_head, unpack_len = _ENTRY_HEAD_FIXED.unpack_from, _I16.unpack_from
    # The properties length expected (the entry before's) and its reader, while guessing.
    guess, read_props, wrong = -2, None, 0  # -2: never a length read, nor the -1 of none read
    props_len: int
    view = memoryview(body)
    pos, end = 0, len(body)
    # Each sum below is an int object made and freed (200 instructions): an entry's places are
    # each computed once, and the entry's fixed bytes are checked by its head's read. Its
    # properties length and properties are read in one call when their length is the one
    # expected, rather than their length read and the properties sliced.
    while pos < end:
        try:
            total, flag, body_len = unpack_head(body, pos)
        except struct.error:
            raise RecordError("truncated batch entry") from None
        start = pos + 20  # the body's
        p = start + body_len  # where the properties' length is
        at = p + 2  # the properties'
        if body_len < 0 or at > end:
            raise RecordError("batch entry body length does not fit")
        if read_props is not None:
            try:
                props_len, props = read_props(body, p)
            except struct.error:  # fewer bytes left than expected
                props_len = -1
        else:
            props_len = -1
        if props_len == guess:  # read whole: within the body, not below 0
            q = at + props_len  # the entry's end
            if pos + total != q:
                raise RecordError("batch entry size does not match its lengths")
        else:
            (props_len,) = unpack_len(body, p)
            q = at + props_len
            if props_len < 0 or pos + total != q or q > end:
                raise RecordError("batch entry size does not match its lengths")
            props = body[at:q]
            if wrong < _PROPS_GUESSES:
                wrong += 1
                guess, read_props = props_len, _props_reader(props_len)
            else:
                read_props = None
        if body_len > max_body and not refusal:
            refusal = REFUSED_SIZE
        if props_len == like_len and props.startswith(like_head) and props.endswith(like_tail) \
                and props[like_at:like_end].isalnum():
            # Stored as the like properties, checked with them: the same length, and NUL nowhere
            # but where they hold it (the value is letters and digits); their UNIQ_KEY a key.
            props += like_suffix
            topic_field = like_topic
            code = like_code
            size = like_sized + body_len
        else:
            if props != last:  # not the previous entry's (a batch of one tag: compared, not hashed and looked up)
                last = props
                last_props, last_code, topic_len, sized, refusal, has_key, refused, fresh = _stored(
                    props, merge, merged, keyed, topic, topic_lens, fixed, indexed, refusal, has_key, refused)
                if fresh is not None:
                    like_len, like_head, like_tail, like_suffix, like_code, like_at, like_end, like_topic, like_sized \
                        = fresh
            # One assignment each: four at once make and unpack a tuple.
            props = last_props
            topic_field = topic_len
            code = last_code
            size = sized + body_len
        data = view[start:p]
        try:
            parts.append(pack(size, magic, checksum(data) & 0x7FFFFFFF, queue_id, flag, queue_offset, offset, shared,
                              body_len))
        except struct.error:  # a field the record cannot hold
            refusal = refusal or REFUSED_FIELD
            parts.append(b"")
        parts.append(data)  # one by one: Python 3.11 appends inline by a list's own append, not a bound one
        parts.append(topic_field)
        parts.append(props)
        fields.append(offset)
        fields.append(size)
        fields.append(code)
        offset += size
        queue_offset += step
        pos = q
    return (parts, fields, offset - base, not has_key, refusal), refused


def _int32(body: bytes, at: int) -> int:
    """The big-endian int32 at ``at``."""
    value = body[at] << 24 | body[at + 1] << 16 | body[at + 2] << 8 | body[at + 3]
    return value - 0x100000000 if value & 0x80000000 else value


def walk_by_bytes(body: bytes, merge: Merge, maker: Maker, keyed: dict[bytes, tuple[bytes, int]] | None = None
                  ) -> tuple[Built, RecordError | None]:
    """``walk_by_struct`` with the integers read a byte at a time (the compiled build's)."""
    pack, shared, queue_id, offset, queue_offset, step, topic, fixed, max_body, indexed, _, refusal = maker
    checksum, magic = crc32, MESSAGE_MAGIC_CODE
    parts: list[bytes | memoryview] = []
    fields: list[int] = []
    base = offset
    topic_lens: dict[int, bytes] = {}
    has_key = False
    merged: dict[bytes, tuple[bytes, int]] = {}
    if keyed is None:
        keyed = {}
    refused: RecordError | None = None
    like_len, like_head, like_tail, like_suffix, like_code = _NOT_LIKE
    like_at = like_end = like_sized = 0
    like_topic = b""
    last, last_props, last_code, topic_len, sized = None, b"", 0, b"", 0
    fresh: LikeFound | None
    view = memoryview(body)
    pos, end = 0, len(body)
    while pos < end:
        if end - pos < _ENTRY_FIXED:
            raise RecordError("truncated batch entry")
        total = _int32(body, pos)
        flag = _int32(body, pos + 12)
        body_len = _int32(body, pos + 16)
        p = pos + 20 + body_len  # where the properties' length is
        if body_len < 0 or p + 2 > end:
            raise RecordError("batch entry body length does not fit")
        props_len = body[p] << 8 | body[p + 1]
        if props_len & 0x8000:  # an int16 below 0
            props_len -= 0x10000
        q = p + 2 + props_len  # the entry's end
        if props_len < 0 or pos + total != q or q > end:
            raise RecordError("batch entry size does not match its lengths")
        props = body[p + 2:q]
        if body_len > max_body and not refusal:
            refusal = REFUSED_SIZE
        if props_len == like_len and props.startswith(like_head) and props.endswith(like_tail) \
                and props[like_at:like_end].isalnum():
            props += like_suffix
            topic_field = like_topic
            code = like_code
            size = like_sized + body_len
        else:
            if props != last:  # not the previous entry's (a batch of one tag: compared, not hashed and looked up)
                last = props
                last_props, last_code, topic_len, sized, refusal, has_key, refused, fresh = _stored(
                    props, merge, merged, keyed, topic, topic_lens, fixed, indexed, refusal, has_key, refused)
                if fresh is not None:
                    like_len, like_head, like_tail, like_suffix, like_code, like_at, like_end, like_topic, like_sized \
                        = fresh
            # One assignment each: four at once make and unpack a tuple.
            props = last_props
            topic_field = topic_len
            code = last_code
            size = sized + body_len
        data = view[pos + 20:p]
        try:
            parts.append(pack(size, magic, checksum(data) & 0x7FFFFFFF, queue_id, flag, queue_offset, offset,
                              shared, body_len))
        except struct.error:  # a field the record cannot hold
            refusal = refusal or REFUSED_FIELD
            parts.append(b"")
        parts.append(data)
        parts.append(topic_field)
        parts.append(props)
        fields.append(offset)
        fields.append(size)
        fields.append(code)
        offset += size
        queue_offset += step
        pos = q
    return (parts, fields, offset - base, not has_key, refusal), refused


# The walk the running build does fastest (the module's docstring).
split_batch_merged = walk_by_bytes if compiled() else walk_by_struct
