"""IndexFile and IndexService: message keys -> CommitLog offsets (docs/store-formats.md#indexfile).

A hash table on mmap: a 40-byte header, ``maxHashSlotNum`` int32 slots holding the newest entry
of each chain, then ``maxIndexNum`` 20-byte entries linked to the previous one in their slot.
Only hashes are stored, so callers re-check keys on the messages they read.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import sys
import time
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass

from rocketmq_py.remoting.protocol.message import (
    _HI31,
    _LO31,
    MessageConst,
    find_raw_property,
    java_string_hash,
    raw_property_prefix,
)
from rocketmq_py.store.mapped_file import reserve_blocks

log = logging.getLogger("rocketmq.store")

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_ENTRY_KEY = struct.Struct(">iq")  # an entry's key hash and message offset
_SLOT = struct.Struct(">i")
_MAX_TIME_DIFF = 2**31 - 1
_KEY_SEPARATOR = MessageConst.KEY_SEPARATOR.encode()
# Entry blocks reserved ahead of the writer at a time: a 400 MB file costs disk as it fills.
_RESERVE_CHUNK = 4 * 1024 * 1024
_KEYS = raw_property_prefix(MessageConst.KEYS)
_KEYS_NAME = _KEYS[1:]  # the name and its separator, wherever they stand
UNIQ_KEY_PREFIX = raw_property_prefix(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
# A part of both names the index reads (KEYS, UNIQ_KEY): raw properties without it have nothing
# to index, which one search tells (most of a batch's entries carry only tags).
INDEXED_NAMES_PART = b"KEY"


_LITTLE = sys.byteorder == "little"


def _time_diff(ts: int, begin: int) -> int:
    """An entry's seconds after its file's begin timestamp, as Java's putKey bounds them."""
    if begin <= 0:
        return 0
    return min(max((ts - begin) // 1000, 0), _MAX_TIME_DIFF)


def _entries(hashes: list[int], phys: list[int], diffs: list[int], prevs: list[int]) -> array[int]:
    """Entries (key hash, message offset, time diff, previous entry in the slot) as the file holds
    them, built column by column: a run's entries cost no call each. Each entry is five 32-bit
    words, the offset's high and low words among them; every value is non-negative, and arrays
    of unsigned words take each int directly where signed ones parse it as a call's argument."""
    n = len(hashes)
    words = array("I", bytes(n * INDEX_SIZE))
    offsets = array("I", array("Q", phys).tobytes())  # each offset's two words in native order
    high, low = (offsets[1::2], offsets[0::2]) if _LITTLE else (offsets[0::2], offsets[1::2])
    words[0::5] = array("I", hashes)
    words[1::5] = high
    words[2::5] = low
    words[3::5] = array("I", diffs)
    words[4::5] = array("I", prevs)
    if _LITTLE:
        words.byteswap()
    return words


def index_file_name(millis: int) -> str:
    """An IndexFile's name: its creation time, yyyyMMddHHmmssSSS in local time, as Java names it,
    the second and the millisecond from one reading of the clock. Read apart (time.strftime's own
    clock, then time.time's milliseconds), the second lagged the milliseconds by up to a clock tick
    (5.6 ms measured here: strftime reads the coarse clock): a file made in a second's first
    milliseconds took the second before's name, sorted before the file made just before it, and
    a restart resumed the index from that older file's end, indexing the newest records again."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(millis // 1000)) + f"{millis % 1000:03d}"


def _in_log_order(files: list[IndexFile]) -> list[IndexFile]:
    """IndexFiles in the order they were written, read from their headers: by the CommitLog
    offsets they index, then by name (a file made but never written, its header all zeros, comes
    first and holds nothing). Names alone mislead where a store's files were misnamed (see
    index_file_name) or the clock was set back; the last file is where indexing resumes."""
    return sorted(files, key=lambda f: (f.begin_phy_offset, f.end_phy_offset, os.path.basename(f.path)))


def key_hash(key: str) -> int:
    return _abs_hash(java_string_hash(key))


def _abs_hash(h: int) -> int:
    # Java's Math.abs leaves Integer.MIN_VALUE negative; RocketMQ then maps it to 0.
    return 0 if h == -(2**31) else abs(h)


def topic_key_hash(topic: str, key: str) -> int:
    """key_hash(topic + "#" + key): the index stores keys qualified by their topic."""
    return _abs_hash(java_string_hash(f"{topic}#{key}"))


def raw_key_hash(data: bytes) -> int:
    """``key_hash`` of a topic-qualified key given as UTF-8 bytes, as records hold it."""
    return _abs_unsigned(_unsigned_hash(data))


def key_hashes(prefix: bytes, keys: list[bytes]) -> list[int]:
    """``topic_key_hash`` of each non-empty key, given as UTF-8 bytes, with ``prefix`` the
    topic's UTF-8 bytes and ``#``."""
    return [raw_key_hash(prefix + key) for key in keys if key]


def _unsigned_hash(data: bytes) -> int:
    """Java's String.hashCode of UTF-8 bytes, as an unsigned 32-bit int. The ASCII case (nearly
    every key) is hashed without decoding: this is the index builder's largest cost."""
    if data.isascii():
        return (int(data.translate(_HI31) + b"0", 31) + int(data.translate(_LO31), 31)) & 0xFFFFFFFF
    return java_string_hash(data.decode(errors="replace")) & 0xFFFFFFFF


def _abs_unsigned(h: int) -> int:
    """``_abs_hash`` of a hash given as an unsigned 32-bit int."""
    return h if h < 0x80000000 else (0 if h == 0x80000000 else 0x100000000 - h)


# The last bytes of a key hashed on their own by KeyHasher, and the heads it keeps per topic.
_TAIL = 3
_HEADS_KEPT = 4096


class KeyHasher:
    """``raw_key_hash`` of one topic's keys, for the index child. A producer's message ids
    (UNIQ_KEY: its address, process and class loader's hash, then the time since the month began
    and a counter, in hex) share all but their last characters with the ids sent before them. Java's
    hash of the topic, "#" and a key's head is computed once per head and kept; each key then adds
    its last ASCII bytes to it, as the hash's polynomial in 31 allows (String.hashCode over "s" + "t"
    is hash(s) * 31^len(t) + hash(t), modulo 2^32). Other keys are hashed whole."""

    def __init__(self, topic: bytes) -> None:
        self.topic = topic
        self.prefix = topic + b"#"
        self._heads: dict[bytes, int] = {}  # a key's head -> its hash with the prefix, times 31^_TAIL
        self._last_head, self._last_hash = b"", 0  # the head hashed last; b"" is never one (keys are longer)

    def hash(self, key: bytes) -> int:
        if len(key) <= _TAIL or not key.isascii():
            return raw_key_hash(self.prefix + key)
        head = key[:-_TAIL]
        if head == self._last_head:  # a run of one producer's ids (a batch's)
            h = self._last_hash
        else:
            found = self._heads.get(head)
            if found is None:
                if len(self._heads) >= _HEADS_KEPT:
                    self._heads.clear()
                found = self._heads[head] = _unsigned_hash(self.prefix + head) * 31**_TAIL
            h = self._last_hash = found
            self._last_head = head
        return _abs_unsigned((h + key[-3] * 961 + key[-2] * 31 + key[-1]) & 0xFFFFFFFF)


def record_key_hashes(prefix: bytes, props: bytes) -> list[int]:
    """The hashes a record's raw properties index: each of its KEYS, then its UNIQ_KEY. KEYS is
    looked for only when its name occurs: most records (a producer's batches, the SDK's sends
    without keys) hold a UNIQ_KEY alone, hashed without a list of keys to walk."""
    uniq = find_raw_property(props, UNIQ_KEY_PREFIX)
    # find, not in: a bytes object's `in` first tries its operand as an int, and fails at a cost.
    if props.find(_KEYS_NAME) < 0:
        return [raw_key_hash(prefix + uniq)] if uniq else []
    keys = find_raw_property(props, _KEYS)
    each = keys.split(_KEY_SEPARATOR) if keys else []
    if uniq:
        each.append(uniq)
    return key_hashes(prefix, each)


class IndexFile:
    # the header's fields, as reload_header reads them
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int

    def __init__(self, path: str, hash_slot_num: int, index_num: int, readonly: bool = False) -> None:
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.path = path
        self.readonly = readonly
        self.size = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE
        self.entries_pos = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        # Bytes from the start whose blocks are known reserved: the header and slots (written
        # anywhere) when the file is made, the entries as they are appended (_reserve).
        self.reserved = 0
        # Named by creation time, not by offset, so it is mapped here rather than as a MappedFile.
        self.mm = self._map(create=not readonly)
        self.reload_header()
        self._slots: array[int] | None = None
        if self.is_write_full:
            # Only read by queries from now on, which map it for the query: a long history of
            # full files holds no descriptors (each mapping holds one before Python 3.13).
            self.mm.close()

    def _map(self, create: bool = False) -> mmap.mmap:
        """The file mapped; a new one is created with its blocks reserved (reserve_blocks: a page
        the disk cannot back would be a SIGBUS), or not at all."""
        readonly = self.readonly
        fd = os.open(self.path, os.O_RDONLY if readonly else os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != self.size:
                if not create:
                    raise ValueError(f"{self.path} is not (yet) {self.size} bytes")
                try:
                    os.ftruncate(fd, self.size)
                    reserve = min(self.size, self.entries_pos + _RESERVE_CHUNK)
                    reserve_blocks(fd, reserve)
                    self.reserved = reserve
                except OSError:
                    os.remove(self.path)
                    raise
            return mmap.mmap(fd, self.size, access=mmap.ACCESS_READ if readonly else mmap.ACCESS_WRITE)
        finally:
            os.close(fd)

    def reload_header(self) -> None:
        """Read the header from the mapping (for a file another process writes; a full file's
        header is final)."""
        if self.mm.closed:
            return
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = _HEADER.unpack_from(self.mm, 0)
        if self.index_count == 0:
            self.index_count = 1
        if self.readonly and self.is_write_full:
            self.mm.close()

    @property
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def _slot_values(self) -> array[int]:
        """The slot table, mirrored in native ints while this file is written: a lookup per key
        without unpacking. The writer is the only one changing slots, so the copy stays exact.
        Unsigned, as _entries' words: a slot a corrupt file holds negative reads as more than any
        entry count, refused as Java refuses it."""
        if self._slots is None:
            slots = self._slots = array("I", self.mm[INDEX_HEADER_SIZE:self.entries_pos])
            if sys.byteorder == "little":
                slots.byteswap()
        return self._slots

    def put_entries(self, hashes: list[int], phys: list[int], stamps: list[int], start: int = 0) -> int:
        """Add the entries ``start:`` of (key hash, message offset, store time), in order, then the
        header once; returns how many fitted (fewer than given when the file fills up)."""
        count = self.index_count
        n = min(len(hashes) - start, self.index_num - count)
        if n <= 0:
            return 0
        end = self.entries_pos + (count + n) * INDEX_SIZE
        if end > self.reserved:
            self._reserve(end)  # before anything changes: OSError (ENOSPC) leaves the file as it was
        mm = self.mm
        slots = self._slot_values()
        slot_num = self.hash_slot_num
        begin = self.begin_timestamp
        new_slots = 0
        stop = start + n
        # The entries' changing columns, the slots' values as the file holds them (big-endian:
        # each written by a store into a view of the slot table rather than a pack_into call),
        # and the store time last timed (a put's records share theirs).
        diffs: list[int] = []
        prevs: list[int] = []
        stored = array("I", range(count, count + n))
        if _LITTLE:
            stored.byteswap()
        # As Java's putKey, an entry is timed against the file's begin timestamp as it was before
        # it: a new file's first entry against the previous file's end, then the file begins at it.
        first = count <= 1
        if first:
            first_diff = _time_diff(stamps[start], begin)
            self.begin_phy_offset = phys[start]
            begin = stamps[start]
        last_ts, time_diff = -1, 0
        with memoryview(mm) as whole, whole[INDEX_HEADER_SIZE:self.entries_pos].cast("I") as slot_view:
            for h, ts, value in zip(hashes[start:stop], stamps[start:stop], stored, strict=True):
                if ts != last_ts:
                    time_diff = _time_diff(ts, begin)
                    last_ts = ts
                slot = h % slot_num
                prev = slots[slot]
                if prev <= 0 or prev > count:
                    prev = 0
                    new_slots += 1
                diffs.append(time_diff)
                prevs.append(prev)
                slots[slot] = count
                slot_view[slot] = value
                count += 1
        if first:
            diffs[0] = first_diff
        at = self.entries_pos + self.index_count * INDEX_SIZE
        mm[at:at + n * INDEX_SIZE] = _entries(hashes[start:stop], phys[start:stop], diffs, prevs)
        last = stop - 1
        self.begin_timestamp = begin
        self.hash_slot_count += new_slots
        self.index_count = count
        self.end_phy_offset = phys[last]
        self.end_timestamp = stamps[last]
        _HEADER.pack_into(mm, 0, begin, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
                          self.hash_slot_count, count)
        if count >= self.index_num:
            # Final: synced once, then mapped only by the queries that read it.
            self._slots = None
            mm.flush()
            mm.close()
        return n

    def _reserve(self, end: int) -> None:
        target = min(self.size, end + _RESERVE_CHUNK)
        fd = os.open(self.path, os.O_RDWR)
        try:
            reserve_blocks(fd, target - self.reserved, self.reserved)
        finally:
            os.close(fd)
        self.reserved = target

    def select_phy_offset(self, h: int, max_num: int, begin: int, end: int) -> list[int]:
        if not self.mm.closed:
            return self._select(self.mm, h, max_num, begin, end)
        with self._map() as mm:
            return self._select(mm, h, max_num, begin, end)

    def _select(self, mm: mmap.mmap, h: int, max_num: int, begin: int, end: int) -> list[int]:
        (slot_value,) = _SLOT.unpack_from(mm, INDEX_HEADER_SIZE + (h % self.hash_slot_num) * HASH_SLOT_SIZE)
        found: list[int] = []
        seen = 0
        while 0 < slot_value < self.index_count and len(found) < max_num and seen < self.index_num:
            seen += 1
            entry_pos = INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + slot_value * INDEX_SIZE
            entry_hash, phy, time_diff, prev = _ENTRY.unpack_from(mm, entry_pos)
            ts = self.begin_timestamp + time_diff * 1000
            if ts < begin:
                break
            if entry_hash == h and ts <= end:
                found.append(phy)
            if prev <= 0 or prev >= slot_value:
                break
            slot_value = prev
        return found

    def time_matched(self, begin: int, end: int) -> bool:
        return self.begin_timestamp <= end and self.end_timestamp >= begin

    def flush(self) -> None:
        if not self.readonly and not self.mm.closed:
            self.mm.flush()

    def destroy(self) -> None:
        self.mm.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass


@dataclass
class IndexService:
    store_path: str
    hash_slot_num: int
    index_num: int

    def __post_init__(self) -> None:
        self.files: list[IndexFile] = []

    def load(self, last_exit_ok: bool, index_msg_timestamp: int) -> None:
        if not os.path.isdir(self.store_path):
            return
        for name in sorted(os.listdir(self.store_path)):
            f = IndexFile(os.path.join(self.store_path, name), self.hash_slot_num, self.index_num)
            if not last_exit_ok and f.end_timestamp > index_msg_timestamp:
                # Possibly written past what recovery will re-dispatch: rebuilt from the log.
                f.destroy()
                continue
            self.files.append(f)
        self.files = _in_log_order(self.files)

    def refresh(self) -> None:
        """Follow files another process writes: open new ones read-only, forget deleted ones and
        re-read the headers of the rest."""
        names = sorted(os.listdir(self.store_path)) if os.path.isdir(self.store_path) else []
        known = {os.path.basename(f.path): f for f in self.files}
        files = []
        for name in names:
            f = known.pop(name, None)
            if f is None:
                try:
                    f = IndexFile(os.path.join(self.store_path, name), self.hash_slot_num, self.index_num,
                                  readonly=True)
                except (OSError, ValueError):
                    continue  # being created, or deleted since the listing
            else:
                f.reload_header()
            files.append(f)
        for gone in known.values():
            gone.mm.close()
        self.files = _in_log_order(files)

    def _last_file(self) -> IndexFile:
        last = self.files[-1] if self.files else None
        if last is None or last.is_write_full:
            os.makedirs(self.store_path, exist_ok=True)
            name = index_file_name(time.time_ns() // 1_000_000)
            # After every file held whatever the clock says (set back, or the same millisecond),
            # in 17 digits still: the millisecond after the latest name's.
            held = max((os.path.basename(f.path) for f in self.files), default="")
            if name <= held and held[:17].isdigit():
                name = f"{int(held[:17]) + 1:017d}"
            path = os.path.join(self.store_path, name)
            while os.path.exists(path):
                path += "0"
            f = IndexFile(path, self.hash_slot_num, self.index_num)
            if last is not None:
                f.begin_phy_offset, f.begin_timestamp = last.end_phy_offset, last.end_timestamp
                f.end_phy_offset, f.end_timestamp = last.end_phy_offset, last.end_timestamp
            self.files.append(f)
            return f
        return last

    @property
    def max_phy_offset(self) -> int:
        return self.files[-1].end_phy_offset if self.files else 0

    def put_entries(self, hashes: list[int], phys: list[int], stamps: list[int]) -> None:
        """Add (key hash, message offset, store time) entries in offset order, rolling to a new
        file when one fills; what is already indexed (a re-dispatch: recovery's, a restarted
        child's, a retry after a failed file creation) is skipped. Callers hand over a record's
        entries in one call, so only the last record indexed can be partly in: its entries the
        index holds are skipped one for one, the rest put (Java's buildIndex puts that record's
        keys again, found twice after; skipped whole, a record cut by a full file's end would
        lose the keys the next file never got)."""
        files = self.files
        f = files[-1] if files else self._last_file()
        end = f.end_phy_offset
        start = bisect_left(phys, end)
        if start < len(phys) and phys[start] == end:
            hashes, phys, stamps, start = self._not_held(hashes, phys, stamps, start)
        while start < len(hashes):
            start += f.put_entries(hashes, phys, stamps, start)
            if start < len(hashes):
                f = self._last_file()

    def _held_at_end(self) -> Counter[int]:
        """The key hashes of the entries the index holds for the record at its end offset: the
        last file's entries back from its newest, and the files' before it while a file holds
        that record's alone (or nothing yet)."""
        held: Counter[int] = Counter()
        end = self.files[-1].end_phy_offset
        for f in reversed(self.files):
            if f.index_count <= 1:
                continue
            mm = f.mm if not f.mm.closed else f._map()
            try:
                for n in range(f.index_count - 1, 0, -1):
                    h, phy = _ENTRY_KEY.unpack_from(mm, f.entries_pos + n * INDEX_SIZE)
                    if phy != end:
                        return held
                    held[h] += 1
            finally:
                if mm is not f.mm:
                    mm.close()
        return held

    def _not_held(self, hashes: list[int], phys: list[int], stamps: list[int], start: int
                  ) -> tuple[list[int], list[int], list[int], int]:
        """The entries from ``start`` (the first at the index's end offset) less those of that
        record the index already holds, each held entry taking one of equal hash."""
        held = self._held_at_end()
        stop = bisect_right(phys, phys[start], start)
        keep = []
        for i in range(start, stop):
            if held[hashes[i]] > 0:
                held[hashes[i]] -= 1
            else:
                keep.append(i)
        return ([hashes[i] for i in keep] + hashes[stop:], [phys[i] for i in keep] + phys[stop:],
                [stamps[i] for i in keep] + stamps[stop:], 0)

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        found: list[int] = []
        for f in reversed(self.files):
            if len(found) >= max_num:
                break
            if f.time_matched(begin, end):
                found.extend(f.select_phy_offset(topic_key_hash(topic, key), max_num - len(found), begin, end))
            if f.begin_timestamp < begin:
                break
        return found

    def delete_expired(self, phy_min_offset: int) -> None:
        while len(self.files) > 1 and self.files[0].end_phy_offset < phy_min_offset:
            self.files.pop(0).destroy()

    def flush(self) -> None:
        for f in self.files:
            f.flush()

    def destroy(self) -> None:
        for f in self.files:
            f.destroy()
        self.files = []

    def close(self) -> None:
        for f in self.files:
            f.mm.close()
        self.files = []


