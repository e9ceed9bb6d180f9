"""rocketmq_py.store.prefault: CommitLog pages are faulted in ahead of the writer by a thread, and only there;
new files are not read ahead in the writer's thread.

Residency is read with mincore(2) on the store's own mapping, so these tests see what the kernel
did, not what the warmer counted.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import sys
import time
from collections.abc import Iterator

import pytest

from rocketmq_py.store import prefault
from rocketmq_py.store.commit_log import (
    COMMIT_LOG_NO_READAHEAD,
    COMMIT_LOG_RESERVE_CHUNK,
    CommitLog,
)
from rocketmq_py.store.config import FlushDiskType, MessageStoreConfig
from rocketmq_py.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rocketmq_py.store.file_sync import syncfs
from rocketmq_py.store.mapped_file import MappedFile, create_reserved
from rocketmq_py.store.prefault import MADV_POPULATE_READ, MADV_POPULATE_WRITE, PageWarmer
from tests.store_helpers import message

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise populate is Linux's")

MiB = 1 << 20
FILE_SIZE = 64 * MiB
AHEAD = 24 * MiB
PAGE = mmap.PAGESIZE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)


def resident_pages(mf: MappedFile, start: int, stop: int) -> int:
    """How many pages of [start, stop) of the mapping are in memory."""
    base = mf.address()
    assert base is not None
    pages = (stop - start) // PAGE
    vec = ctypes.create_string_buffer(pages)
    assert _libc.mincore(base + start, stop - start, vec) == 0, ctypes.get_errno()
    return sum(b & 1 for b in vec.raw)


def wait_resident(mf: MappedFile, start: int, stop: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while (n := resident_pages(mf, start, stop)) < (stop - start) // PAGE and time.monotonic() < deadline:
        time.sleep(0.01)
    return n


def commit_log(tmp_path: object, **overrides: object) -> CommitLog:
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=FILE_SIZE, **overrides)
    return CommitLog(cfg)


@pytest.fixture
def warm_log(tmp_path: object) -> Iterator[CommitLog]:
    # Wider than the kernel's own readahead of a first fault (8 MiB here), so what is resident
    # past that was the warmer's doing.
    log = commit_log(tmp_path, warmAheadCommitLog=AHEAD)
    if not log.warmer.enabled:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE")
    yield log
    log.warmer.close()
    log.queue.close()


def test_pages_ahead_of_the_writer_are_resident_and_nothing_far_beyond(warm_log: CommitLog) -> None:
    assert warm_log.warmer.advice == MADV_POPULATE_WRITE
    warm_log.append_message(message("T", b"x" * 100))
    mf = warm_log.queue.files[-1]
    assert wait_resident(mf, 0, AHEAD) == AHEAD // PAGE
    # A sparse file's far tail stays out of memory: the window is populated, not the file (the
    # kernel's own readahead of a fault reaches some MiB further, never this far).
    assert resident_pages(mf, 48 * MiB, FILE_SIZE) == 0
    threads = warm_log.warmer._threads
    assert len(threads) == warm_log.config.warmCommitLogThreads
    for thread in threads:
        assert thread.native_id is not None
        assert os.getpriority(os.PRIO_PROCESS, thread.native_id) == 19, "warming only takes CPU nobody else wants"


def test_the_window_follows_the_writer(warm_log: CommitLog) -> None:
    body = bytes(range(256)) * 256
    results = [warm_log.append_message(message("T", body))]
    # The first window in place before the writer goes on: this loop writes faster than a warmer
    # reading ahead (how a first request is taken), and pages a writer passes are then its own
    # (WRITER_LEAD), not the warmer's.
    assert wait_resident(warm_log.queue.files[-1], 0, AHEAD) == AHEAD // PAGE
    while warm_log.queue.files[-1].wrote_position < 5 * MiB:
        results.append(warm_log.append_message(message("T", body)))
    mf = warm_log.queue.files[-1]
    end = mf.wrote_position
    assert mf.warm_requested >= end + MiB
    start, stop = end - end % PAGE, mf.warm_requested - mf.warm_requested % PAGE
    assert wait_resident(mf, start, stop) == (stop - start) // PAGE
    # Warming never changes a byte: every record reads back with its body.
    for r in results:
        record = warm_log.get_data(r.wrote_offset, r.wrote_bytes)
        assert record is not None and body in record


def test_an_overtaken_warmer_starts_again_past_the_writer(tmp_path: object) -> None:
    """Pages the writer has passed are written already: a warmer behind it skips them and the
    writer's next WRITER_LEAD bytes (the writer takes those itself) and populates from there."""
    path = os.path.join(str(tmp_path), "00000000000000000000")
    create_reserved(path, 16 * MiB)
    mf = MappedFile(path, 16 * MiB)
    warmer = PageWarmer(AHEAD, MADV_POPULATE_WRITE)
    if not warmer.enabled:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE")
    try:
        mf.mm.madvise(mmap.MADV_RANDOM)  # no readaround of the populating faults: only what is asked
        mf.wrote_position = 4 * MiB + 100  # as if written that far (nothing is: its pages stay out)
        warmer._populate(mf, 0, 8 * MiB)
        restart = 4 * MiB + 100 + prefault.WRITER_LEAD
        restart -= restart % PAGE
        assert resident_pages(mf, 0, restart) == 0
        assert resident_pages(mf, restart, 8 * MiB) == (8 * MiB - restart) // PAGE
        assert resident_pages(mf, 8 * MiB, 16 * MiB) == 0
        mf.wrote_position = 0  # ahead of the writer: from where it was asked
        warmer._populate(mf, 0, 2 * MiB)
        assert resident_pages(mf, 0, 2 * MiB) == 2 * MiB // PAGE
    finally:
        mf.close()


def test_sync_flush_populates_without_dirtying(tmp_path: object) -> None:
    log = commit_log(tmp_path, flushDiskType=FlushDiskType.SYNC_FLUSH)
    assert log.warmer.advice == MADV_POPULATE_READ
    log.append_message(message("T", b"r" * 100))
    mf = log.queue.files[-1]
    log.warmer._populate(mf, 0, 2 * MiB)
    assert not mf.is_writable(PAGE, PAGE), "pages populated readable are not the writer's to copy into"
    log.queue.close()


@pytest.fixture
def reserved_file(tmp_path: object) -> Iterator[MappedFile]:
    path = os.path.join(str(tmp_path), "00000000000000000000")
    create_reserved(path, 16 * MiB, 16 * MiB)
    mf = MappedFile(path, 16 * MiB)
    yield mf
    mf.close()


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def test_a_large_record_goes_into_pages_populated_writable_through_the_mapping(reserved_file: MappedFile) -> None:
    """Pages the warmer populated writable take a record by a copy into the mapping, with no
    fault; once a sync has cleaned them (it writes the populated zeros too), by pwritev again.
    Either way the file holds the record's bytes."""
    mf = reserved_file
    warmer = PageWarmer(AHEAD, MADV_POPULATE_WRITE)
    if not warmer.enabled:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE")
    warmer._populate(mf, 0, 4 * MiB)
    warmer._populate(mf, 4 * MiB, 8 * MiB)  # contiguous: one run of writable bytes
    assert mf.is_writable(0, 8 * MiB) and not mf.is_writable(7 * MiB, 2 * MiB)
    parts: list[bytes | bytearray | memoryview] = [os.urandom(100), os.urandom(3 * MiB), os.urandom(50)]
    record = b"".join(parts)
    before = minor_faults()
    mf.write_parts(3 * MiB, parts)
    assert minor_faults() - before < 16, "a store into populated pages faulted"
    assert mf._write_fd is None, "went by pwritev"
    assert mf.read(3 * MiB, len(record)) == record
    mf.wrote_position = 3 * MiB + len(record)
    mf.flush()
    assert not mf.is_writable(7 * MiB, 4096), "a sync cleaned the pages ahead"
    mf.write_parts(7 * MiB, parts)
    assert mf._write_fd is not None
    assert mf.read(7 * MiB, len(record)) == record
    with open(mf.path, "rb") as f:
        f.seek(3 * MiB)
        assert f.read(len(record)) == record
    warmer._populate(mf, 12 * MiB, 13 * MiB)  # after the sync: writable again
    assert mf.is_writable(12 * MiB, MiB) and not mf.is_writable(11 * MiB, 2 * MiB)
    mf.unmap()
    assert not mf.is_writable(12 * MiB, PAGE), "populated in the mapping released"


def test_pieces_populated_out_of_order_join_into_one_writable_run(reserved_file: MappedFile) -> None:
    """Several warming threads finish their pieces out of order: a piece past a gap waits until
    the gap's piece joins it, and the writer gets the whole run."""
    mf = reserved_file
    warmer = PageWarmer(AHEAD, MADV_POPULATE_WRITE, threads=2)
    if not warmer.enabled:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE")
    warmer._populate(mf, 2 * MiB, 3 * MiB)
    warmer._populate(mf, 4 * MiB, 5 * MiB)  # ahead of a gap
    assert mf.is_writable(2 * MiB, MiB) and not mf.is_writable(2 * MiB, 2 * MiB)
    warmer._populate(mf, 3 * MiB, 4 * MiB)  # the gap
    assert mf.is_writable(2 * MiB, 3 * MiB)
    mf.wrote_position = 5 * MiB + 100  # the writer has passed that run: the next one is its
    warmer._populate(mf, 7 * MiB, 8 * MiB)
    warmer._populate(mf, 6 * MiB, 7 * MiB)
    assert mf.is_writable(6 * MiB, 2 * MiB) and not mf.is_writable(4 * MiB, PAGE)
    mf.syncs.started += 1
    mf.syncs.ended += 1
    assert not mf.is_writable(6 * MiB, PAGE), "a sync cleaned them"
    warmer._populate(mf, 9 * MiB, 10 * MiB)  # since the sync: a run of its own, the older ones gone
    warmer._populate(mf, 8 * MiB, 9 * MiB)
    assert mf.is_writable(8 * MiB, 2 * MiB) and not mf.is_writable(7 * MiB, 2 * MiB)


def test_pages_populated_while_a_sync_runs_are_not_taken_as_writable(reserved_file: MappedFile) -> None:
    mf = reserved_file
    warmer = PageWarmer(AHEAD, MADV_POPULATE_WRITE)
    if not warmer.enabled:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE")
    mf.syncs.started += 1  # a sync has started (the flush thread's): it may clean what is populated now
    warmer._populate(mf, 0, 2 * MiB)
    assert not mf.is_writable(0, PAGE)
    mf.syncs.ended += 1
    warmer._populate(mf, 2 * MiB, 4 * MiB)
    assert mf.is_writable(2 * MiB, 2 * MiB) and not mf.is_writable(MiB, 2 * MiB)
    parts = [b"h" * 100, bytes(range(256)) * 4096, b"t" * 10]
    mf.write(2 * MiB, b"".join(parts))
    assert mf._write_fd is None
    assert mf.read(2 * MiB, 100 + MiB + 10) == b"".join(parts)
    # A sync of the whole filesystem (the ConsumeQueues' flush of many files) cleans them too.
    if not syncfs(mf.path):
        pytest.skip("no syncfs here")
    assert not mf.is_writable(3 * MiB, PAGE)


def test_a_slow_writer_s_pages_are_read_ahead_before_they_are_populated_a_fast_one_s_are_not(
        reserved_file: MappedFile, monkeypatch: pytest.MonkeyPatch) -> None:
    """Readahead allocates a slow writer's pages, exactly those asked (a populate's fault reads
    around it, zero-filling up to the device's readahead in one call), then the populate maps them;
    a writer past GENTLE_BYTES_PER_S gets the populate alone, and a first request, whose writer's
    rate is not known yet, is taken as slow. Either way no byte of the file changes."""
    mf = reserved_file
    warmer = PageWarmer(4 * MiB, MADV_POPULATE_WRITE)
    if not warmer.enabled or not hasattr(os, "posix_fadvise"):
        pytest.skip("this kernel has no MADV_POPULATE_WRITE, or this OS no posix_fadvise")
    assert warmer.step == MiB
    written = os.urandom(PAGE)
    mf.write(2 * MiB, written)  # already in the file where the warmer will populate
    events: list[tuple[str, int, int]] = []
    real_fadvise = os.posix_fadvise

    def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        events.append(("readahead", offset, length))
        assert advice == os.POSIX_FADV_WILLNEED
        real_fadvise(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", fadvise)
    base = mf.address()
    assert base is not None
    madvise = warmer._madvise
    assert madvise is not None

    def populate(address: int, length: int, advice: int) -> int:
        events.append(("populate", address - base, length))
        return int(madvise(address, length, advice))

    warmer._madvise = populate
    try:
        warmer.request(mf, 0)  # [0, 4 MiB): a first request, its writer's rate unknown, taken as slow
        warmer.request(mf, MiB)  # [4, 5 MiB): the next step at once, a fast writer's
        time.sleep(1.2 * MiB / prefault.GENTLE_BYTES_PER_S)  # the writer's next steps come slowly
        warmer.request(mf, 2 * MiB)  # [5, 6 MiB)
        time.sleep(1.2 * MiB / prefault.GENTLE_BYTES_PER_S)
        warmer.request(mf, 3 * MiB)  # [6, 7 MiB)
        deadline = time.monotonic() + 10
        while warmer.populated < 7 * MiB and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        warmer.close()
    assert warmer.populated == 7 * MiB
    populated = [offset for kind, offset, _ in events if kind == "populate"]
    read_ahead = [offset for kind, offset, _ in events if kind == "readahead"]
    assert populated == [n * MiB for n in range(7)]
    assert read_ahead == [0, MiB, 2 * MiB, 3 * MiB, 5 * MiB, 6 * MiB]
    for offset in read_ahead:
        assert events.index(("readahead", offset, MiB)) < events.index(("populate", offset, MiB))
    mf.write(5 * MiB + 100, written)  # the writer reaches pages read ahead and populated
    assert mf.read(2 * MiB, PAGE) == written and mf.read(5 * MiB + 100, PAGE) == written
    assert mf.read(0, PAGE) == bytes(PAGE) and mf.read(6 * MiB, PAGE) == bytes(PAGE)


def test_off_means_no_thread_and_no_pages(tmp_path: object) -> None:
    log = commit_log(tmp_path, warmAheadCommitLog=0)
    try:
        log.append_message(message("T", b"z" * 100))
        mf = log.queue.files[-1]
        # Back at the mark only to reserve more blocks (CommitLog._ahead), never to warm.
        assert mf.warm_mark == mf.reserved - COMMIT_LOG_RESERVE_CHUNK // 2
        assert log.warmer.populated == 0 and not log.warmer._threads
    finally:
        log.queue.close()


def test_a_file_closed_under_the_warmer_is_left_alone(warm_log: CommitLog) -> None:
    warm_log.append_message(message("T", b"w" * 100))
    mf = warm_log.queue.files[-1]
    mf.close()
    assert mf.address() is None
    warm_log.warmer.request(mf, MiB)  # queued for a closed file: the thread skips it
    warm_log.warmer.close()
    assert warm_log.warmer.enabled


def test_a_new_consume_queue_file_is_not_read_ahead(tmp_path: object) -> None:
    """The first unit written into a new file faults in a page or so, not the whole 6 MB file
    (which the kernel's readahead would zero-fill in the broker's event loop)."""
    cq = ConsumeQueue("T", 0, str(tmp_path), 300_000 * CQ_STORE_UNIT_SIZE)
    try:
        cq.put_message_position_info(0, 100, 0, 0)
        mf = cq.queue.files[-1]
        assert resident_pages(mf, 0, mf.file_size - mf.file_size % PAGE) <= 4
    finally:
        cq.queue.close()


def test_a_new_commit_log_file_head_is_not_read_ahead_past_the_warmer(warm_log: CommitLog) -> None:
    warm_log.warmer.ahead = 2 * MiB  # narrower than the no-readahead head
    warm_log.append_message(message("T", b"h" * 100))
    mf = warm_log.queue.files[-1]
    assert wait_resident(mf, 0, 2 * MiB) == 2 * MiB // PAGE
    assert resident_pages(mf, 4 * MiB, COMMIT_LOG_NO_READAHEAD) == 0


def evicted(mf: MappedFile) -> None:
    """``mf``'s written pages synced and dropped from the page cache, as after a restart and a
    dropped cache (its mapping never touched them: large records go in by pwritev)."""
    mf.flush()
    fd = os.open(mf.path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
