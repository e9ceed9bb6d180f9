"""Fixed-size files on mmap, named by the 20-digit offset of their first byte.

Writers copy into the mapping; readers slice it directly. ``flush`` is ``msync`` and may take
milliseconds, so callers run it in a thread (the mapping is shared memory, so the event loop can
keep appending while an earlier range is being synced). A killed process loses nothing written
to the mapping: the pages belong to the kernel's page cache.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import errno
import logging
import mmap
import os
import sys
import threading
from collections.abc import Callable, Sequence

log = logging.getLogger("rocketmq.store")

# fdatasync where the OS has it (Linux), fsync elsewhere (macOS).
_datasync = getattr(os, "fdatasync", os.fsync)

# Java's AllocateMappedFileService: one thread creating the next CommitLog file ahead of need.
_allocator = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="AllocateMappedFileService")
# And one for the first ConsumeQueue files of topics just created (ConsumeQueueStore.make_ahead):
# 10,000 topics created at once are 80,000 files, which must not hold up the CommitLog's next.
_queue_allocator = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                         thread_name_prefix="AllocateConsumeQueueService")
_WARM_CHUNK = bytes(1 << 20)
# What ``_cache_head`` reads into: the allocator's single thread alone uses it.
_HEAD_BUFFER = bytearray(1 << 20)
# Java's MappedFile.OS_PAGE_SIZE: the unit of flushXxxLeastPages.
PAGE_SIZE = 4096
# Bytes of one POSIX_FADV_WILLNEED call of MappedFile.read_ahead: under any device's readahead
# cap (the kernel reads at most max(read_ahead_kb, the device's largest request) per call).
_READ_AHEAD_CALL = 1 << 20
# The thread that asks the kernel for the pages pulls read next (MappedFile.read_ahead), off the
# event loop. Java has none: its pulls fault on the mapping, with the kernel's readahead.
_READ_AHEAD = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ReadAheadService")
_WILLNEED = getattr(os, "POSIX_FADV_WILLNEED", None)  # None where there is no posix_fadvise (macOS)
# Errors of a reservation that mean the disk (or the user's quota) is full.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
# posix_fallocate's answers where the filesystem cannot reserve: the file stays sparse, as before.
_NO_RESERVE_ERRNOS = frozenset({errno.EINVAL, getattr(errno, "EOPNOTSUPP", errno.EINVAL), errno.ENOSYS})
# Python 3.13's mmap can leave the descriptor alone; before it, every mapping holds a dup of it.
_MMAP_OPTIONS: dict[str, bool] = {"trackfd": False} if sys.version_info >= (3, 13) else {}
# What an unmapped file's ``mm`` is: a closed mapping, so ``mm.closed`` tells the state and a
# stray access fails with ValueError instead of touching freed memory.
_UNMAPPED = mmap.mmap(-1, 1)
_UNMAPPED.close()
# A file's ``writable`` when nothing of its mapping is known populated writable.
_NONE_WRITABLE = (0, 0, -1)


class SyncCount:
    """Syncs started and ended (equal when none runs): of one file (``MappedFile.syncs``) or of
    the whole filesystem (``FILESYSTEM_SYNCS``, store.file_sync's syncfs), either of which cleans
    the pages the warmer populated ahead of the writer (``MappedFile.writable``)."""

    __slots__ = ("ended", "started")

    def __init__(self) -> None:
        self.started = 0
        self.ended = 0


FILESYSTEM_SYNCS = SyncCount()
# Held by whoever reads or changes a file's pending bytes (MappedFile.write_at): the event loop
# adds to them, and the ConsumeQueue flush's thread writes them to their files
# (ConsumeQueueStore.flush). One lock for every file: a file's object stays small (80,000 of them
# for 10,000 topics of 8 queues), and the loop waits on it at most one pwrite of the thread's.
_PENDING_LOCK = threading.Lock()


def start_allocator() -> None:
    """The allocators' threads started (with the store, as Java starts its service), not by the
    first file roll inside a put: ``Thread.start`` waits for the new thread to run."""
    wait_allocator()


def _will_need(path: str, start: int, stop: int) -> None:
    """The bytes [start, stop) of the file at ``path`` asked from the disk (MappedFile.read_ahead);
    on the read-ahead thread, which waits while the kernel allocates their pages and queues their
    reads, the GIL released. Through a descriptor of its own, not the mapping: the event loop may
    release the mapping meanwhile. Nothing when the file is gone or no descriptor is left."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        for at in range(start, stop, _READ_AHEAD_CALL):
            os.posix_fadvise(fd, at, min(_READ_AHEAD_CALL, stop - at), _WILLNEED)  # type: ignore[arg-type]
    except OSError:
        pass
    finally:
        os.close(fd)


def wait_read_ahead() -> None:
    """Every read-ahead asked for so far done (its reads queued with the device)."""
    _READ_AHEAD.submit(int).result()


def wait_allocator() -> None:
    """Every file the allocators were asked for made (or removed) by now."""
    for allocator in (_allocator, _queue_allocator):
        allocator.submit(int).result()


class DiskFullError(OSError):
    """No new store file: the disk is full (or above the store's warning ratio). ``needed``: the
    bytes the file wanted, which must be free before puts are accepted again."""

    def __init__(self, message: str, needed: int) -> None:
        super().__init__(errno.ENOSPC, message)
        self.needed = needed


def reserve_blocks(fd: int, size: int, offset: int = 0) -> None:
    """Have the filesystem reserve the blocks of a store file's bytes ``offset`` to
    ``offset + size``.

    A mapped page of a sparse file gets its block only when first written, and a block the disk
    no longer has is a SIGBUS that kills the process. Reserving them before they are written
    turns a full disk into an OSError (ENOSPC), where a put can be refused
    (docs/store-disk-full.md). Where the filesystem cannot reserve (posix_fallocate unsupported),
    the file stays sparse."""
    if size <= 0 or not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, offset, size)
    except OSError as exc:
        if exc.errno not in _NO_RESERVE_ERRNOS:
            raise


def _pwrite_rest(fd: int, data: bytes | bytearray | memoryview, pos: int, written: int) -> None:
    """``data`` from its byte ``written`` on into the file at ``pos + written``: a pwrite may
    write less than asked (a signal, a full disk), and the rest must still go in or fail."""
    size = len(data)
    with memoryview(data) as view:
        while written < size:
            written += os.pwrite(fd, view[written:], pos + written)


def create_reserved(path: str, size: int, reserve: int | None = None) -> None:
    """A new file of ``size`` bytes with its first ``reserve`` bytes' blocks reserved (all of
    them by default); nothing left behind on failure."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.ftruncate(fd, size)
        reserve_blocks(fd, size if reserve is None else min(size, reserve))
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.remove(path)
        raise
    os.close(fd)


def _allocate(path: str, file_size: int, warm: bool, reserve: int, cached: int = 0) -> str:
    """Create a store file ahead of need (its directory too), its first ``reserve`` bytes' blocks
    reserved (``reserve_blocks``) and its first ``cached`` bytes read into the page cache
    (``_cache_head``), or, when ``warm`` (Java's warmMapedFileEnable), all of it reserved,
    zero-written and synced, so puts never fault on a fresh page nor make a later fsync write the
    file's zeros. Every call here releases the GIL while the kernel works. The file is mapped by
    the thread that takes it (the mapping budget is the event loop's)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    create_reserved(path, file_size, file_size if warm else reserve)
    if cached and not warm:
        _cache_head(path, min(cached, file_size))
    if warm:
        fd = os.open(path, os.O_RDWR)
        try:
            for pos in range(0, file_size, len(_WARM_CHUNK)):
                os.pwrite(fd, _WARM_CHUNK[:file_size - pos], pos)
            _datasync(fd)
        except BaseException:
            os.close(fd)
            os.remove(path)
            raise
        os.close(fd)
    return path


def _cache_head(path: str, length: int) -> None:
    """The first ``length`` bytes of a new file read, so their pages are in the page cache (clean
    zeros) before a writer maps them. A fresh page costs whoever brings it in first 2-4 µs (about
    10 µs where the host must back the memory, docs/store-formats.md#writing-the-commitlog): paid
    here, by the allocator's thread, the event loop's first writes into the file take minor
    faults, and the page warmer's first calls over them hold the mapping lock (which an mmap on
    the loop waits for) far shorter. Read, not written: no dirty page for an fsync to write
    (SYNC_FLUSH), and no lock of the process's mappings taken."""
    fd = os.open(path, os.O_RDONLY)
    try:
        with memoryview(_HEAD_BUFFER) as buf:
            for pos in range(0, length, len(buf)):
                os.preadv(fd, [buf[:min(len(buf), length - pos)]], pos)
    finally:
        os.close(fd)


def _open_file_limit() -> int:
    try:
        import resource  # not on Windows, where a mapping holds a handle, not a descriptor
    except ImportError:
        return 1 << 30
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


class _Mappings:
    """Every mapped store file, oldest mapping first, with a bound on how many stay mapped.

    Before Python 3.13 each mapping holds a descriptor, and a store of many small files (small
    ConsumeQueue files, a long history) would run out of them: past half the open-file limit,
    the oldest mappings of files that are full and flushed (nothing will write them again) are
    released, and made again when read. When too few are, the oldest mappings of files whose
    writers map them again before writing (``release_idle``: the ConsumeQueue files being written,
    one per queue, 80,000 for 10,000 topics of 8 queues) go next: a released mapping's written
    pages stay in the page cache and are synced through a descriptor (``MappedFile.flush``).
    The CommitLog's file being written is never released. (The kernel's own bound,
    vm.max_map_count, 65,530 by default, caps the budget too.)"""

    def __init__(self) -> None:
        self.open: dict[MappedFile, None] = {}
        self.limit = 0
        self._next_scan = 0

    def add(self, mf: MappedFile) -> None:
        self.open[mf] = None
        if not self.limit:
            self.limit = max(64, min(_open_file_limit() // 2, 32768))
            self._next_scan = self.limit
        if len(self.open) > self._next_scan:
            self._release_cold(mf)

    def discard(self, mf: MappedFile) -> None:
        self.open.pop(mf, None)

    def _release_cold(self, keep: MappedFile) -> None:
        # An eighth of the budget at a time, so the scan is paid once per that many mappings;
        # cold files first, then idle ones (never ``keep``, the mapping just made for its caller);
        # when too few are either, wait as long again.
        excess = len(self.open) - self.limit + self.limit // 8
        for releasable in (_cold, _idle):
            for mf in list(self.open):
                if excess <= 0:
                    break
                if mf is not keep and releasable(mf):
                    mf.unmap()
                    excess -= 1
        self._next_scan = max(self.limit, len(self.open) + self.limit // 8)


def _cold(mf: MappedFile) -> bool:
    return mf.cold


def _idle(mf: MappedFile) -> bool:
    return mf.release_idle


MAPPINGS = _Mappings()


class MappedFile:
    __slots__ = ("_address", "_write_fd", "file_from_offset", "file_size", "flushed_position", "mm", "path",
                 "pending", "pending_at", "read_ahead_from", "read_ahead_to", "release_idle", "reserved", "syncs",
                 "warm_mark", "warm_requested", "writable", "wrote_position")

    def __init__(self, path: str, file_size: int, mapped: bool = True) -> None:
        """An existing file of ``file_size`` bytes (see ``create_reserved``); ``mapped=False``
        leaves it unmapped until first read (a store loading thousands of files)."""
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(os.path.basename(path))
        self.mm = _UNMAPPED
        self._address: int | None = None
        # The descriptor ``write`` keeps while the file is written (the CommitLog's current file).
        self._write_fd: int | None = None
        # Bytes from the start whose blocks are known reserved (``reserve``); writers stay below.
        self.reserved = 0
        # Whether its mapping may be released while it is still written (_Mappings): set for
        # files whose writers take ``mapping()`` before writing.
        self.release_idle = False
        # Bytes ``write_at`` took while the file was unmapped, not yet in the file: they belong at
        # ``pending_at`` (``write_pending``). None when there are none, always while mapped.
        self.pending: bytearray | None = None
        self.pending_at = 0
        size = os.path.getsize(path)
        if size != file_size:
            raise ValueError(f"{path} has {size} bytes, expected {file_size}: refusing to load")
        if mapped:
            self.mapping()
        self.wrote_position = 0
        self.flushed_position = 0
        # store.prefault's bookkeeping: the write position at which the writer next asks for
        # pages ahead, and how far it has asked already.
        self.warm_mark = 0
        self.warm_requested = 0
        # The bytes [start, end) of the mapping the warmer has populated writable and dirty
        # (MADV_POPULATE_WRITE), as (start, end, sync_mark()): true while no sync has started
        # since. A sync writes the populated zeros too and cleans their pages, and a store into a
        # clean page faults to dirty it again (docs/store-formats.md#writing-the-commitlog).
        self.writable = _NONE_WRITABLE
        self.syncs = SyncCount()
        # ``read_ahead``'s bookkeeping: the bytes it last asked the kernel to read in.
        self.read_ahead_from = 0
        self.read_ahead_to = 0

    def mapping(self) -> mmap.mmap:
        """The file's mapping, made again if it was released (with the bytes pending written
        first: whoever reads or writes through it sees them)."""
        mm = self.mm
        if mm.closed:
            fd = os.open(self.path, os.O_RDWR)
            try:
                with _PENDING_LOCK:
                    self._write_pending(fd)
                mm = self.mm = mmap.mmap(fd, self.file_size, **_MMAP_OPTIONS)
            finally:
                os.close(fd)
            MAPPINGS.add(self)
        return mm

    def reserve(self, end: int, chunk: int) -> None:
        """Blocks reserved up to ``end`` and ``chunk`` bytes past it (within the file), before a
        writer goes there; DiskFullError when the disk has no room, and nothing changes."""
        target = min(self.file_size, max(end, self.reserved) + chunk)
        fd = os.open(self.path, os.O_RDWR)
        try:
            reserve_blocks(fd, target - self.reserved, self.reserved)
        except OSError as exc:
            if exc.errno in DISK_FULL_ERRNOS:
                raise DiskFullError(f"cannot reserve {self.path} up to byte {target}: {exc.strerror}",
                                    target - self.reserved) from exc
            raise
        finally:
            os.close(fd)
        self.reserved = target

    @property
    def cold(self) -> bool:
        """Full and flushed: only ever read again, so its mapping may be released."""
        return self.wrote_position >= self.file_size and self.flushed_position >= self.file_size

    def unmap(self) -> None:
        self.end_writes()
        MAPPINGS.discard(self)
        self._address = None
        self.writable = _NONE_WRITABLE  # the pages were populated in this mapping, not the next
        with contextlib.suppress(BufferError):  # a reader's view still alive: left to the GC
            self.mm.close()
        self.mm = _UNMAPPED

    def address(self) -> int | None:
        """The mapping's address, for madvise; None once unmapped. Taken through a buffer export
        that is released at once, so ``close`` is never refused because of it."""
        if self._address is None and not self.mm.closed:
            try:
                view = (ctypes.c_char * 1).from_buffer(self.mm)
            except (ValueError, TypeError):  # closed
                return None
            self._address = ctypes.addressof(view)
            del view
        return self._address if not self.mm.closed else None

    @property
    def mapped(self) -> bool:
        return not self.mm.closed

    def advise_no_readahead(self, length: int) -> None:
        """No readahead on the first ``length`` bytes of a file just created.

        A page fault on a fresh page makes the kernel read ahead, and reading ahead over pages
        never written is zero-filling: the first write into a new file zeroes up to 8 MiB of page
        cache in the writer's thread, 17 ms measured here, once per new ConsumeQueue file, that is
        once per queue of every new topic, a stall of the whole event loop. Without readahead a
        fault costs one page. Files loaded at start keep the kernel's default, for cold
        sequential reads.
        """
        if length > 0 and hasattr(mmap, "MADV_RANDOM"):
            with contextlib.suppress(OSError, ValueError):
                self.mm.madvise(mmap.MADV_RANDOM, 0, min(length, self.file_size))

    @staticmethod
    def file_name(offset: int) -> str:
        return f"{offset:020d}"

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def append(self, data: bytes) -> None:
        pos = self.wrote_position
        self.mm[pos:pos + len(data)] = data
        self.wrote_position = pos + len(data)

    def write_at(self, pos: int, data: bytes) -> None:
        """``data`` at ``pos``: through the mapping, or, when it was released (``release_idle``),
        into ``pending``, written to the file later by one pwrite (``write_pending``).

        A ConsumeQueue unit is 20 bytes, and with more queues written than the mapping budget
        (80,000 for 10,000 topics of 8 queues, against 10,000 mappings under a 20,000-descriptor
        limit) most units land in released files: writing each by open, pwrite and close cost
        8 µs of the event loop's time, mapping the file again more. Kept here, a file's units
        go in one pwrite when the flush service's thread writes them (``ConsumeQueueStore.flush``),
        when the file is mapped again (a reader), or when a page of them is waiting.

        Not yet in the file, they are not yet in the page cache: a killed broker loses them,
        and its recovery (abnormal, from the file the checkpoint vouches for) dispatches their
        records again. ``flushed_position`` never passes them (``written_position``).

        On the event loop only (its writer); the pending bytes are changed under ``_PENDING_LOCK``,
        which the flush's thread holds while it writes them."""
        mm = self.mm
        if not mm.closed:
            mm[pos:pos + len(data)] = data
            return
        with _PENDING_LOCK:
            pending = self.pending
            if pending is not None and pos == self.pending_at + len(pending):
                pending += data
            else:
                if pending is not None:
                    self._open_and_write_pending()  # not contiguous (a rewrite, say): the earlier bytes first
                self.pending_at = pos  # before ``pending``: a flush thread reads them in the other order
                self.pending = pending = bytearray(data)
            if len(pending) >= PAGE_SIZE:
                self._open_and_write_pending()

    @property
    def written_position(self) -> int:
        """The position up to which everything written is in the file (the page cache): what a
        flush can make durable. Read from a flush thread while the event loop writes: the write
        position first, then whether bytes are pending below it."""
        end = self.wrote_position
        if self.pending is not None:
            end = min(end, self.pending_at)
        return end

    def write_pending(self) -> None:
        """The bytes ``write_at`` kept, written to the file: by the event loop (closing the file),
        or by the ConsumeQueue flush's thread while the loop adds to them (both under
        ``_PENDING_LOCK``). The descriptor is opened before the lock is taken, so the loop waits
        on the lock at most for the pwrite. FileNotFoundError when the file was deleted."""
        if self.pending is None:
            return
        fd = os.open(self.path, os.O_WRONLY)
        try:
            with _PENDING_LOCK:
                self._write_pending(fd)
        finally:
            os.close(fd)

    def _open_and_write_pending(self) -> None:
        """``write_pending`` for a caller holding ``_PENDING_LOCK``."""
        fd = os.open(self.path, os.O_WRONLY)
        try:
            self._write_pending(fd)
        finally:
            os.close(fd)

    def _write_pending(self, fd: int) -> None:
        pending = self.pending
        if pending is None:
            return
        _pwrite_rest(fd, pending, self.pending_at, 0)
        self.pending = None  # after the write: a flush thread then counts the bytes as in the file

    def drop_pending(self) -> None:
        """Pending bytes discarded (the file is being deleted)."""
        with _PENDING_LOCK:
            self.pending = None

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """``data`` into the file at ``pos``: less than a page through the mapping, a page or more
        by pwrite into the page cache the mapping shares, on a descriptor kept until
        ``end_writes`` (the CommitLog's records; docs/store-formats.md#writing-the-commitlog).

        Once a flush (or the kernel's writeback) has cleaned a page, the next store into it
        through the mapping faults to dirty it again. A write under a page mostly lands on a
        page the previous one dirtied, and a copy costs less than a system call (a single 1 KiB
        put 5.1-5.9 µs through the mapping, 6.1-6.7 by pwrite); a page or more faults on every
        page it reaches, and a batch of 32 sends (36 KiB) cost 43-76 µs of kernel time through
        the mapping under ASYNC_FLUSH's flushes, 20-22 by pwrite. A page written either way is
        the same page: readers of the mapping, flushes and a killed process see the same bytes.
        Into pages the warmer made writable (``is_writable``), any size goes through the mapping."""
        size = len(data)
        mm = self.mm
        if (size < PAGE_SIZE or self.is_writable(pos, size)) and not mm.closed:
            mm[pos:pos + size] = data
            return
        fd = self._kept_fd()
        written = os.pwrite(fd, data, pos)
        if written != size:  # only a signal or a full disk cut a write to a file short
            _pwrite_rest(fd, data, pos, written)

    def write_parts(self, pos: int, parts: list[bytes | bytearray | memoryview]) -> None:
        """``parts`` one after another into the file at ``pos``, by one pwritev on the kept
        descriptor: a record around a large body (its head and tail are under a page each)
        goes in without a joined copy of the body and without the head or tail touching the
        mapping, where a store to a page not yet in the page cache faults and the kernel reads
        ahead (zero-fills) a window of pages inside the event loop. Where the warmer has made the
        pages writable (``is_writable``), each part is copied into the mapping instead."""
        size = sum(map(len, parts))
        mm = self.mm
        if self.is_writable(pos, size) and not mm.closed:
            for part in parts:
                end = pos + len(part)
                mm[pos:end] = part
                pos = end
            return
        fd = self._kept_fd()
        written = os.pwritev(fd, parts, pos)
        if written != size:  # as in ``write``
            _pwrite_rest(fd, b"".join(parts), pos, written)

    def is_writable(self, pos: int, size: int) -> bool:
        """Whether the bytes [pos, pos + size) are in pages the warmer populated writable in this
        mapping, with no sync since (``writable``): a copy into them takes no fault, and costs
        less than ``pwrite`` into the same pages, which goes through the filesystem's write path
        page by page (a 1 MiB record 60 against 163 µs of CPU here, a 36 KiB batch 3.3 against 6.3)."""
        start, end, mark = self.writable
        return mark == self.syncs.started + FILESYSTEM_SYNCS.started and start <= pos and pos + size <= end

    def sync_mark(self) -> int | None:
        """What moves whenever a sync of this file (or its filesystem) starts; None while one
        runs."""
        syncs, fs = self.syncs, FILESYSTEM_SYNCS
        started = syncs.started + fs.started
        return started if started == syncs.ended + fs.ended else None

    def _kept_fd(self) -> int:
        """The descriptor ``write`` and ``write_parts`` keep until ``end_writes``."""
        fd = self._write_fd
        if fd is None:
            fd = self._write_fd = os.open(self.path, os.O_RDWR)
        return fd

    def end_writes(self) -> None:
        """The descriptor ``write`` kept, closed (the file is full, or closing)."""
        fd, self._write_fd = self._write_fd, None
        if fd is not None:
            os.close(fd)

    def flush(self, up_to: int | None = None) -> int:
        """Sync what was written since the last flush (blocking: call it in a thread).

        fdatasync, which (unlike mmap.flush) releases the GIL while it waits on the disk, and on
        Linux writes back pages dirtied through the mapping too. On a descriptor opened for the
        call: one kept per file would be one per ConsumeQueue file. Bytes still pending
        (``write_at``) are not synced: the position stops below them."""
        written = self.written_position
        end = written if up_to is None else min(up_to, written)
        if end > self.flushed_position:
            syncs = self.syncs
            syncs.started += 1  # the sync cleans the pages populated ahead too (``writable``)
            try:
                self._sync()
            finally:
                syncs.ended += 1
            # Two group-commit flushes may run at once: the position only moves forward.
            self.flushed_position = max(self.flushed_position, end)
        return self.flushed_position

    def _sync(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR)
        except OSError as exc:
            # Out of descriptors: msync, which needs none (and holds the GIL), where the file is
            # mapped. Mapping it again needs a descriptor too, and would add to the mapping
            # budget (the event loop's, _Mappings) from this thread: the next flush retries.
            mm = self.mm
            if exc.errno not in (errno.EMFILE, errno.ENFILE) or mm.closed:
                raise
            mm.flush()
        else:
            try:
                _datasync(fd)
            finally:
                os.close(fd)

    def read(self, pos: int, size: int) -> bytes:
        mm = self.mm
        if mm.closed:
            mm = self.mapping()
        return mm[pos:pos + size]

    def read_ahead(self, pos: int, window: int) -> None:
        """The kernel asked, by the read-ahead thread, to read ``[pos, pos + window)`` (what is
        written of it) into the page cache, and not waited for: what a read at ``pos`` adds to the
        bytes asked for already, once it adds a quarter of ``window`` or more (or anything
        before them); a read whose window does not meet them starts them again. Readers going
        through the same bytes (a topic's queues, interleaved in the log) each ask only what
        none has asked yet.

        A read of the mapping that misses the page cache waits for the disk inside the event
        loop, and the kernel's readaround of a fault reads only a few MiB around it, so a
        consumer draining a backlog left on disk (after a restart, or pushed out of memory)
        stalled every pull on its own reads. Asking (POSIX_FADV_WILLNEED, as MADV_WILLNEED) is not
        free either: the kernel allocates the pages and queues their reads in the asking thread,
        8-12 ms for 16 MiB not in memory here (3.5-5.4 ms of it CPU, the rest waiting for the
        device's queue), and 250-330 µs for 16 MiB already in memory. On the event loop that
        was most of what a cold drain cost beyond a warm one; the thread (``_READ_AHEAD``) pays
        it on the other core."""
        asked_from, asked_to = self.read_ahead_from, self.read_ahead_to
        end = pos + window
        if asked_from <= end and pos <= asked_to:  # overlaps what was asked: only what it adds
            if pos < asked_from:
                self.read_ahead_from = pos
                self._ask(pos, asked_from)
            if end - asked_to >= window >> 2:
                self.read_ahead_to = end
                self._ask(asked_to, end)
        else:
            self.read_ahead_from, self.read_ahead_to = pos, end
            self._ask(pos, end)

    def _ask(self, start: int, stop: int) -> None:
        """The written bytes of [start, stop) asked by the read-ahead thread (``read_ahead``)."""
        stop = min(stop, self.wrote_position)
        start -= start % PAGE_SIZE
        if stop > start and _WILLNEED is not None:
            _READ_AHEAD.submit(_will_need, self.path, start, stop)

    def destroy(self) -> None:
        self.drop_pending()
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Unmapped, with the bytes pending written to the file."""
        self.write_pending()
        self.unmap()


def allocate_first_files(queues: Sequence[MappedFileQueue]) -> None:
    """The first file (at offset 0) of each of ``queues``, none of which has a file or is on disk
    (a new topic's ConsumeQueues), made by the ConsumeQueue allocator's thread in one job, for
    ``get_last_mapped_file`` to take as it takes a preallocated file. One job and no look at the
    disk for a topic's queues: a job each and a stat each cost the loop 70 µs a queue while the
    thread was making files in the same directories. A file not made yet when its queue wants it
    is made by the queue itself (``_take_preallocated`` cancels it)."""
    jobs: list[tuple[concurrent.futures.Future[str], str, int, int, int]] = []
    for queue in queues:
        if queue._next is None and not queue.files:
            fut: concurrent.futures.Future[str] = concurrent.futures.Future()
            queue._next = fut
            jobs.append((fut, os.path.join(queue.store_path, MappedFile.file_name(0)), queue.file_size,
                         queue.first_reserved(), queue.cached_head))
    if jobs:
        _queue_allocator.submit(_allocate_each, jobs)


def _allocate_each(jobs: list[tuple[concurrent.futures.Future[str], str, int, int, int]]) -> None:
    for fut, path, file_size, reserve, cached in jobs:
        if fut.set_running_or_notify_cancel():
            try:
                fut.set_result(_allocate(path, file_size, False, reserve, cached))
            except BaseException as exc:  # the taker logs it and makes the file itself
                fut.set_exception(exc)


def _remove_made(fut: concurrent.futures.Future[str]) -> None:
    if fut.cancelled() or fut.exception() is not None:
        return
    path = fut.result()
    with contextlib.suppress(OSError):
        os.remove(path)
        os.rmdir(os.path.dirname(path))
        os.rmdir(os.path.dirname(os.path.dirname(path)))  # a topic's directory, once its last queue goes


class MappedFileQueue:
    """The files of one log (the CommitLog, or one consume queue) in offset order."""

    def __init__(self, store_path: str, file_size: int, preallocate: bool = False, warm: bool = False,
                 no_readahead: int | None = None, reserve_chunk: int = 0, release_idle: bool = False,
                 first_reserve: int = 0, cached_head: int = 0) -> None:
        self.store_path = store_path
        self.file_size = file_size
        # 0: a new file's blocks are all reserved when it is made (ConsumeQueue files, small).
        # Else only this much, and the writer reserves more as it goes (MappedFile.reserve): a
        # 1 GiB CommitLog file costs disk as it fills, as a sparse one did.
        self.reserve_chunk = reserve_chunk
        self.release_idle = release_idle  # MappedFile.release_idle of its files
        # Of a file made ahead (``preallocate_next``, ``allocate_first_files``): the bytes whose blocks
        # are reserved at once when more than ``reserve_chunk`` (what its first put would reserve),
        # and those read into the page cache (what its first writes reach).
        self.first_reserve = first_reserve
        self.cached_head = cached_head
        # Head of each new file advised MADV_RANDOM (MappedFile.advise_no_readahead); all of it
        # by default.
        self.no_readahead = file_size if no_readahead is None else no_readahead
        self.files: list[MappedFile] = []
        self.preallocate = preallocate
        self.warm = warm
        self._next: concurrent.futures.Future[str] | None = None
        # Called with a new file's size before it is started; raises DiskFullError to refuse it. The store
        # sets it to its free-space check, so a put never starts a file on a disk above its
        # warning ratio, whatever the retention timer last saw.
        self.space_check: Callable[[int], None] | None = None

    def load(self) -> None:
        """The files on disk, unmapped but the last (recovery maps what it reads)."""
        if not os.path.isdir(self.store_path):
            return
        names = sorted(n for n in os.listdir(self.store_path) if n.isdigit() and len(n) == 20)
        for i, name in enumerate(names):
            path = os.path.join(self.store_path, name)
            size = os.path.getsize(path)
            if i == len(names) - 1 and size < self.file_size:
                # The newest file was being created when the process died (created, not yet
                # sized): it holds nothing yet, so it is completed rather than refused.
                log.warning("%s has %d bytes, completing it to %d (interrupted creation)", path, size,
                            self.file_size)
                os.truncate(path, self.file_size)
            mf = MappedFile(path, self.file_size, mapped=False)
            # Positions are provisionally "full"; recovery sets the real write position.
            mf.wrote_position = mf.flushed_position = self.file_size
            mf.release_idle = self.release_idle
            self.files.append(mf)
        if self.files:
            self._reserve_last()

    def _reserve_last(self) -> None:
        """Blocks for the file that will be written next, which a store made before reservations
        (or copied sparse) may lack; on a full disk it stays as it is and is mapped anyway:
        refusing to start would keep every stored message from its consumers."""
        mf = self.files[-1]
        mf.mapping()
        if self.reserve_chunk:
            return  # the writer reserves from the start of the file before its first write
        try:
            mf.reserve(self.file_size, 0)
        except OSError as exc:
            log.error("cannot reserve the blocks of %s: %s; puts into it may fail while the disk is full",
                      mf.path, exc)

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def get_last_mapped_file(self, start_offset: int = 0, *, roll: bool = False) -> MappedFile:
        """The file to write into, creating the next one when the last is full (or none exists),
        or, with ``roll``, even when it is not (the CommitLog ends it with a BLANK record only
        once the next one exists, so a put that cannot have one changes nothing).

        Raises OSError when no new file can be made: ENOSPC for a full disk (``space_check`` or
        the reservation), EMFILE when the process is out of descriptors; nothing is left behind."""
        last = self.last()
        if last is not None and not last.is_full and not roll:
            return last
        create_offset = start_offset - start_offset % self.file_size if last is None else \
            last.file_from_offset + self.file_size
        try:
            mf = self._new_file(create_offset)
        except DiskFullError:
            raise
        except OSError as exc:
            if exc.errno in DISK_FULL_ERRNOS:
                raise DiskFullError(f"cannot create {self.file_size}-byte file in {self.store_path}: "
                                    f"{exc.strerror}", self.file_size) from exc
            raise
        mf.release_idle = self.release_idle
        self.files.append(mf)
        self.preallocate_next()
        return mf

    def _new_file(self, create_offset: int) -> MappedFile:
        if self.space_check is not None:
            self.space_check(self.file_size)
        mf = self._take_preallocated(create_offset)
        if mf is None:
            os.makedirs(self.store_path, exist_ok=True)
            path = os.path.join(self.store_path, MappedFile.file_name(create_offset))
            if os.path.exists(path):  # made ahead (create_ahead), or left by a crash
                mf = MappedFile(path, self.file_size)
                if not self.reserve_chunk:
                    try:
                        mf.reserve(self.file_size, 0)  # its writers do not reserve as they go
                    except BaseException:
                        mf.close()
                        raise
            else:
                # Reserved here, never warmed: warming a whole file would stall this put.
                create_reserved(path, self.file_size, self.reserve_chunk or None)
                try:
                    mf = MappedFile(path, self.file_size)
                except BaseException:
                    os.remove(path)
                    raise
                mf.reserved = min(self.file_size, self.reserve_chunk or self.file_size)
                mf.advise_no_readahead(self.no_readahead)
        return mf

    def create_ahead(self, count: int) -> None:
        """The ``count`` files after the last created on disk now, reserved (a batch's units that
        will not fit in the current file must have their files before the CommitLog takes the
        batch); ``get_last_mapped_file`` maps them when it reaches them."""
        last = self.last()
        assert last is not None
        for i in range(1, count + 1):
            path = os.path.join(self.store_path, MappedFile.file_name(last.file_from_offset + i * self.file_size))
            if os.path.exists(path):
                continue
            if self.space_check is not None:
                self.space_check(self.file_size)
            try:
                create_reserved(path, self.file_size)
            except OSError as exc:
                if exc.errno in DISK_FULL_ERRNOS:
                    raise DiskFullError(f"cannot create {path}: {exc.strerror}", self.file_size) from exc
                raise

    def preallocate_next(self) -> None:
        """In a queue that makes every next file ahead (the CommitLog), start creating the file
        after the last one, in the allocator thread; in a queue that has none yet, its first file
        (at offset 0, where ``get_last_mapped_file`` puts it), so a new store's first put does not
        make a file inside the event loop either. ``get_last_mapped_file`` takes it. (A new
        topic's ConsumeQueue files: ``allocate_first_files``.)"""
        last = self.last()
        if not self.preallocate or self._next is not None:
            return
        path = os.path.join(self.store_path, MappedFile.file_name(0 if last is None else
                                                                   last.file_from_offset + self.file_size))
        if not os.path.exists(path):
            self._next = _allocator.submit(_allocate, path, self.file_size, self.warm, self.first_reserved(),
                                           self.cached_head)

    def _take_preallocated(self, offset: int) -> MappedFile | None:
        """The file made ahead for ``offset``, waiting for it if it is still being made (as Java
        does); None when there is none, it failed (a full disk, say), or it is for another offset."""
        fut, self._next = self._next, None
        if fut is None:
            return None
        if not self.preallocate and fut.cancel():
            # A ConsumeQueue's file still waiting its turn behind other topics' (thousands created
            # at once): made here, as before, rather than after all of theirs.
            return None
        try:
            path = fut.result()
        except OSError as exc:
            log.warning("preallocating the next mapped file failed: %s", exc)
            return None
        if int(os.path.basename(path)) != offset:
            with contextlib.suppress(OSError):
                os.remove(path)
            return None
        try:
            mf = MappedFile(path, self.file_size)
        except BaseException:
            os.remove(path)
            raise
        mf.reserved = self.file_size if self.warm else self.first_reserved()
        mf.advise_no_readahead(self.no_readahead)
        return mf

    def first_reserved(self) -> int:
        """Bytes whose blocks a file made ahead has reserved."""
        if not self.reserve_chunk:
            return self.file_size
        return min(self.file_size, max(self.reserve_chunk, self.first_reserve))

    def _drop_preallocated(self) -> None:
        fut, self._next = self._next, None
        if fut is not None:
            with contextlib.suppress(OSError):
                os.remove(fut.result())

    def drop_made_ahead(self) -> None:
        """The file made ahead removed, with the queue's directory, once the allocator has made
        it, without waiting for it (a topic deleted before its first message): on the loop,
        ``_drop_preallocated`` could wait behind another file the allocator is making. A file
        not begun yet is never made (cancelled: a shutdown right after thousands of topics were
        created does not wait for their files). The allocator's single thread runs the removal
        before its next file, so a file made again for the same path (the topic created again)
        is never the one removed."""
        fut, self._next = self._next, None
        if fut is not None and not fut.cancel():
            fut.add_done_callback(_remove_made)

    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        if not self.files:
            return None
        first = self.files[0].file_from_offset
        index = (offset - first) // self.file_size
        if 0 <= index < len(self.files):
            mf = self.files[index]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return None

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        last = self.last()
        return last.file_from_offset + last.wrote_position if last else 0

    @property
    def flushed_where(self) -> int:
        """Offset up to which every file is synced."""
        for mf in self.files:
            if mf.flushed_position < mf.wrote_position:
                return mf.file_from_offset + mf.flushed_position
        return self.max_offset

    def set_position(self, offset: int) -> None:
        """After recovery: ``offset`` is the end of valid data; files past it are deleted."""
        keep: list[MappedFile] = []
        for mf in self.files:
            end = mf.file_from_offset + self.file_size
            if end <= offset:
                mf.wrote_position = mf.flushed_position = self.file_size
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                pos = offset - mf.file_from_offset
                mf.wrote_position = mf.flushed_position = pos
                keep.append(mf)
            else:
                mf.destroy()
        self.files = keep
        if keep:
            keep[-1].mapping()  # written next: mapped (a loaded file is not until read)

    def release_read_pages(self) -> None:
        """What a reader of every file (recovery's scan) left in the process given back: the
        files before the last unmapped (made again when read), the last's pages dropped from its
        mapping (MADV_DONTNEED: its bytes stay in the page cache and on disk). Mapped and
        touched, 2 GB of scanned CommitLog stayed resident after a restart, pages the kernel
        could not evict for what consumers read next."""
        if not self.files:
            return
        for mf in self.files[:-1]:
            mf.unmap()
        last = self.files[-1]
        if last.mapped and hasattr(mmap, "MADV_DONTNEED"):
            with contextlib.suppress(OSError, ValueError):
                last.mm.madvise(mmap.MADV_DONTNEED, 0, self.file_size)

    def flush(self, least_pages: int = 0) -> int:
        """Sync every unsynced range (blocking); returns the new flushed offset. With
        ``least_pages``, as ``files_to_flush``."""
        for mf in self.files_to_flush(least_pages):
            mf.flush()
        return self.flushed_where

    def files_to_flush(self, least_pages: int = 0) -> list[MappedFile]:
        """The files with unsynced bytes; with ``least_pages``, of those not full only the ones
        with that many pages written since their last sync (Java's MappedFile.isAbleToFlush).
        Dirty files are the last ones (files fill in order), so the scan runs from the end and
        stops at the first full, synced file: a queue's thousands of old files cost nothing."""
        due: list[MappedFile] = []
        for mf in reversed(self.files):
            flushed, wrote = mf.flushed_position, mf.wrote_position
            if flushed < wrote:
                if not least_pages or wrote >= mf.file_size or wrote // PAGE_SIZE - flushed // PAGE_SIZE >= least_pages:
                    due.append(mf)
            elif flushed >= mf.file_size:
                break
        due.reverse()
        return due

    def is_flushed(self) -> bool:
        """Whether nothing written is unsynced (scanned from the end, as ``files_to_flush``)."""
        for mf in reversed(self.files):
            if mf.flushed_position < mf.wrote_position:
                return False
            if mf.flushed_position >= mf.file_size:
                break
        return True

    def dirty_bytes(self) -> int:
        return sum(mf.wrote_position - mf.flushed_position for mf in self.files)

    def delete_first_files(self, count: int) -> list[MappedFile]:
        removed, self.files = self.files[:count], self.files[count:]
        for mf in removed:
            mf.destroy()
        return removed

    def destroy(self) -> None:
        self._drop_preallocated()
        for mf in self.files:
            mf.destroy()
        self.files = []
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass

    def close(self) -> None:
        # A file made ahead holds nothing: removed, so a restart does not find an empty file.
        self._drop_preallocated()
        for mf in self.files:
            mf.close()
