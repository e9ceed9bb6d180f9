"""Faulting a CommitLog file's pages in ahead of its writer, on a thread of their own.

A put that lands on a page nobody has touched pays a page fault inside the event loop: the
kernel reads the file's hole, zero-fills a page and, on a VM, the hypervisor may first have to
back that memory. Measured here, that is 10 to 100 µs per 32 KiB written, as much as all the
Python work of a batch. Java's writer pays it on its own thread (or warms whole files with
``warmMapedFileEnable``); here one thread asks the kernel to populate the next few MiB of the
mapping with ``madvise``. Population changes no byte of the file, so it may race the writer
freely, and ctypes releases the GIL for the call, so the loop goes on while the kernel works.

Under ASYNC_FLUSH the pages are populated writable (MADV_POPULATE_WRITE), so the writer takes
no fault at all. Under SYNC_FLUSH they are populated readable only (MADV_POPULATE_READ): a
writable page is dirty, and a group-commit fsync would then write the zeros ahead of the data.
Both need Linux 5.14; elsewhere, or when the kernel refuses, warming turns itself off and puts
fault as before.

A slow writer's pages are read ahead (``posix_fadvise(WILLNEED)``) before they are populated. A
populate's first fault in a window reads around it, the device's whole readahead (8 MiB here), and
over unwritten blocks that read is the filesystem zero-filling the window's new large folios in
one call (perf of ``bench/page_warm.py``: 81% of the populate's CPU in ``memset`` under
``ext4_mpage_readpages``; not compaction, ``compact_stall`` stays 0). On memory the host must back
again that is tens of milliseconds (up to 73 ms, about one 1 MiB call in ten), during which the
call holds its CPU in the kernel and whatever is queued on that CPU waits as long. In W5-like
runs (1 KiB at 2,000/s) every group of 11 or more late messages was the broker's event loop
queued behind a warmer inside such a call (docs/latency.md). Readahead of the piece allocates
exactly its pages, evenly (none of its calls over 5 ms in the same bench); the populate after it
only maps them. It costs the warmer 0.7 ms more CPU per MiB (0.8 against 0.14), which a writer of
1 MiB sends cannot spare (``bench/scale.py``'s ``mb_1mib`` fell from 0.56-0.74 to 0.31-0.44 with
readahead at every rate), so only a writer slower than GENTLE_BYTES_PER_S gets it, and one whose
rate is not known yet (its first request).
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import errno
import functools
import logging
import mmap
import os
import queue
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocketmq_py.store.mapped_file import MappedFile

log = logging.getLogger("rocketmq.store")

MADV_POPULATE_READ = 22
MADV_POPULATE_WRITE = 23
# One madvise call covers at most this much, so a closed file is noticed between calls. Calls of
# 64 KiB with a sched_yield after each were tried against busy-polling loops losing their CPU to
# long calls: in W5-like runs on a warm broker (quiet, alternated, 6 runs each) p99.9 went from
# 2.0-2.7 ms to 2.7-10.5 ms, so the thread keeps its CPU for a whole MiB.
_CALL_BYTES = 1 << 20
_PAGE = mmap.PAGESIZE
# Where a thread the writer has overtaken starts again: this far past it. The pages it
# has passed are written (populating them is wasted work), and the writer takes the next ones
# itself while the thread populates beyond them, so the two bring fresh pages in side by side.
# With 1 MiB sends at 8 in flight the writer took 92% of its pages unpopulated, and paid them:
# kernel time in the event loop 703-928 µs per send; from 1 MiB past it, 11-56% and 334-494 µs
# (4 MiB past it: 43-49%, 417-494 µs).
WRITER_LEAD = 1 << 20
# Writers slower than this (bytes a second, judged by the time between two requests) have their
# pages read ahead before they are populated (the module's docstring): at most 0.8 ms more of the
# warmer's CPU per MiB, 2.7% of a core at this rate, to take no 8 MiB zero-fill in one fault.
GENTLE_BYTES_PER_S = 32 << 20
_WILLNEED = getattr(os, "POSIX_FADV_WILLNEED", None)  # not on macOS


@functools.cache
# type-ignored: ctypes' foreign-function type is private in typeshed
def _load_madvise() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if not sys.platform.startswith("linux"):
        return None
    try:
        # The interpreter's own symbols include libc's (find_library would run ldconfig).
        func = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    func.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    func.restype = ctypes.c_int
    return func


class PageWarmer:
    """Keeps ``ahead`` bytes past each file's write position populated.

    The writer calls ``request`` when its position passes the file's ``warm_mark``; a request
    re-arms the mark one ``step`` further on, so the put path pays one comparison per record and
    one queue put per ``step`` bytes written.
    """

    def __init__(self, ahead: int, advice: int, step: int = 1 << 20, threads: int = 1) -> None:
        self.ahead = ahead
        self.step = min(step, max(_PAGE, ahead // 2))
        self.advice = advice
        self._madvise = _load_madvise()
        self.enabled = ahead > 0 and self._madvise is not None
        # Several threads populate the window side by side, each taking the next piece of at most
        # _CALL_BYTES that is free. On memory the guest has handed back to the host, whoever
        # touches a page first pays ~10 µs for it, and a writer of large records overtakes one
        # thread (docs/store-formats.md#writing-the-commitlog). Brokers under 1 MiB sends at 8 in
        # flight, one thread and two alternated (7 each, load 4.3-7.1): 323-478 -> 273-555 MB/s
        # (medians 406 -> 523) on that memory, 404-870 -> 529-708 (586 -> 628) on memory just freed;
        # the event loop's CPU per MiB 649 -> 561 and 788 -> 629 (medians of two runs).
        self.threads = max(1, threads)
        # (file, start, stop, read ahead first)
        self._jobs: queue.SimpleQueue[tuple[MappedFile, int, int, bool] | None] = queue.SimpleQueue()
        # When the writer last asked, to tell a slow writer (GENTLE_BYTES_PER_S). Until a second
        # request tells its rate, a writer is taken as slow: the first request asks for the whole
        # window at once (32 MiB), and populated straight away on a fresh broker its readarounds'
        # zero-fills (8 MiB a fault) ran beside the first messages. Fresh brokers under W5-like
        # runs (1 KiB at 2,000/s, 6 each, alternated, quiet): the first run's p99.9 7.5-13.1 ms
        # (median 11.5) taken as fast, 5.4-15.9 (6.8) taken as slow; the 9 runs after them 3.4-20.3
        # (5.0) and 2.5-4.1 (3.5). A fast writer loses 0.7 ms of the warmer's CPU per MiB over
        # that one window.
        self._last_request: float | None = None
        self._threads: list[threading.Thread] = []
        # Held while the bytes populated writable are recorded (_made_writable): pieces end out of
        # order when several threads populate them.
        self._lock = threading.Lock()
        # The pieces populated writable in ``_runs_of``'s mapping at ``_runs_base`` since the sync
        # mark ``_runs_mark``, as disjoint (start, end) runs in order; the one the writer reaches
        # first is the file's ``writable``.
        self._runs_of: MappedFile | None = None
        self._runs_base = 0
        self._runs_mark = -1
        self._runs: list[tuple[int, int]] = []
        # Bytes populated so far (tests and diagnostics read it).
        self.populated = 0

    def request(self, mf: MappedFile, end: int) -> None:
        """The writer has written (or is writing) up to ``end`` of ``mf``."""
        if not self.enabled:
            mf.warm_mark = mf.file_size  # never asked again for this file
            return
        mf.warm_mark = end + self.step
        start = max(mf.warm_requested, end - end % _PAGE)
        stop = end + self.ahead
        # Page-aligned, because it is where the next request starts and madvise wants aligned starts.
        stop = min(mf.file_size, stop - stop % _PAGE)
        if stop <= start:
            return
        mf.warm_requested = stop
        if not self._threads:
            self.start()
        now = time.monotonic()
        # A request comes each ``step`` bytes written: a gap of ``step / GENTLE_BYTES_PER_S``
        # seconds or more is a writer below that rate.
        last = self._last_request
        gentle = _WILLNEED is not None and (last is None or (now - last) * GENTLE_BYTES_PER_S >= self.step)
        self._last_request = now
        put = self._jobs.put
        for pos in range(start, stop, _CALL_BYTES):
            put((mf, pos, min(stop, pos + _CALL_BYTES), gentle))

    def start(self) -> None:
        """The thread, started when the store starts rather than at the first put: ``Thread.start``
        waits for the new thread to run, which held the broker's loop (and the first messages) for
        3 to 8 ms on a quiet machine."""
        if self.enabled and not self._threads:
            self._threads = [threading.Thread(target=self._run, name="PageWarmer", daemon=True)
                             for _ in range(self.threads)]
            for thread in self._threads:
                thread.start()

    def close(self) -> None:
        """Stop the threads after the jobs already queued."""
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join(5)
        self._threads = []

    def _run(self) -> None:
        # The lowest priority: warming only uses CPU nothing else wants. At normal priority it took
        # the second core from the index child (store_append's batches 0.91 of the bare loop
        # instead of 1.02) and from the broker's clients; at nice 19 broker batches still gain.
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        while (job := self._jobs.get()) is not None:
            mf, start, stop, gentle = job
            try:
                if gentle:
                    self._read_ahead_and_populate(mf, start, stop)
                else:
                    self._populate(mf, start, stop)
            except Exception:  # a thread must not die silently: warming is only an optimisation
                log.exception("warming %s failed; puts will fault their own pages", mf.path)
                self.enabled = False

    def _read_ahead_and_populate(self, mf: MappedFile, start: int, stop: int) -> None:
        """``_populate``, each piece read ahead first, through a descriptor of the job's own: the
        writer's may be closed (and its number reused) by the loop meanwhile, and one kept past
        the job would keep a removed file's blocks."""
        try:
            fd = os.open(mf.path, os.O_RDONLY)
        except OSError:  # no descriptor left, or the file removed: populated as a fast writer's
            self._populate(mf, start, stop)
            return
        try:
            self._populate(mf, start, stop, fd)
        finally:
            os.close(fd)

    def _populate(self, mf: MappedFile, start: int, stop: int, read_ahead_fd: int | None = None) -> None:
        """Populate [start, stop) of ``mf``'s mapping, each piece read ahead first through
        ``read_ahead_fd`` when one is given."""
        madvise = self._madvise
        assert madvise is not None
        writable = self.advice == MADV_POPULATE_WRITE
        base = mf.address()
        pos = start
        while base is not None and pos < stop and mf.mapped:
            # Read from this thread, the writer's position may be a little stale: then a call
            # populates pages just written, which costs a lookup each.
            writer = mf.wrote_position
            if pos < writer - writer % _PAGE:  # overtaken: the writer is past this page
                pos = writer + WRITER_LEAD
                pos -= pos % _PAGE
                if pos >= stop:
                    return
            length = min(_CALL_BYTES, stop - pos)
            if read_ahead_fd is not None and _WILLNEED is not None:
                # Readahead changes no byte: pages already cached (written) are left as they are. A
                # refusal leaves the populate to allocate them, as a fast writer's.
                with contextlib.suppress(OSError):
                    os.posix_fadvise(read_ahead_fd, pos, length, _WILLNEED)
            mark = mf.sync_mark()
            if madvise(base + pos, length, self.advice) != 0:
                err = ctypes.get_errno()
                if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM):
                    log.info("madvise(%d) not supported here (%s): CommitLog pages fault on first write",
                             self.advice, errno.errorcode.get(err, err))
                    self.enabled = False
                return  # ENOMEM and the like: the file was unmapped under us
            if writable and mark is not None:
                self._made_writable(mf, base, pos, pos + length, mark)
            with self._lock:
                self.populated += length
            pos += length

    def _made_writable(self, mf: MappedFile, base: int, start: int, end: int, mark: int) -> None:
        """[start, end) populated writable: recorded when no sync ran meanwhile (``mark``, from
        before the call: one that did may have cleaned them) and the mapping is the one populated.
        The file's ``writable`` becomes the run of such bytes, joined with those populated next to
        them, that the writer reaches first, where it may then copy into them
        (MappedFile.is_writable). Several threads finish their pieces out of order: a piece past a
        gap waits in ``_runs`` until the gap's piece joins them."""
        with self._lock:
            if mf.sync_mark() != mark or mf.address() != base:
                return
            runs = self._runs
            if self._runs_of is not mf or self._runs_base != base or self._runs_mark != mark:
                self._runs_of, self._runs_base, self._runs_mark = mf, base, mark
                runs.clear()
            at = bisect.bisect_left(runs, (start, end))
            runs.insert(at, (start, end))
            merged: list[tuple[int, int]] = []
            writer = mf.wrote_position
            for low, high in runs:
                if merged and merged[-1][1] >= low:
                    merged[-1] = (merged[-1][0], max(merged[-1][1], high))
                else:
                    merged.append((low, high))
            # Runs the writer has passed are of no more use.
            runs[:] = [run for run in merged if run[1] > writer] or merged[-1:]
            low, high = runs[0]
            mf.writable = (low, high, mark)
