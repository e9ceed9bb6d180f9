"""MappedFile.read_ahead / CommitLog.read_ahead: what a pull reads next is asked from the disk by
the read-ahead thread, never by the event loop, each byte once for readers going forward.

Residency is read with mincore(2) on the store's own mapping, so these tests see what the kernel
did, not what the bookkeeping says.
"""

from __future__ import annotations

import os
import sys
import threading

import pytest

from rocketmq_py.store import mapped_file
from rocketmq_py.store.commit_log import COMMIT_LOG_READ_AHEAD, CommitLog
from rocketmq_py.store.config import MessageStoreConfig
from rocketmq_py.store.mapped_file import MappedFile, wait_read_ahead
from tests.store_helpers import message
from tests.unit.test_prefault import PAGE, MiB, evicted, resident_pages, wait_resident

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="posix_fadvise and mincore are Linux's")


def commit_log(tmp_path: object, file_size: int) -> CommitLog:
    return CommitLog(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=file_size,
                                        warmAheadCommitLog=0))


class Asks:
    """What the read-ahead thread is asked (``_will_need``'s calls): by which thread, which bytes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, int, int]] = []
        real = mapped_file._will_need

        def will_need(path: str, start: int, stop: int) -> None:
            self.calls.append((threading.current_thread().name, start, stop))
            real(path, start, stop)

        monkeypatch.setattr(mapped_file, "_will_need", will_need)

    def asked(self) -> list[tuple[int, int]]:
        """The bytes asked since the last call, joined where contiguous."""
        wait_read_ahead()
        spans: list[tuple[int, int]] = []
        for _, start, stop in self.calls:
            if spans and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], stop)
            else:
                spans.append((start, stop))
        self.calls.clear()
        return spans


class Reads:
    """The kernel's fadvise(WILLNEED) calls, by thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str, int]] = []
        fadvise = os.posix_fadvise

        def spy_fadvise(fd: int, offset: int, length: int, advice: int) -> None:
            if advice == os.POSIX_FADV_WILLNEED:
                self.calls.append(("fadvise", threading.current_thread().name, offset))
            fadvise(fd, offset, length, advice)

        monkeypatch.setattr(os, "posix_fadvise", spy_fadvise)


def written_log(tmp_path: object, file_size: int, count: int) -> tuple[CommitLog, list[int], bytes]:
    log = commit_log(tmp_path, file_size)
    body = os.urandom(256 * 1024)
    offsets = [log.append_message(message("T", body)).wrote_offset for _ in range(count)]
    return log, offsets, body


def test_a_read_asks_the_disk_for_the_window_after_it_off_the_event_loop(
        tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The written bytes of COMMIT_LOG_READ_AHEAD from a read's offset come into memory without
    the reader touching them, asked by the read-ahead thread (the caller's thread never calls
    the kernel), and the bytes read are the bytes written."""
    log, offsets, body = written_log(tmp_path, 128 * MiB, 200)  # 50 MiB and a bit
    asks = Asks(monkeypatch)
    try:
        mf = log.queue.files[-1]
        evicted(mf)
        if resident_pages(mf, 0, 48 * MiB) > 64:
            pytest.skip("this filesystem kept the pages it was told to drop")
        first = offsets[8]
        log.read_ahead(first)
        start = first - first % PAGE
        stop = first + COMMIT_LOG_READ_AHEAD
        assert asks.asked() == [(start, stop)]
        assert wait_resident(mf, start, stop - stop % PAGE) == (stop - stop % PAGE - start) // PAGE
        past = stop - stop % PAGE + 8 * MiB
        assert resident_pages(mf, past, 50 * MiB) == 0, "read in past the window"
        for offset in offsets:
            data = log.get_data(offset, 1024 * 1024)
            assert data is None or data.find(body) >= 0
    finally:
        log.queue.close()


def test_readers_going_forward_each_ask_only_what_none_asked(tmp_path: object,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    log, offsets, _ = written_log(tmp_path, 256 * MiB, 700)  # 175 MiB and a bit
    asks = Asks(monkeypatch)
    window = COMMIT_LOG_READ_AHEAD
    try:
        base = offsets[200]
        mf = log.queue.files[-1]
        log.read_ahead(base)
        assert asks.asked() == [(base - base % PAGE, base + window)]
        # A topic's queues interleave in the log: readers ahead of the first by less than a
        # quarter of the window ask nothing, one a little behind it only the bytes before it.
        for at in (base + window // 4 - 1, base + 1, base + 3 * MiB):
            log.read_ahead(at)
        assert asks.asked() == []
        behind = base - 3 * MiB
        log.read_ahead(behind)
        assert asks.asked() == [(behind - behind % PAGE, base)]
        log.read_ahead(behind + 1)
        assert asks.asked() == []
        # A quarter of the window on, the bytes from where the last ask ended to the new window's end.
        log.read_ahead(base + window // 4)
        assert asks.asked() == [(base + window - (base + window) % PAGE, base + window // 4 + window)]
        log.read_ahead(base + 2)  # a reader still behind: nothing again
        assert asks.asked() == []
        far = base + 2 * window + 4 * MiB
        log.read_ahead(far)  # beyond what was asked (a jump): the window from there
        assert asks.asked() == [(far - far % PAGE, far + window)]
        log.read_ahead(base - window)  # well behind what was asked now (another group, say): from there
        assert asks.asked() == [(base - window - base % PAGE, base)]
        assert (mf.read_ahead_from, mf.read_ahead_to) == (base - window, base)
    finally:
        log.queue.close()


def test_the_kernel_is_asked_by_the_read_ahead_thread_only(tmp_path: object,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    log, _, _ = written_log(tmp_path, 128 * MiB, 200)
    reads = Reads(monkeypatch)
    try:
        log.read_ahead(0)
        wait_read_ahead()
        assert {name for _, name, _ in reads.calls} == {"ReadAheadService_0"}
        assert sorted(at for _, _, at in reads.calls) == list(range(0, COMMIT_LOG_READ_AHEAD, MiB))
    finally:
        log.queue.close()


def test_a_window_past_a_files_end_asks_the_next_files_head(tmp_path: object,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    file_size = 64 * MiB
    log, offsets, _ = written_log(tmp_path, file_size, 400)  # two files and a half
    asks = Asks(monkeypatch)
    try:
        first, second = log.queue.files[0], log.queue.files[1]
        near_end = next(o for o in offsets if o > file_size - 8 * MiB)
        log.read_ahead(near_end)
        wait_read_ahead()
        over = near_end + COMMIT_LOG_READ_AHEAD - file_size
        assert (first.read_ahead_to, second.read_ahead_from, second.read_ahead_to) == (
            near_end + COMMIT_LOG_READ_AHEAD, 0, over)
        assert (0, over) in asks.asked()
        evicted(second)
        second.read_ahead_from = second.read_ahead_to = 0  # asked again, now that it is dropped
        log.read_ahead(near_end + 4 * MiB)
        wait_read_ahead()
        head = over + 4 * MiB
        assert wait_resident(second, 0, head - head % PAGE) == (head - head % PAGE) // PAGE
    finally:
        log.queue.close()


def test_a_released_or_deleted_file_is_not_a_failure(tmp_path: object) -> None:
    log, offsets, _ = written_log(tmp_path, 64 * MiB, 20)
    mf: MappedFile = log.queue.files[-1]
    mf.unmap()
    log.read_ahead(offsets[0])  # unmapped: the thread reads the file by its path
    wait_read_ahead()
    os.remove(mf.path)
    mf.read_ahead_from = mf.read_ahead_to = 0
    log.read_ahead(offsets[0])  # gone: nothing asked, nothing raised
    wait_read_ahead()
    log.queue.files.clear()
