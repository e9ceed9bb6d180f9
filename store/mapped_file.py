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
import logging
import mmap
import os

log = logging.getLogger("rocketmq.store")

# fdatasync where the OS has it (Linux), fsync elsewhere (macOS).
_datasync = getattr(os, "fdatasync", os.fsync)

# Java's AllocateMappedFileService: one thread creating the next CommitLog file ahead of need.
_allocator = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="AllocateMappedFileService")
_WARM_CHUNK = bytes(1 << 20)


def _allocate(path: str, file_size: int, warm: bool, no_readahead: int = 0) -> MappedFile:
    """Create a CommitLog file ahead of need: sparse, as Java's allocate service makes it (it
    costs no disk until written), or, when ``warm`` (Java's warmMapedFileEnable), with its
    blocks allocated, zero-written and synced, so puts never fault on a fresh page nor make a
    later fsync write the file's zeros. Every call here releases the GIL while the kernel works.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.ftruncate(fd, file_size)
        if warm:
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, file_size)
            for pos in range(0, file_size, len(_WARM_CHUNK)):
                os.pwrite(fd, _WARM_CHUNK[:file_size - pos], pos)
            _datasync(fd)
    except BaseException:
        os.close(fd)
        os.remove(path)
        raise
    os.close(fd)
    mf = MappedFile(path, file_size)
    mf.advise_no_readahead(no_readahead)
    return mf


class MappedFile:
    __slots__ = ("_address", "fd", "file_from_offset", "file_size", "flushed_position", "mm", "path", "warm_mark",
                 "warm_requested", "wrote_position")

    def __init__(self, path: str, file_size: int) -> None:
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(os.path.basename(path))
        exists = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not exists:
                os.ftruncate(fd, file_size)  # sparse: blocks are allocated as pages are touched
            elif os.fstat(fd).st_size != file_size:
                raise ValueError(f"{path} has {os.fstat(fd).st_size} bytes, expected {file_size}: refusing to load")
            self.mm = mmap.mmap(fd, file_size)
        except BaseException:
            os.close(fd)
            raise
        # Kept open for fdatasync, which (unlike mmap.flush) releases the GIL while it waits on
        # the disk, and on Linux writes back pages dirtied through the mapping too.
        self.fd = fd
        self.wrote_position = 0
        self.flushed_position = 0
        # store.prefault's bookkeeping: the write position at which the writer next asks for
        # pages ahead, and how far it has asked already.
        self.warm_mark = 0
        self.warm_requested = 0
        self._address: int | None = None

    def address(self) -> int | None:
        """The mapping's address, for madvise; None once closed. Taken through a buffer export
        that is released at once, so ``close`` is never refused because of it."""
        if self._address is None and self.fd >= 0:
            try:
                view = (ctypes.c_char * 1).from_buffer(self.mm)
            except (ValueError, TypeError):  # closed
                return None
            self._address = ctypes.addressof(view)
            del view
        return self._address if self.fd >= 0 else None

    def advise_no_readahead(self, length: int) -> None:
        """No readahead on the first ``length`` bytes of a file just created (sparse).

        A page fault on a hole makes the kernel read ahead, and reading ahead over holes is
        zero-filling: the first write into a new file zeroes up to 8 MiB of page cache in the
        writer's thread, 17 ms measured here, once per new ConsumeQueue file, that is once per
        queue of every new topic, a stall of the whole event loop. Without readahead a fault costs
        one page. Files loaded at start keep the kernel's default, for cold sequential reads.
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

    def flush(self, up_to: int | None = None) -> int:
        """msync what was written since the last flush (blocking: call it in a thread)."""
        end = self.wrote_position if up_to is None else min(up_to, self.wrote_position)
        if end > self.flushed_position:
            _datasync(self.fd)
            # Two group-commit flushes may run at once: the position only moves forward.
            self.flushed_position = max(self.flushed_position, end)
        return self.flushed_position

    def read(self, pos: int, size: int) -> bytes:
        return self.mm[pos:pos + size]

    def destroy(self) -> None:
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        fd, self.fd = self.fd, -1  # first, so a warming thread stops before the unmap
        if fd < 0:
            return
        try:
            self.mm.close()
        except BufferError:
            pass
        os.close(fd)


class MappedFileQueue:
    """The files of one log (the CommitLog, or one consume queue) in offset order."""

    def __init__(self, store_path: str, file_size: int, preallocate: bool = False, warm: bool = False,
                 no_readahead: int | None = None) -> None:
        self.store_path = store_path
        self.file_size = file_size
        # Head of each new file advised MADV_RANDOM (MappedFile.advise_no_readahead); all of it
        # by default.
        self.no_readahead = file_size if no_readahead is None else no_readahead
        self.files: list[MappedFile] = []
        self.preallocate = preallocate
        self.warm = warm
        self._next: concurrent.futures.Future[MappedFile] | None = None

    def load(self) -> None:
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
            mf = MappedFile(path, self.file_size)
            # Positions are provisionally "full"; recovery sets the real write position.
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def get_last_mapped_file(self, start_offset: int = 0) -> MappedFile:
        """The file to write into, creating the next one when the last is full (or none exists)."""
        last = self.last()
        if last is not None and not last.is_full:
            return last
        create_offset = start_offset - start_offset % self.file_size if last is None else \
            last.file_from_offset + self.file_size
        os.makedirs(self.store_path, exist_ok=True)
        mf = self._take_preallocated(create_offset)
        if mf is None:
            path = os.path.join(self.store_path, MappedFile.file_name(create_offset))
            exists = os.path.exists(path)
            if self.preallocate and not exists:
                # Never warmed here: warming a whole file would stall this put.
                mf = _allocate(path, self.file_size, warm=False, no_readahead=self.no_readahead)
            else:
                mf = MappedFile(path, self.file_size)
                if not exists:
                    mf.advise_no_readahead(self.no_readahead)
        self.files.append(mf)
        self.preallocate_next()
        return mf

    def preallocate_next(self) -> None:
        """Start creating the file after the last one, in the allocator thread."""
        last = self.last()
        if not self.preallocate or self._next is not None or last is None:
            return
        path = os.path.join(self.store_path, MappedFile.file_name(last.file_from_offset + self.file_size))
        if not os.path.exists(path):
            self._next = _allocator.submit(_allocate, path, self.file_size, self.warm, self.no_readahead)

    def _take_preallocated(self, offset: int) -> MappedFile | None:
        """The file made ahead for ``offset``, waiting for it if it is still being made (as Java
        does); None when there is none, it failed (a full disk, say), or it is for another offset."""
        fut, self._next = self._next, None
        if fut is None:
            return None
        try:
            mf = fut.result()
        except OSError as exc:
            log.warning("preallocating the next mapped file failed: %s", exc)
            return None
        if mf.file_from_offset != offset:
            mf.destroy()
            return None
        return mf

    def _drop_preallocated(self) -> None:
        fut, self._next = self._next, None
        if fut is not None:
            with contextlib.suppress(OSError):
                fut.result().destroy()

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

    def flush(self) -> int:
        """Sync every unsynced range (blocking); returns the new flushed offset."""
        for mf in list(self.files):
            if mf.flushed_position < mf.wrote_position:
                mf.flush()
        return self.flushed_where

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
