"""The SEND_BATCH_MESSAGE body walked into its entries (docs/store-formats.md#batch-body).

Each entry is laid out as a record's first fields: total size, magic code, body CRC, flag and body
length (five big-endian int32), the body, a properties length (int16) and the properties. A batch
is most of a broker's per-message work, so one walk checks the structure and builds what the store
takes, and the walk is a hot module (docs/hot-modules.md) in two spellings: ``walk_by_struct``,
the plain one, reads each entry's integers with one Struct call each, the fastest an interpreter
can; ``walk_by_bytes`` reads them a byte at a time, which mypyc compiles to array reads (a third of
the walk's time) and an interpreter runs at half the speed. ``split_batch_merged`` is whichever
suits the build that runs; tests/unit/test_batch_body.py pins the two to each other.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from rocketmq_py.common.build import compiled
from rocketmq_py.remoting.protocol.message import RecordError

# An entry as the store takes it (MessageExtBatch.entries): flag, body (a view into the batch
# body: a batch's records are built from it without a copy), properties as stored, tag hash.
StoredEntry = tuple[int, bytes | memoryview, bytes, int]
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


def split_batch(body: bytes) -> list[tuple[int, bytes | memoryview, bytes]]:
    """``(flag, body, raw properties)`` of each entry of a batch body, its structure checked."""
    entries, _ = split_batch_merged(body, _as_sent)
    return [(flag, data, props) for flag, data, props, _ in entries]


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


def walk_by_struct(body: bytes, merge: Merge, keyed: dict[bytes, tuple[bytes, int]] | None = None
                   ) -> tuple[list[StoredEntry], RecordError | None]:
    """Each entry of a batch body as ``(flag, body, *merge(raw properties))``, its structure
    checked (RecordError), with the first RecordError ``merge`` raised, if any.

    ``merge`` is called once per distinct properties (entries mostly repeat a few: the same
    tags), or once per properties that differ only by their UNIQ_KEY's value (``_merged``), and
    its error is returned, not raised, so the caller can answer a malformed structure
    anywhere in the body before it; the entry it refused keeps its properties as sent. One walk
    builds the store's entries: a list of split entries merged by a second pass cost a third as
    much again as the split. ``keyed``, when given, is what earlier walks with the same ``merge``
    found of properties differing only by their UNIQ_KEY's value (``_merged``), and is added to."""
    entries: list[StoredEntry] = []
    merged: dict[bytes, tuple[bytes, int]] = {}
    if keyed is None:
        keyed = {}
    refused: RecordError | None = None
    like_len, like_head, like_tail, like_suffix, like_code = _NOT_LIKE
    like_at = like_end = 0
    last, last_props, last_code = None, b"", 0  # the properties of the entry before, as sent and as stored
    stored: tuple[bytes, int] | None
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
        if props_len == like_len and props.startswith(like_head) and props.endswith(like_tail) \
                and props[like_at:like_end].isalnum():
            entries.append((flag, view[start:p], props + like_suffix, like_code))
            pos = q
            continue
        if props != last:  # not the previous entry's (a batch of one tag: compared, not hashed and looked up)
            stored = merged.get(props)
            if stored is None:
                try:
                    stored, like = _merged(props, merge, merged, keyed)
                except RecordError as exc:
                    refused = refused or exc
                    stored = merged[props] = props, 0
                else:
                    if like is not None:
                        like_len, like_head, like_tail, like_suffix, like_code = like
                        like_at, like_end = len(like_head), like_len - len(like_tail)
            last = props
            last_props, last_code = stored
        entries.append((flag, view[start:p], last_props, last_code))
        pos = q
    return entries, refused


def _int32(body: bytes, at: int) -> int:
    """The big-endian int32 at ``at``."""
    value = body[at] << 24 | body[at + 1] << 16 | body[at + 2] << 8 | body[at + 3]
    return value - 0x100000000 if value & 0x80000000 else value


def walk_by_bytes(body: bytes, merge: Merge, keyed: dict[bytes, tuple[bytes, int]] | None = None
                  ) -> tuple[list[StoredEntry], RecordError | None]:
    """``walk_by_struct`` with the integers read a byte at a time (the compiled build's)."""
    entries: list[StoredEntry] = []
    merged: dict[bytes, tuple[bytes, int]] = {}
    if keyed is None:
        keyed = {}
    refused: RecordError | None = None
    like_len, like_head, like_tail, like_suffix, like_code = _NOT_LIKE
    like_at = like_end = 0
    last, last_props, last_code = None, b"", 0  # the properties of the entry before, as sent and as stored
    stored: tuple[bytes, int] | None
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
        if props_len == like_len and props.startswith(like_head) and props.endswith(like_tail) \
                and props[like_at:like_end].isalnum():
            entries.append((flag, view[pos + 20:p], props + like_suffix, like_code))
            pos = q
            continue
        if props != last:  # not the previous entry's (a batch of one tag: compared, not hashed and looked up)
            stored = merged.get(props)
            if stored is None:
                try:
                    stored, like = _merged(props, merge, merged, keyed)
                except RecordError as exc:
                    refused = refused or exc
                    stored = merged[props] = props, 0
                else:
                    if like is not None:
                        like_len, like_head, like_tail, like_suffix, like_code = like
                        like_at, like_end = len(like_head), like_len - len(like_tail)
            last = props
            last_props, last_code = stored
        entries.append((flag, view[pos + 20:p], last_props, last_code))
        pos = q
    return entries, refused


# The walk the running build does fastest (the module's docstring).
split_batch_merged = walk_by_bytes if compiled() else walk_by_struct
