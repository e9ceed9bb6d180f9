"""ConsumeQueue: per (topic, queue id), 20-byte units pointing into the CommitLog.

Unit n (the n-th message of the queue) sits at byte n*20 of the queue's byte space:
commitLogOffset int64, size int32, tagsCode int64 (docs/store-formats.md#consumequeue). Consumers address
messages by n, so reading a queue is arithmetic plus one slice of the CommitLog per message.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from collections.abc import Callable, Iterator
from itertools import starmap

from rocketmq_py.store.mapped_file import PAGE_SIZE, MappedFile, MappedFileQueue

log = logging.getLogger("rocketmq.store")

CQ_STORE_UNIT_SIZE = 20
_UNIT = struct.Struct(">qiq")
_BLANK_UNIT = _UNIT.pack(0, 0x7FFFFFFF, 0)
# Packs of a batch's units by their count (``put_unit_fields``): one call for them all, where a call
# per unit cost a bytes object and its freeing each (callgrind, a batch of 32: 10k instructions).
# Counts up to _UNITS_PACKED, the usual batches (a producer's batch is at most 4 MiB, its
# entries usually tens): each Struct is made once, and the cache forgotten past _UNITS_PACKS.
_UNITS_PACKED = 1024
_UNITS_PACKS = 64
_UNITS_PACK: dict[int, Callable[..., bytes]] = {}


_SCAN_UNITS = 4096

# Blocks reserved ahead of a queue's writer, not the whole file at its creation: a file is
# 6,000,000 bytes (300,000 units), and 10,000 topics of 8 queues reserved whole would hold
# 480 GB of disk for queues that may never see a message (Java's files are sparse). A put reserves
# for its units before the CommitLog takes its record (``reserve``), so a full disk still refuses
# the put rather than faulting on an unbacked page (docs/store-disk-full.md).
CQ_RESERVE_CHUNK = 16 * 1024


def _valid_prefix(mm: mmap.mmap, file_size: int) -> int:
    """Bytes of the units from the start of a file up to the first invalid one (a negative
    offset or a size not above 0: the zeros past the last unit written, or a torn unit).

    A restart reads every unit of a queue's last files, and a busy queue has hundreds of
    thousands, so units are tested 4,096 at a time by byte columns: a unit's offset and size
    are non-negative when their top bytes are below 0x80, and its size is not 0 when the OR
    of its four bytes is not. Only a block that fails is read unit by unit."""
    step = CQ_STORE_UNIT_SIZE
    block = _SCAN_UNITS * step
    pos = 0
    while pos < file_size:
        chunk = mm[pos:min(pos + block, file_size)]
        n = len(chunk) // step
        size_or = (int.from_bytes(chunk[8::step]) | int.from_bytes(chunk[9::step]) | int.from_bytes(chunk[10::step])
                   | int.from_bytes(chunk[11::step])).to_bytes(n)
        if max(chunk[0::step]) < 0x80 and max(chunk[8::step]) < 0x80 and b"\0" not in size_or:
            pos += n * step
            continue
        for offset, size, _ in _UNIT.iter_unpack(chunk[:n * step]):
            if offset < 0 or size <= 0:
                return pos
            pos += step
        return pos  # unreachable: the block failed its test
    return pos


class QueuesToFlush:
    """The queues a flush must look at, so that flushing costs what was written, not the number
    of queues (10,000 topics of 8 queues are 80,000): ``dirty``, those written since their last
    sync (the thorough flush's and the shutdown's), and ``due``, those of them with
    ``least_pages`` pages unsynced or a full file (the periodic flush's, Java's
    flushConsumeQueueLeastPages). A queue joins them as its writer passes a mark
    (``ConsumeQueue.note_written``); ConsumeQueueStore.forget_flushed takes it out."""

    def __init__(self, least_pages: int = 2) -> None:
        self.least_pages = least_pages
        self.dirty: set[ConsumeQueue] = set()
        self.due: set[ConsumeQueue] = set()
        # The queues synced since ConsumeQueueStore.written_topics last asked; None until it
        # first does (a store whose topics nobody asks about keeps nothing).
        self.synced_since: set[ConsumeQueue] | None = None


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, root: str, file_size: int,
                 to_flush: QueuesToFlush | None = None) -> None:
        """``to_flush``: the store's sets of queues to flush, which this one joins as it is
        written (its own when none is given)."""
        self.topic = topic
        self.queue_id = queue_id
        # Round the file size down to whole units, as Java does.
        self.file_size = file_size - file_size % CQ_STORE_UNIT_SIZE
        self.queue = MappedFileQueue(os.path.join(root, topic, str(queue_id)), self.file_size,
                                     reserve_chunk=CQ_RESERVE_CHUNK, release_idle=True,
                                     first_reserve=2 * CQ_RESERVE_CHUNK, cached_head=PAGE_SIZE)
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.to_flush = QueuesToFlush() if to_flush is None else to_flush
        self.dirty = False
        # The logical byte from which a unit written is noted (``note_written``): -1 when the
        # queue is synced (its next unit makes it dirty), then the unit that makes it due. One
        # comparison per unit on the put path.
        self.note_from = -1

    def note_written(self) -> None:
        """Units written up to the queue's end: it joins the dirty set, and the due set once it
        has least_pages pages unsynced or a full file (``files_to_flush``'s rule, judged here
        from the last two files); else the mark moves to where it will be due."""
        to_flush = self.to_flush
        if not self.dirty:
            self.dirty = True
            to_flush.dirty.add(self)
        files = self.queue.files
        mf = files[-1]
        start = mf.file_from_offset
        due_at = start + min((mf.flushed_position // PAGE_SIZE + to_flush.least_pages) * PAGE_SIZE, mf.file_size)
        if start + mf.wrote_position >= due_at or (len(files) > 1 and files[-2].flushed_position < self.file_size):
            to_flush.due.add(self)
            self.note_from = 1 << 62  # nothing more to note until it is synced
        else:
            self.note_from = due_at - CQ_STORE_UNIT_SIZE

    def synced(self) -> None:
        """Nothing unsynced left: out of the flush sets until it is written again."""
        to_flush = self.to_flush
        if self.dirty and to_flush.synced_since is not None:
            to_flush.synced_since.add(self)
        self.dirty = False
        to_flush.dirty.discard(self)
        to_flush.due.discard(self)
        self.note_from = -1

    def load(self) -> None:
        self.queue.load()

    def recover(self) -> None:
        """Find the end of valid units, scanning from the third-last file as Java does."""
        files = self.queue.files
        if not files:
            return
        start = max(0, len(files) - 3)
        end_offset = files[start].file_from_offset
        for mf in files[start:]:
            mm = mf.mapping()
            pos = _valid_prefix(mm, self.file_size)
            for at in range(pos - CQ_STORE_UNIT_SIZE, -1, -CQ_STORE_UNIT_SIZE):
                offset, size, _ = _UNIT.unpack_from(mm, at)
                if size != 0x7FFFFFFF:  # the last real unit: units point forward in the log
                    self.max_physic_offset = max(self.max_physic_offset, offset + size)
                    break
            end_offset = mf.file_from_offset + pos
            if pos < self.file_size:
                break
        self.queue.set_position(end_offset)

    @property
    def max_offset_in_queue(self) -> int:
        return self.queue.max_offset // CQ_STORE_UNIT_SIZE

    @property
    def min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write unit ``cq_offset``; idempotent, so recovery can dispatch a record twice."""
        if offset + size <= self.max_physic_offset:
            return True
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        files = self.queue.files
        if files:
            # The steady state: the next unit of a file with room.
            mf = files[-1]
            pos = mf.wrote_position
            if pos < mf.reserved and mf.file_from_offset + pos == expect:
                mm = mf.mm
                if mm.closed:  # released past the mapping budget
                    mf.write_at(pos, _UNIT.pack(offset, size, tags_code))
                else:
                    _UNIT.pack_into(mm, pos, offset, size, tags_code)
                mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
                self.max_physic_offset = offset + size
                if expect >= self.note_from:
                    self.note_written()
                return True
        mf = self._first_file(expect) if not self.queue.files else self.queue.get_last_mapped_file(expect)
        current = mf.file_from_offset + mf.wrote_position
        if expect < current:
            return True  # already there
        if expect != current:
            log.warning("[BUG] logic queue order maybe wrong, expectLogicOffset: %d currentLogicOffset: %d "
                        "topic: %s queue: %d", expect, current, self.topic, self.queue_id)
        self._reserve_for_writer(mf, mf.wrote_position + CQ_STORE_UNIT_SIZE)
        mf.mapping()
        mf.append(_UNIT.pack(offset, size, tags_code))
        self.max_physic_offset = offset + size
        self.note_written()
        return True

    def _first_file(self, expect: int) -> MappedFile:
        mf = self.queue.get_last_mapped_file(expect)
        if expect:
            # A queue whose first unit is not 0 (its older files were deleted): fill the head
            # of the file with blank units so positions stay arithmetic.
            self.min_logic_offset = expect
            mf.reserve(expect - mf.file_from_offset, CQ_RESERVE_CHUNK)
            mf.append(_BLANK_UNIT * ((expect - mf.file_from_offset) // CQ_STORE_UNIT_SIZE))
            self.note_written()
        return mf

    def _reserve_for_writer(self, mf: MappedFile, end: int) -> None:
        """Blocks up to ``end`` for a write the CommitLog has already taken (a slave's dispatch,
        recovery): the master's put reserved them beforehand (``reserve``), and when the disk has
        no room now the unit is written all the same, into a sparse page, as before reservations
        were made: the record is in the log and its unit must be."""
        if end > mf.reserved:
            try:
                mf.reserve(end, CQ_RESERVE_CHUNK)
            except OSError as exc:
                log.error("cannot reserve the blocks of %s up to %d: %s", mf.path, end, exc)

    def reserve(self, cq_offset: int, count: int) -> None:
        """Files for the units ``cq_offset`` to ``cq_offset + count - 1`` made now, before the
        CommitLog takes their records: once a record is in the log its unit must be written, or
        an acknowledged message would be in no queue. Raises OSError (DiskFullError for a full
        disk) and changes nothing a reader sees when they cannot be made. The caller has checked
        that the current file lacks reserved room (``has_room``)."""
        files = self.queue.files
        if not files:
            self._first_file(cq_offset * CQ_STORE_UNIT_SIZE)
        elif files[-1].is_full:
            self.queue.get_last_mapped_file()
        mf = files[-1]
        end = mf.wrote_position + count * CQ_STORE_UNIT_SIZE
        if end + CQ_RESERVE_CHUNK > mf.reserved:  # a file made ahead has it already (``first_reserve``)
            mf.reserve(min(end, self.file_size), CQ_RESERVE_CHUNK)
        if end > self.file_size:  # the files after it are made whole (create_ahead)
            per_file = self.file_size // CQ_STORE_UNIT_SIZE
            self.queue.create_ahead(-(-(end - self.file_size) // CQ_STORE_UNIT_SIZE // per_file))

    def has_room(self, count: int) -> bool:
        """Whether the current file holds ``count`` more units (the put path's check before
        ``reserve``)."""
        files = self.queue.files
        return bool(files) and files[-1].wrote_position + count * CQ_STORE_UNIT_SIZE <= files[-1].reserved

    def put_unit_fields(self, fields: list[int], first_cq_offset: int) -> bool:
        """Units ``first_cq_offset`` onwards in one write, given as their fields one after
        another (offset, size, tag hash, offset, ...), when they follow the last unit in the
        current file and fit in it; False (nothing written) otherwise, for the caller to put
        them one at a time through ``put_message_position_info``."""
        files = self.queue.files
        if not files or fields[0] < self.max_physic_offset:
            return False
        mf = files[-1]
        pos = mf.wrote_position
        count = len(fields) // 3
        end = pos + count * CQ_STORE_UNIT_SIZE
        if end > mf.reserved or mf.file_from_offset + pos != first_cq_offset * CQ_STORE_UNIT_SIZE:
            return False
        pack = _UNITS_PACK.get(count)
        if pack is not None:
            data = pack(*fields)
        elif count <= _UNITS_PACKED:
            if len(_UNITS_PACK) >= _UNITS_PACKS:
                _UNITS_PACK.clear()
            pack = _UNITS_PACK[count] = struct.Struct(f">{'qiq' * count}").pack
            data = pack(*fields)
        else:  # a Struct of that many fields would cost more to make than it saves
            data = b"".join(starmap(_UNIT.pack, zip(fields[::3], fields[1::3], fields[2::3], strict=True)))
        mf.write_at(pos, data)
        mf.wrote_position = end
        self.max_physic_offset = fields[-3] + fields[-2]
        self.note_written()
        return True

    def unit_at(self, index: int) -> tuple[int, int, int] | None:
        pos = index * CQ_STORE_UNIT_SIZE
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None or pos - mf.file_from_offset >= mf.wrote_position:
            return None
        return _UNIT.unpack_from(mf.mapping(), pos - mf.file_from_offset)

    def units_from(self, index: int, max_bytes: int) -> Iterator[tuple[int, int, int]] | None:
        """Consecutive units starting at ``index``, within one file, at most ``max_bytes`` of them;
        None when there are none. Lazy: a pull scans up to 800 units (Java's 16,000-byte window)
        but most stop after 32, and unpacking the rest cost more than the pull itself."""
        pos = index * CQ_STORE_UNIT_SIZE
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        start = pos - mf.file_from_offset
        count = (min(mf.wrote_position, start + max_bytes) - start) // CQ_STORE_UNIT_SIZE
        if count <= 0:
            return None
        # A copy (16 KB at most), not a view: a view would pin the mapping against unmapping.
        return _UNIT.iter_unpack(mf.read(start, count * CQ_STORE_UNIT_SIZE))

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop units that point at or beyond ``phy_offset`` (CommitLog data lost in a crash)."""
        self.max_physic_offset = -1
        for mf in reversed(list(self.queue.files)):
            pos = 0
            valid_end = 0
            mm = mf.mapping()
            while pos + CQ_STORE_UNIT_SIZE <= mf.wrote_position:
                offset, size, _ = _UNIT.unpack_from(mm, pos)
                if size == 0x7FFFFFFF:  # blank filler
                    valid_end = pos + CQ_STORE_UNIT_SIZE
                elif offset >= phy_offset:
                    break
                else:
                    valid_end = pos + CQ_STORE_UNIT_SIZE
                    self.max_physic_offset = offset + size
                pos += CQ_STORE_UNIT_SIZE
            if valid_end == 0 and mf is not self.queue.files[0]:
                self.queue.files.remove(mf)
                mf.destroy()
                continue
            mm[valid_end:mf.wrote_position] = bytes(mf.wrote_position - valid_end)
            mf.wrote_position = mf.flushed_position = valid_end
            if valid_end:
                break

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """The first unit still pointing into the CommitLog (after its old files were deleted)."""
        for mf in self.queue.files:
            mm = mf.mapping()
            for pos in range(0, mf.wrote_position, CQ_STORE_UNIT_SIZE):
                offset, size, _ = _UNIT.unpack_from(mm, pos)
                if size != 0x7FFFFFFF and offset >= phy_min_offset:
                    self.min_logic_offset = mf.file_from_offset + pos
                    return
        self.min_logic_offset = self.queue.max_offset

    def delete_expired_files(self, phy_min_offset: int) -> int:
        """Delete whole files whose every unit points below the CommitLog's min offset."""
        count = 0
        while len(self.queue.files) > 1:
            mf = self.queue.files[0]
            last_pos = mf.wrote_position - CQ_STORE_UNIT_SIZE
            if last_pos < 0:
                break
            offset, _, _ = _UNIT.unpack_from(mf.mapping(), last_pos)
            if offset >= phy_min_offset:
                break
            self.queue.delete_first_files(1)
            count += 1
        self.correct_min_offset(phy_min_offset)
        return count

    def flush(self, least_pages: int = 0) -> None:
        """Its files synced; with ``least_pages``, only those with that many pages written since
        their last sync, or full (flushConsumeQueueLeastPages)."""
        self.queue.flush(least_pages)

    def destroy(self) -> None:
        self.synced()  # its files are gone: nothing of it is left to sync
        self.queue.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0
